"""Export kvtune studies recorded with `--sampler grid` as one landscape file (JSON lines).

    python benchmarks/record_landscape.py RUNS_DIR OUT.jsonl --study NAME [--study NAME2 ...]
        [--study-file benchmarks/landscapes/llama-server-demo.yaml]

benchmarks/record_landscape.sh records the studies (kvtune itself, resumable) and calls this.
Each trial's measurements come from its bench.json (one per --repeats run, so two on one
server with --repeats 2), its start-up seconds from the trial's outcome, its wall time from the
study. Measurements of the same config from several studies (fresh servers, another grid
order) are pooled under one config; the first study gives the header and its grid, and a
study over a wider space contributes only the configs inside that grid. Studies still running export what they have finished.
The header holds the commands, the hardware fingerprint of the recording machine, the workload,
the targets, the objective, the grid, the informed-start config and the date.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shlex
import sys
from pathlib import Path
from typing import Any

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
from landscape import Config, Landscape, held, key, write  # noqa: E402

from kvtune.jsonsafe import to_jsonable  # noqa: E402
from kvtune.launchers.registry import create_launcher  # noqa: E402
from kvtune.objectives.targets import parse_targets, with_default_error_target  # noqa: E402
from kvtune.study.spec import merge_knobs  # noqa: E402
from kvtune.tuner.fleet.workers import spec_from_dict  # noqa: E402
from kvtune.tuner.search import samplers  # noqa: E402

NOTES = (
    "Two grid studies (--seed 0 and 1: two grid orders) measured every config once each, "
    "each measurement on a fresh server. Recorded on a 2-core machine where other work ran "
    "at nice 19 (editing, unit tests): repeats of a config differ a little more than they "
    "would on an idle host."
)


def scalar_metrics(metrics: dict[str, Any] | None) -> dict[str, float] | None:
    if metrics is None:
        return None
    return {k: v for k, v in to_jsonable(metrics).items() if isinstance(v, (int, float)) or v is None}


def compact_samples(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The run's measured requests in the order they ended, with what the early-stop rule reads
    (the replay applies kvtune's exact early stop to them): seconds since the first send."""
    samples = run.get("samples") or []
    sends = [s["send_time"] for s in samples if s.get("send_time") is not None]
    if not sends:
        return []
    t0 = min(sends)
    out = []
    for s in samples:
        end = s.get("end_time")
        if end is None:
            end = s["send_time"] + (s.get("e2el_s") or 0.0)
        out.append(
            {
                "end_s": round(end - t0, 4),
                "ok": bool(s.get("ok")),
                "ttft_s": s.get("ttft_s"),
                "e2el_s": s.get("e2el_s"),
                "output_tokens": int(s.get("output_tokens") or 0),
            }
        )
    return sorted(out, key=lambda x: x["end_s"])


def study_rows(runs: Path, name: str) -> tuple[dict, list[tuple[dict, bool, list[dict]]], optuna.Study]:
    url = f"sqlite:///{(runs / name / 'study.db').resolve()}"
    study = optuna.load_study(study_name=name, storage=url)
    spec = study.user_attrs["spec"]
    targets = with_default_error_target(parse_targets(spec["targets"]))
    out = []
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)):
        o = t.user_attrs.get("outcome")
        if not o or o.get("duplicate_of") is not None:
            continue
        wall = (t.datetime_complete - t.datetime_start).total_seconds()
        bench_file = runs / name / "trials" / f"{t.number:04d}" / "bench.json"
        runs_ = json.loads(bench_file.read_text())["runs"] if bench_file.exists() and o.get("metrics") else []
        base = {
            "study": name,
            "trial": t.number,
            "server": f"{name}#{t.number}",
            "startup_s": o.get("startup_s"),
            "trial_wall_s": round(wall, 3),
            "failure": o.get("failure"),
            "reason": o.get("reason", ""),
        }
        ms = []
        if not runs_:  # no measurement: a failed launch, or a pre-screen rejection
            ms.append(
                {
                    **base,
                    "repeat": 0,
                    "metrics": None,
                    "held": held(None, targets),
                    "objective": None,
                    "feasible": False,
                    "measure_s": 0.0,
                    "cost_s": round(wall, 3),
                }
            )
        measured = sum(float(r["duration_s"]) for r in runs_)
        key_ = spec_objective_key(spec)
        for i, r in enumerate(runs_):
            m = scalar_metrics(r["metrics"])
            h = held(m, targets)
            dur = float(r["duration_s"])
            ms.append(
                {
                    **base,
                    "repeat": i,
                    "metrics": m,
                    "held": h,
                    "objective": m.get(key_),
                    "feasible": all(h.values()),
                    "failure": None if all(h.values()) else (o.get("failure") or "target_missed"),
                    "measure_s": round(dur, 3),
                    "cost_s": round(wall - (measured - dur), 3),
                    "samples": compact_samples(r),
                }
            )
        out.append((dict(t.params), bool(t.user_attrs.get("baseline")), ms))
    return spec, out, study


def spec_objective_key(spec: dict) -> str:
    from kvtune.objectives.objective import objective

    raw = spec["objective"]
    return objective(raw[0] if isinstance(raw, list) else raw).key


def command(spec: dict, name: str, study_file: str | None) -> str:
    argv = [
        "kvtune",
        "run",
        *(["--study-file", study_file] if study_file else []),
        "--set",
        f"sampler={spec.get('sampler', 'auto')}",
        "--set",
        f"informed_start={'true' if spec.get('informed_start') else 'false'}",
        "--set",
        f"confirm_top={spec['confirm_top']}",
        "--trials",
        str(spec["trials"]),
        "--set",
        f"repeats={spec['repeats']}",
        "--set",
        f"seed={spec['seed']}",
        "--study",
        name,
    ]
    return shlex.join(argv)


def export(
    runs: Path, out: Path, studies: list[str], study_file: str | None, judge: list[str] | None = None
) -> tuple[int, int]:
    configs: dict[str, Config] = {}
    commands, first, last, header = [], None, None, None
    for name in studies:
        if not (runs / name / "study.db").exists():
            continue
        spec, rows, study = study_rows(runs, name)
        commands.append(command(spec, name, study_file))
        times = [t.datetime_start for t in study.trials if t.datetime_start]
        if times:
            first = min([first, min(times)] if first else [min(times)])
            last = max([last, max(times)] if last else [max(times)])
        if header is None:
            header = header_for(spec, study)
        for params, baseline, ms in rows:
            c = configs.setdefault(key(params), Config(params, [], baseline))
            c.measurements.extend(ms)
    if header is None:
        raise SystemExit(f"error: none of the studies {studies} exists under {runs}")
    header["command"] = commands
    header["recorded_by"] = "benchmarks/record_landscape.sh"
    header["recorded"] = f"{first:%Y-%m-%d %H:%M} .. {last:%Y-%m-%d %H:%M} UTC" if first else ""
    header["exported"] = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    grid = header["space"]
    inside = [
        c
        for c in configs.values()  # a study over a wider space adds only the shared configs
        if c.baseline or all(k in grid and v in grid[k] for k, v in c.params.items())
    ]
    ordered = sorted(inside, key=lambda c: (not c.baseline, key(c.params)))
    if judge:  # recorded under a loose target (nothing stopped early), judged against these
        header["recorded_targets"] = header["targets"]
        judged = [t.text for t in with_default_error_target(parse_targets(judge))]
        ordered = Landscape(dict(header, targets=judged), ordered).with_targets(judged).configs
        header["targets"] = judged
    write(out, header, ordered)
    return len(ordered), sum(len(c.measurements) for c in ordered)


def header_for(spec_dict: dict, study: optuna.Study) -> dict:
    spec = spec_from_dict(spec_dict)
    launcher = create_launcher(spec)
    hw = study.user_attrs.get("hardware") or {}
    knobs = merge_knobs(launcher.default_knobs(spec.workload, hw.get("cpus", 1)), spec.space)
    grid = samplers.grid_space(knobs)
    targets = [t.constraint_key for t in spec.judged_targets]
    model = launcher.model_path
    return {
        "backend": spec.backend,
        "model": Path(str(model)).name if model else None,
        "server_version": launcher.version(),
        "hardware": hw,
        "workload": spec_dict["workload"],
        "targets": targets,
        "objective": {"name": spec.primary.name, "key": spec.primary.key, "direction": spec.primary.direction.value},
        "space": grid,
        "knobs": [
            {
                "name": k.name,
                "kind": k.kind.value,
                "low": k.low,
                "high": k.high,
                "step": k.step,
                "log": k.log,
                "choices": list(k.choices),
            }
            for k in knobs
            if k.name in grid
        ],
        "fixed": {k.name: k.value for k in knobs if k.kind.value == "fixed"},
        "informed_start": launcher.informed_start(knobs, spec.workload),
        "notes": NOTES,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--study", action="append", required=True)
    ap.add_argument("--study-file", default=None, help="as the header's commands should name it")
    ap.add_argument(
        "--judge-target",
        action="append",
        default=None,
        help="judge the measurements against this target (repeatable; relative ones, "
        "e.g. ttft_p95<1.5x, against the baseline) instead of the recording's",
    )
    a = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study_file = a.study_file
    if study_file:
        try:
            study_file = str(Path(study_file).resolve().relative_to(Path(__file__).resolve().parent.parent))
        except ValueError:
            pass
    n, m = export(a.runs, a.out, a.study, study_file, a.judge_target)
    print(f"{a.out}: {n} configs, {m} measurements")
    return 0


if __name__ == "__main__":
    sys.exit(main())
