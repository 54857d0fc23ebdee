"""Studies side by side: the best of each and the defaults of each, at the same workload.

Which server to run is answered by measurement only when both were measured the same way, so a
comparison first refuses studies that differ in what they measured (workload, targets, primary
objective), naming the difference. Each study then gives two rows, its named best and its
baseline (the server's defaults), with the figures every surface shows for its best
(study/best_figures.py: the verdict's fresh runs, geometric means, when they back the best; else
the search measurements, or both re-measurements, as `study.naming.comparison_metrics` picks),
each row saying which, its measured trial count and the wall time its search took.

The best overall is decided the way a study decides its own best: by the verdict's two-sample test
on fresh runs (verdict/overall.py), on the primary objective of each study's named best over the
proof runs its own verdict judged it on. A study whose verdict named nothing has nothing to
deploy; a named best without fresh runs (`--confirm-top 0`, a study not confirmed yet) was not
measured the same way as the others, and the answer is then "no winner", as it is when the test
does not show one side better: both are shown with their intervals. Studies come from
results.json (`kvtune compare`), or from memory (`compare_results`: a run with several backends
compares the studies it has just run); compare.json is what both write.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from kvtune.artifacts import launch_script
from kvtune.artifacts.overview import baseline_trial, best_trial, outcomes, recorded_choice, study_objectives
from kvtune.errors import SpecError
from kvtune.jsonsafe import dumps
from kvtune.kinds import Direction
from kvtune.objectives.objective import Objective
from kvtune.study.naming import comparison_basis, comparison_metrics
from kvtune.study.outcome import TrialOutcome
from kvtune.study.results_file import read_results
from kvtune.study.spec import StudySpec
from kvtune.study.verdict_evidence import evidence_of
from kvtune.verdict import Role
from kvtune.verdict.overall import Spread, best_overall, spread

COMPARE_FILE = "compare.json"
# (metrics key, column label) of the side-by-side table.
FIGURES = (("output_throughput", "out tok/s"), ("p95_ttft_ms", "TTFT p95"), ("p95_tpot_ms", "TPOT p95"))


@dataclass
class Side:
    """One study in a comparison."""

    study: str
    backend: str
    version: str
    objective: Objective
    best: TrialOutcome | None
    baseline: TrialOutcome | None
    best_metrics: dict = field(default_factory=dict)
    baseline_metrics: dict = field(default_factory=dict)
    measurements: int = 1  # per config in the figures (the re-measurement when both have one)
    basis: str = ""  # which measurements the figures are (`BestFigures.label`, or `comparison_basis`)
    trials: int = 0  # configs measured
    wall_s: float | None = None  # the search's wall time (results.json "budget")
    label: str = ""  # the backend, or the study name when two sides share a backend
    best_argv: list[str] = field(default_factory=list)  # the deployed command line (results.json)
    best_command: str = ""  # the same with its environment, `VAR=value ... argv` (results.json)
    outcomes: list[TrialOutcome] = field(default_factory=list)
    fresh: list[float] = field(default_factory=list)  # the named best's objective on its proof runs

    @property
    def spread(self) -> Spread | None:
        """The named best's fresh figure with its 95% interval (None: no fresh run)."""
        return spread(self.fresh) if self.fresh else None

    def figure_text(self) -> str:
        """``vllm's best, trial 4: 54.5 [51.2, 58.0], 6 fresh runs``"""
        if self.best is None:
            return f"{self.label}: no config to deploy"
        sp = self.spread
        shown = sp.text() if sp is not None else "no fresh runs (not confirmed: its search measurement only)"
        return f"{self.label}'s best, trial {self.best.number}: {shown}"


@dataclass
class Comparison:
    sides: list[Side]
    objective: Objective
    winner: Side | None
    why: str
    name: str | None = None
    skipped: list[dict] = field(default_factory=list)  # backends that could not serve: backend, reason
    wall_s: dict[str, float] = field(default_factory=dict)  # study -> the whole run's wall time

    def rows(self) -> list[dict[str, Any]]:
        """Two rows per side, best then defaults: what the table, compare.json and the report show."""
        out = []
        for s in self.sides:
            for role, o, m in (("best", s.best, s.best_metrics), ("defaults", s.baseline, s.baseline_metrics)):
                out.append(
                    {
                        "study": s.study,
                        "backend": s.backend,
                        "label": s.label,
                        "role": role,
                        "trial": o.number if o else None,
                        "is_defaults": bool(o and o.baseline),
                        "flags": dict(o.candidate.flags) if o else {},
                        **{k: (m or {}).get(k) if o and o.measured else None for k, _ in FIGURES},
                        "feasible": bool(o and o.feasible),
                        "measurements": s.measurements if o else 0,
                        "basis": s.basis if o else "",
                        "trials": s.trials,
                        "wall_s": s.wall_s,
                        "winner": s is self.winner and role == "best",
                    }
                )
        return out

    def to_dict(self) -> dict[str, Any]:
        w = self.winner
        sides = [
            {"study": s.study, "trial": s.best.number if s.best else None, "fresh": list(s.fresh)} for s in self.sides
        ]
        return {
            "name": self.name,
            "studies": [s.study for s in self.sides],
            "backends": [s.backend for s in self.sides],
            "versions": {s.study: s.version for s in self.sides},
            "objective": self.objective.name,
            "direction": self.objective.direction.value,
            "best": (
                {
                    "study": w.study,
                    "backend": w.backend,
                    "trial": w.best.number,
                    "argv": w.best_argv or w.best.argv,
                    "why": self.why,
                }
                if w and w.best
                else {"study": None, "why": self.why}
            ),
            "rows": self.rows(),
            "fresh": sides,
            "skipped": list(self.skipped),
            "run_wall_s": dict(self.wall_s),
        }


def check_comparable(studies: Sequence[tuple[str, dict]], at_least: int = 2) -> None:
    """Refuse (SpecError, one line) studies that did not measure the same thing: fewer than
    `at_least`, one named twice, or a different workload, target set or primary objective."""
    names = [n for n, _ in studies]
    if len(studies) < max(at_least, 1):
        raise SpecError(
            f"compare needs two studies or more, got {len(studies)}: "
            f"kvtune compare STUDY STUDY... (kvtune show STUDY for one)"
        )
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SpecError(f"study {twice[0]!r} is given twice: name each study once")
    (first, ref), rest = studies[0], studies[1:]
    for name, results in rest:
        diff = _difference(ref, results)
        if diff:
            raise SpecError(
                f"studies {first!r} and {name!r} did not measure the same thing: {diff}; "
                f"compare studies run with the same workload, targets and objective"
            )


def _difference(a: dict, b: dict) -> str | None:
    relative = [t.text for t in _spec(a).targets if t.relative]
    if relative and _backend(a) != _backend(b):
        return (
            f"target {relative[0]!r} is relative to each study's own defaults ({_backend(a)} vs "
            f"{_backend(b)}), so they were held to different thresholds"
        )
    oa, ob = study_objectives(a)[0], study_objectives(b)[0]
    if oa.name != ob.name:
        return f"objective {oa.name} vs {ob.name}"
    ta, tb = sorted(a.get("targets") or []), sorted(b.get("targets") or [])
    if ta != tb:
        return f"targets {', '.join(ta) or 'none'} vs {', '.join(tb) or 'none'}"
    wa, wb = _workload(a), _workload(b)
    for key in sorted(set(wa) | set(wb)):
        if wa.get(key) != wb.get(key):
            return f"workload {key} {wa.get(key)!r} vs {wb.get(key)!r}"
    return None


def _spec(results: dict) -> StudySpec:
    return StudySpec.from_dict(results.get("spec") or {})


def _backend(results: dict) -> str:
    return _spec(results).backend


def _workload(results: dict) -> dict:
    return _spec(results).workload.to_dict()


def _command(argv: list[str], best: TrialOutcome | None) -> str:
    """The best command line of results written before results.json kept it whole: the deployed
    argv after the best trial's environment, as launch-best.sh sets it."""
    env = {**best.env, **best.device_env} if best is not None else {}
    return launch_script.command_line(argv, env) if argv else ""


def proof_values(outs: Sequence[TrialOutcome], best: TrialOutcome | None) -> list[float]:
    """The objective of `best` on the fresh runs its study's verdict judged it on (its proof runs,
    the end-of-search sentinel among the defaults'); [] without a verdict's runs."""
    if best is None:
        return []
    runs = evidence_of([o for o in outs if o.number == best.number]).of(best.number, Role.PROOF)
    return [r.objective for r in runs if r.usable and r.objective is not None]


def side(name: str, results: dict, outs: list[TrialOutcome] | None = None) -> Side:
    """One study's side: its named best, its baseline and their figures (`outs`: its trials, read
    from `results` when not given)."""
    outs = outcomes(results) if outs is None else outs
    best, base = best_trial(results, outs), baseline_trial(results, outs)
    best_m = dict(best.metrics or {}) if best else {}
    base_m = dict(base.metrics or {}) if base else {}
    n, basis = 1, "search measurement"
    if best is not None and base is not None and base.metrics:
        best_m, base_m, n = comparison_metrics(best, base)
        basis = comparison_basis(best, base)
    figures = recorded_choice(results, outs).figures
    if figures is not None and figures.fresh:
        best_m = {r.metric: r.best.value for r in figures.rows}
        base_m = {r.metric: (r.defaults or r.best).value for r in figures.rows}
        n, basis = figures.runs, figures.label()
    budget = results.get("budget") or {}
    measured = budget.get("measured")
    return Side(
        study=results.get("study") or name,
        backend=_spec(results).backend,
        version=results.get("backend_version") or "",
        objective=study_objectives(results)[0],
        best=best,
        baseline=base,
        best_metrics=best_m,
        baseline_metrics=base_m,
        measurements=n,
        basis=basis,
        trials=measured if measured is not None else sum(o.measured for o in outs),
        wall_s=budget.get("elapsed_s"),
        best_argv=list(results.get("best_argv") or []),
        best_command=results.get("best_command") or _command(results.get("best_argv") or [], best),
        outcomes=outs,
        fresh=proof_values(outs, best),
    )


def name_winner(sides: Sequence[Side], objective: Objective) -> tuple[Side | None, str]:
    """The best overall and why: among the studies whose verdict named a config, the one the
    verdict's two-sample test shows better than every other on their fresh runs; None, and why,
    when nothing shows one (the intervals overlap, or a best was not measured on fresh runs)."""
    named = [s for s in sides if s.best is not None]
    if not named:
        return None, "no winner: no study has a config to deploy (nothing met the targets)"
    others = [s.label for s in sides if s.best is None]
    if len(named) == 1:
        top = named[0]
        return top, (
            f"the only one with a config to deploy ({', '.join(others)}: none)" if others else "the only study"
        )
    unmeasured = [s for s in named if not s.fresh]
    if unmeasured:
        return None, (
            "no winner: not measured the same way ("
            + "; ".join(
                f"{s.label}'s best, trial {s.best.number if s.best else '-'}, has no fresh runs" for s in unmeasured
            )
            + ": its figure is a search measurement, selected and biased up); "
            + "; ".join(s.figure_text() for s in named)
        )
    maximize = Direction(objective.direction) is Direction.MAXIMIZE
    by_label = {s.label: s for s in named}
    overall = best_overall({s.label: s.fresh for s in named}, maximize)
    shown = "; ".join(s.figure_text() for s in named)
    test = f"{overall.top} over {overall.rival} {overall.ratio_text()}, the verdict's two-sample t on fresh runs"
    if overall.winner is None:
        return None, f"no winner: the intervals overlap on {objective.name} ({test}; {shown})"
    return by_label[overall.winner], f"better on fresh servers on {objective.name} ({test}; {shown})"


def compare_studies(
    studies: Sequence[tuple[str, dict]],
    name: str | None = None,
    skipped: Sequence[dict] = (),
    wall_s: dict[str, float] | None = None,
    at_least: int = 2,
    outcomes_of: Mapping[str, list[TrialOutcome]] | None = None,
) -> Comparison:
    """Check the studies measured the same thing, then put them side by side (a multi-backend
    run where only one backend could serve passes ``at_least=1``; `outcomes_of`: each study's
    trials when the caller holds them, else they are read from its results)."""
    check_comparable(studies, at_least)
    sides = [side(n, r, (outcomes_of or {}).get(n)) for n, r in studies]
    backends = [s.backend for s in sides]
    for s in sides:
        s.label = s.backend if backends.count(s.backend) == 1 else s.study
    objective = sides[0].objective
    winner, why = name_winner(sides, objective)
    return Comparison(sides, objective, winner, why, name=name, skipped=list(skipped), wall_s=dict(wall_s or {}))


def load_comparison(path: Path) -> Comparison:
    """A comparison written before (compare.json), rebuilt from its studies' results.json (the
    run directories beside its own)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise SpecError(f"cannot read {path}: {e}") from e
    named = data.get("studies") if isinstance(data, dict) else None
    if not isinstance(named, list) or not all(isinstance(n, str) and n.strip() for n in named):
        raise SpecError(  # a list, or studies not named: a file kvtune did not write
            f'{path} is not a compare.json kvtune wrote: it needs "studies", a list of study names; '
            "run the comparison again"
        )
    root = path.parent.parent
    studies = []
    for name in data.get("studies") or []:
        f = root / name / "results.json"
        try:
            studies.append((name, read_results(f)))  # checked: study/results_file.py
        except OSError as e:
            raise SpecError(f"comparison {path.parent.name!r} names study {name!r}, but {f} cannot be read: {e}") from e
    return compare_studies(
        studies,
        name=data.get("name"),
        skipped=data.get("skipped") or [],
        wall_s=data.get("run_wall_s") or {},
        at_least=1,
    )


def write_comparison(path: Path, comparison: Comparison) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(comparison.to_dict(), indent=2))
    return path
