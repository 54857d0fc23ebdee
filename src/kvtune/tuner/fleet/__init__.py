"""The study in Optuna's storage: storage URLs, workers and their recovery, what the search
spent (accounting, budget)."""
