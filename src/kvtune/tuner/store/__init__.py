"""Where a study lives: Optuna's storage (a SQLite file, PostgreSQL, or `kvtune proxy` in front
of it) opened with retries, its URLs and the run directory. Any study uses it, on one host or
many; what workers need from each other is tuner/fleet/'s."""
