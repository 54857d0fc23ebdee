"""`kvtune run` with several backends (--backend A --backend B, or --backend auto): each backend
is tuned as its own study through the ordinary one-study path (`cli.one_study.run_study`: header,
progress, summary, results.json, launch script), one after the other, then the studies are put
side by side, from the results and trials each study just produced (nothing is read back from
disk), and the comparison is written to RUNS/NAME/compare.json. The best overall is the verdict's
test on fresh runs, or none (artifacts/side_by_side.py). The plan (which backends, what model each
serves, the budget split) is `tuner.multi_backend`'s; the table is `cli.compare`'s, the same one
`kvtune compare` prints."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

from kvtune.artifacts.side_by_side import COMPARE_FILE, compare_studies, write_comparison
from kvtune.artifacts.summary import StudySummary
from kvtune.cli.app import err_console
from kvtune.cli.compare import print_comparison
from kvtune.cli.consoles import make_console
from kvtune.cli.one_study import run_study
from kvtune.clock import REAL_CLOCK, Clock
from kvtune.durations import format_duration
from kvtune.jsonsafe import dumps
from kvtune.launchers.registry import create_launcher
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.multi_backend import BackendChoice, LauncherFactory, plan_backends
from kvtune.tuner.session import RunOptions
from kvtune.tuner.store.storage import runs_root

INTERRUPTED = 130


def run_backends(
    opts: RunOptions,
    choice: BackendChoice,
    hf_model: str | None,
    mode: str,
    factory: LauncherFactory = create_launcher,
    clock: Clock = REAL_CLOCK,
) -> int:
    """Plan, run each backend's study, compare. Exit status: 0 when a backend named a config
    (with --quiet the best overall's command line is printed when the test names one), 1 when
    none did, 130 when interrupted (the same command resumes)."""
    began = clock.monotonic()
    plan = plan_backends(opts, choice, hf_model, factory)
    out = make_console(quiet=mode in ("quiet", "jsonl"))
    for s in plan.skipped:
        err_console.print(
            f"kvtune: {s.backend} cannot serve this model here, going on without it: {s.reason}",
            markup=False,
            soft_wrap=True,
        )
    out.print(
        f"[bold]{len(plan.legs)} backend(s), one after the other[/bold] ({plan.split_note()}), "
        f"each its own study: {', '.join(leg.study for leg in plan.legs)}"
    )
    prepared_s = clock.monotonic() - began
    root = runs_root(opts.runs_dir)
    walls: dict[str, float] = {}
    done: dict[str, Finished] = {}
    code = _run_legs(plan.legs, mode, out, clock, done, walls)
    if code == INTERRUPTED:
        return INTERRUPTED
    studies = [(leg.study, done[leg.study].payload) for leg in plan.legs if leg.study in done]
    c = compare_studies(
        studies,
        name=plan.name,
        skipped=[asdict(s) for s in plan.skipped],
        wall_s=walls,
        at_least=1,
        outcomes_of={study: f.outcomes for study, f in done.items()},
    )
    path = write_comparison(root / plan.name / COMPARE_FILE, c)
    out.print()
    out.rule("Which backend?")
    print_comparison(c, out)
    total = clock.monotonic() - began
    legs = ", ".join(f"{leg.backend} {format_duration(walls[leg.study])}" for leg in plan.legs)
    out.print(
        f"Wall time {format_duration(total)}: {legs} (start-ups and confirmation included), "
        f"{format_duration(prepared_s)} finding the backends and preparing the model."
    )
    out.print(f"Comparison: {path}  (again: kvtune compare {' '.join(s for s, _ in studies)})")
    if mode == "jsonl":
        print(dumps({"event": "comparison", "time": clock.wall(), **c.to_dict()}), flush=True)
    elif mode == "quiet" and c.winner is not None and c.winner.best_command:
        print(c.winner.best_command)
    elif mode == "quiet":
        err_console.print(f"no best overall: {c.why}", markup=False, soft_wrap=True)
    return 0 if any(s.best is not None for s in c.sides) else 1


@dataclass
class Finished:
    """A backend's study as its run left it: results.json's content and its trials."""

    payload: dict
    outcomes: list[TrialOutcome]


def _keep(done: dict[str, Finished], study: str) -> Callable[[StudySummary, list[TrialOutcome]], None]:
    """What `run_study` hands back once a study is summarised, kept for the comparison."""

    def keep(summary: StudySummary, outcomes: list[TrialOutcome]) -> None:
        done[study] = Finished(summary.payload, outcomes)

    return keep


def _run_legs(legs: list, mode: str, out: Any, clock: Clock, done: dict[str, Finished], walls: dict[str, float]) -> int:
    """Each backend's study in turn (what it produced into `done`, its wall time into `walls`);
    INTERRUPTED stops the rest. A trace is replayed with the length scale the first study fitted,
    by every backend."""
    scale: float | None = None
    for i, leg in enumerate(legs, 1):
        out.print()
        out.rule(f"{leg.backend} ({i} of {len(legs)}): study {leg.study}")
        options = leg.options
        if scale is not None:
            out.print(f"[dim]trace lengths scaled by {scale:g}, as the first backend's study fitted them[/dim]")
            workload = {**(options.given.get("workload") or {}), "trace_length_scale": scale}
            options = replace(options, given={**options.given, "workload": workload})
        start = clock.monotonic()
        code = run_study(
            options,
            mode,
            launcher=leg.launcher,
            print_best=False,
            on_summary=_keep(done, leg.study),
        )
        walls[leg.study] = round(clock.monotonic() - start, 1)
        if code == INTERRUPTED:
            left = [x.backend for x in legs[i:]]
            if left:
                err_console.print(f"not run: {', '.join(left)}")
            return INTERRUPTED
        if scale is None and leg.study in done:
            scale = fitted_trace_scale(done[leg.study].payload)
    return 0


def fitted_trace_scale(results: dict) -> float | None:
    """The trace length scale a finished study ran with (its results), so every backend of a
    comparison replays the same requests: a second probe, of another server, would size them
    otherwise. None: no trace."""
    workload = (results.get("spec") or {}).get("workload") or {}
    return float(workload.get("trace_length_scale", 1.0)) if workload.get("trace") else None
