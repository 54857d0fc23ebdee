"""The study: spec (what to tune), search space, and the ask -> launch -> measure -> tell loop.

The only package that imports optuna.
"""
