"""kvtune: an autotuner for LLM serving.

An Optuna study launches the real server (llama-server or vLLM) with candidate flags, drives
real load at it over the OpenAI-compatible API, scores each candidate against the user's latency
targets, and emits the best command line and a ready-to-deploy launch script.
"""

__version__ = "0.1.0"
