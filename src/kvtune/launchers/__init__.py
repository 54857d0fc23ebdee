"""Backends: one flag-map module per server (pure argv building) plus the process code."""
