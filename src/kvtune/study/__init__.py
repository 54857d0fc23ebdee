"""The study record, read by the tuner and by artifacts alike (neither owns it): the trial
outcome, ranking, the named-best rule, the typed study spec and the results.json payload."""
