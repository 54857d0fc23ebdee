"""What to try next: the search space, samplers, warm start, parameter importance."""
