"""Every file a workload names, read and checked before anything starts.

A trace or a dataset used to be opened at the first measurement, after the baseline's server
had started (or stored by `run --setup-only` for every worker to fail on): a typo cost a
launch. `check_workload_files` reads them the way the measurement will (the same readers, the
same one-line `SpecError`s) from `tuner.build.prepare`, which every path that starts trials
goes through (run, run --setup-only, worker). The token-length bounds of a dataset are checked
at measurement time, with the model's own tokenizer; here only that it parses and holds prompts.
A trace's fit to the model's context comes next, once the launcher has read the model
(bench/trace_sizing.py, from the same `prepare`).
"""

from __future__ import annotations

from kvtune.bench.datasets import load_conversations, load_prompts
from kvtune.bench.traces import read_trace, trace_read
from kvtune.workload import Workload


def check_workload_files(w: Workload) -> None:
    """Raise `SpecError` (one line: which file, what is wrong) when a named file is missing,
    unreadable, malformed or empty."""
    if w.trace is not None:
        read_trace(w.trace, trace_read(w))  # its filters and time unit too: a typo fails here
    if w.dataset is not None:
        if w.multiturn:
            load_conversations(w.dataset)
        else:
            load_prompts(w.dataset)  # words, no bounds: the tokenizer's bounds come at measurement
