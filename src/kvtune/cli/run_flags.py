"""The front door of `kvtune run`: the everyday flags, in help panels.

A flag that sets a setting takes its help, its name and its panel from the setting's declaration
(`from_setting`; kvtune/setting.py), so the flag and the study-file key cannot drift apart; the
rest are the run's own (`--backend`, `--workload`, `--study-file`, `--set`, the output). Every other
setting is a study-file key, given for one run with `--set KEY=VALUE` (`kvtune settings` lists
them). Nothing here is checked: the values are the user's words; cli/run.py turns them into
the checked `RunOptions`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from kvtune.cli.flag_record import from_setting, opt
from kvtune.commands import STORAGE_ENV

SET_HELP = (
    "Any other setting for this run, repeatable: KEY=VALUE with the study file's key and a YAML value, "
    "e.g. --set workload.num_requests=16 --set confirm_top=0 --set fidelity_gate=false "
    "(`kvtune settings` lists every key)."
)


@dataclass(frozen=True)
class RunFlags:
    """What `kvtune run` was given, flag by flag (None: not given)."""

    target: list[str] = from_setting("study", "targets", [], "-t")
    objective: list[str] = from_setting("study", "objective", [])
    trials: Optional[int] = from_setting("study", "trials")
    time_budget: Optional[str] = from_setting("study", "time_budget_s")
    model: Optional[str] = from_setting("study", "model")
    backend: list[str] = opt(
        [],
        "--backend",
        rich_help_panel="Server",
        help="Server to tune: llama-server (default) or vllm; repeat it, or say auto (every backend here that can serve the model), to tune each as its own study, the trials split between them, side by side.",
    )
    concurrency: Optional[int] = from_setting("workload", "concurrency")
    rate: Optional[float] = from_setting("workload", "rate")
    prompt_tokens: Optional[int] = from_setting("workload", "prompt_tokens")
    output_tokens: Optional[int] = from_setting("workload", "output_tokens")
    workload_kind: Optional[str] = opt(
        None,
        "--workload",
        rich_help_panel="Traffic",
        help="multiturn: conversations, each request carrying the history so far; trace:FILE replays a production trace's arrival times and lengths (Azure CSV, Mooncake JSONL, BurstGPT CSV; shipped: trace:azure-conv, trace:azure-code, trace:mooncake-conv).",
    )
    dataset: Optional[str] = from_setting("workload", "dataset")
    study: Optional[str] = from_setting("study", "study")
    study_file: Optional[str] = opt(
        None, "--study-file", rich_help_panel="Study", help="YAML study file: any setting as a key (see studies/)."
    )
    set: list[str] = opt([], "--set", rich_help_panel="Study", help=SET_HELP)
    storage: Optional[str] = from_setting("run", "storage", envvar=STORAGE_ENV)  # a password: not in argv
    setup_only: bool = from_setting("run", "setup_only", False)
    workers: Optional[int] = from_setting("run", "workers")
    runs_dir: Optional[str] = from_setting("run", "runs_dir")
    progress: str = opt(
        "auto",
        rich_help_panel="Output",
        help="auto (live table, bar and ETA on a terminal; plain lines otherwise) or plain.",
    )
    quiet: bool = opt(
        False,
        "--quiet",
        "-q",
        rich_help_panel="Output",
        help="Print nothing but the best command line (errors still go to stderr).",
    )
    jsonl: bool = opt(
        False,
        "--jsonl",
        rich_help_panel="Output",
        help="Print one JSON object per event (trial_started, phase, trial_finished, summary).",
    )
