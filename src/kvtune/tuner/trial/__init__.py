"""One trial on one server: measure (repeats, capacity levels), early stop, launch retry, the
memory wait, scoring."""
