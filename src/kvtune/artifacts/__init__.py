"""What the user takes away: the launch script, results JSON, the summary. Files only here."""
