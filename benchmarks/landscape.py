"""A recorded landscape: every config of a finite space, each measured several times for real.

The replay benchmark (search_efficiency.py) answers a sampler's proposals from such a file
instead of starting servers, so searches can be compared over many seeds in minutes. This
module is the file format (JSON lines) and its truth: what a config is really worth.

    line 1     {"kind": "header", "format": "kvtune-landscape/1", "command": [...], "hardware": {...},
                "workload": {...}, "targets": [...], "objective": {...}, "space": {...},
                "informed_start": {...}, "recorded": "...", "notes": "..."}
    line 2...  {"kind": "config", "params": {...}, "baseline": false, "measurements": [
                  {"study", "trial", "repeat", "server", "metrics": {...} | null, "held": {...},
                   "objective", "feasible", "failure", "reason", "startup_s", "measure_s",
                   "cost_s", "trial_wall_s", "samples": [...]}, ...]}

`params` are the sampler's parameters (knob name -> value; {} for the baseline, the server's
defaults). `cost_s` is the wall time a one-measurement trial of this config took: the trial's
wall time less the other measurements on the same server. The truth of a config: its objective
is the mean over its measurements; it is truly feasible when every target holds on the mean of
the measurements' values of that metric and every measurement ran (no failed launch).

Targets relative to the baseline (``ttft_p95<1.5x``) are resolved, for the truth, against the
baseline config's mean figures: a landscape judged that way means the same on a fast and a slow
machine. (A replayed study judges its trials as kvtune does, from the baseline's first
measurement in that study: `declared` keeps the targets as written for it.) `samples` (optional) are the measured requests
in the order they ended: ``{"end_s" (seconds since the first send), "ok", "ttft_s", "e2el_s",
"output_tokens"}``. The replay uses them to apply kvtune's exact early stop to a recorded
measurement: when the rule would have stopped it, and so what that measurement would have cost.
"""

from __future__ import annotations

import json
import math
import random
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvtune.errors import KvtuneError
from kvtune.objectives.targets import Target, parse_targets

FORMAT = "kvtune-landscape/1"
HEADER_KEYS = ("command", "hardware", "workload", "targets", "objective", "space", "recorded")


class LandscapeError(KvtuneError):
    """A landscape file that cannot be replayed (missing, not JSON lines, fields missing)."""


def key(params: dict[str, Any]) -> str:
    """A config's identity: its parameters as sorted JSON (the baseline is '{}')."""
    return json.dumps(params, sort_keys=True)


@dataclass
class Config:
    params: dict[str, Any]
    measurements: list[dict[str, Any]]
    baseline: bool = False
    # the truth, set by Landscape.__post_init__
    true_objective: float | None = None
    truly_feasible: bool = False


@dataclass
class Landscape:
    header: dict[str, Any]
    configs: list[Config]
    path: str = ""
    by_key: dict[str, Config] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # as written (relative ones unresolved): what a replayed study judges its trials by
        self.declared: list[Target] = parse_targets(list(self.header["targets"]))
        # resolved on the baseline's mean: what the truth of a config is judged by
        self.targets: list[Target] = resolve_relative(self.declared, self.configs)
        self.maximize = self.header["objective"]["direction"] == "maximize"
        for c in self.configs:
            self.by_key[key(c.params)] = c
            truth(c, self.targets)

    @property
    def has_relative_targets(self) -> bool:
        return any(t.factor is not None for t in self.targets)

    @property
    def objective_key(self) -> str:
        return str(self.header["objective"]["key"])

    def better(self, a: float, b: float) -> bool:
        return a > b if self.maximize else a < b

    def optimum(self) -> Config:
        """The best truly feasible config (LandscapeError when none is)."""
        ok = [c for c in self.configs if c.truly_feasible and c.true_objective is not None]
        if not ok:
            raise LandscapeError(
                f"{self.path}: no config is truly feasible under "
                f"{', '.join(self.header['targets'])}: pick looser --target"
            )
        return (max if self.maximize else min)(ok, key=lambda c: c.true_objective)

    def regret(self, c: Config | None) -> float:
        """How far `c`'s true objective is from the optimum, as a fraction of the optimum
        (1.0 when nothing, or an infeasible config, was named)."""
        best = self.optimum().true_objective
        if c is None or not c.truly_feasible or c.true_objective is None:
            return 1.0
        gap = (best - c.true_objective) if self.maximize else (c.true_objective - best)
        return max(0.0, gap / abs(best)) if best else 0.0

    def with_targets(self, targets: list[str]) -> "Landscape":
        """The same measurements judged against other targets."""
        header = dict(self.header, targets=list(targets))
        configs = [Config(c.params, c.measurements, c.baseline) for c in self.configs]
        parsed = resolve_relative(parse_targets(list(targets)), configs)
        for c in configs:
            c.measurements = [dict(m, held=held(m.get("metrics"), parsed)) for m in c.measurements]
            for m in c.measurements:
                m["feasible"] = m.get("metrics") is not None and all(m["held"].values())
        return Landscape(header, configs, self.path)


def resolve_relative(targets: list[Target], configs: list[Config]) -> list[Target]:
    """Relative targets with their thresholds set from the baseline's mean figures."""
    if not any(t.relative for t in targets):
        return targets
    base = next((c for c in configs if c.baseline), None)
    ran = [m["metrics"] for m in (base.measurements if base else []) if m.get("metrics")]
    if not ran:
        raise LandscapeError('relative targets need a measured baseline config ("baseline": true) in the landscape')
    means = {}
    for t in targets:
        vs = [t.value(m) for m in ran]
        if t.relative and all(_finite(v) for v in vs):
            means[t.key] = statistics.fmean(vs)
    return [t.resolve(means) for t in targets]


def held(metrics: dict[str, float] | None, targets: list[Target]) -> dict[str, bool]:
    return {t.constraint_key: bool(metrics) and t.met(metrics) for t in targets}


def truth(c: Config, targets: list[Target]) -> None:
    ran = [m for m in c.measurements if m.get("metrics")]
    if not ran:
        c.true_objective, c.truly_feasible = None, False
        return
    values = [m["objective"] for m in ran if _finite(m.get("objective"))]
    c.true_objective = statistics.fmean(values) if values else None
    means = {}
    for t in targets:
        vs = [t.value(m["metrics"]) for m in ran]
        means[t.key] = statistics.fmean(vs) if all(_finite(v) for v in vs) else math.inf
    c.truly_feasible = (
        len(ran) == len(c.measurements)
        and c.true_objective is not None
        and all(t.met({**ran[0]["metrics"], t.key: means[t.key]}) for t in targets)
    )


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load(path: str | Path) -> Landscape:
    """Read and check a landscape file; any defect is one LandscapeError line naming it."""
    p = Path(path)
    try:
        lines = p.read_text().splitlines()
    except FileNotFoundError:
        raise LandscapeError(f"landscape file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise LandscapeError(f"cannot read landscape file {str(p)!r}: {e}") from e
    rows = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            raise LandscapeError(f"{p}: line {i} is not JSON (one JSON object per line)") from None
        if not isinstance(row, dict):
            raise LandscapeError(f"{p}: line {i} is not a JSON object")
        rows.append((i, row))
    if not rows or rows[0][1].get("kind") != "header":
        raise LandscapeError(f'{p}: the first line must be the header ({{"kind": "header", ...}})')
    header = rows[0][1]
    if header.get("format") != FORMAT:
        raise LandscapeError(f"{p}: format {header.get('format')!r} is not {FORMAT!r}")
    missing = [k for k in HEADER_KEYS if k not in header]
    if missing:
        raise LandscapeError(f"{p}: the header lacks {', '.join(missing)}")
    obj = header["objective"]
    if not (isinstance(obj, dict) and obj.get("direction") in ("maximize", "minimize") and obj.get("key")):
        raise LandscapeError(f"{p}: header objective needs a key and a direction (maximize/minimize)")
    if not isinstance(header["space"], dict) or not all(isinstance(v, list) and v for v in header["space"].values()):
        raise LandscapeError(f"{p}: header space must map each knob to its list of values")
    configs = []
    for i, row in rows[1:]:
        if row.get("kind") != "config":
            raise LandscapeError(f"{p}: line {i}: kind must be 'config', got {row.get('kind')!r}")
        params, ms = row.get("params"), row.get("measurements")
        if not isinstance(params, dict) or not isinstance(ms, list) or not ms:
            raise LandscapeError(
                f"{p}: line {i}: a config needs params (an object) and measurements (a non-empty list)"
            )
        for m in ms:
            if not isinstance(m, dict) or not _finite(m.get("cost_s")) or "metrics" not in m:
                raise LandscapeError(f"{p}: line {i}: each measurement needs metrics (or null) and cost_s (seconds)")
            if m["metrics"] is not None and not _finite(m.get("objective")):
                raise LandscapeError(f"{p}: line {i}: a measurement with metrics needs its objective value")
        if not row.get("baseline") and set(params) != set(header["space"]):
            raise LandscapeError(
                f"{p}: line {i}: params {sorted(params)} are not the space's knobs {sorted(header['space'])}"
            )
        configs.append(Config(params, ms, bool(row.get("baseline"))))
    if not any(not c.baseline for c in configs):
        raise LandscapeError(f"{p}: no configs after the header")
    try:
        return Landscape(header, configs, str(p))
    except KvtuneError as e:
        raise LandscapeError(f"{p}: {e}") from None


@dataclass(frozen=True)
class Settled:
    """How far a landscape's truth can be trusted: `noise` is one measurement's relative
    spread (pooled from every config measured more than once), `truth_se` the spread of a
    config's mean; over simulated re-recordings (each config's mean redrawn from that spread,
    feasibility held), `optimum_kept` is how often the recorded optimum is still the best and
    `within_kept` the share of the new within-`within` set that was in the recorded one."""

    noise: float
    truth_se: float
    within_set: int
    optimum_kept: float
    within_kept: float


def settled(ls: Landscape, within: float = 0.05, draws: int = 2000, seed: int = 0) -> Settled:
    """A parametric re-recording of `ls` (see `Settled`): a yardstick of "within 5% of the
    best" means something only when the best stays the best on a second recording."""
    logs = []
    for c in ls.configs:
        vals = [m["objective"] for m in c.measurements if m.get("metrics") and _finite(m.get("objective"))]
        if len(vals) > 1 and all(v > 0 for v in vals):
            mean_log = statistics.fmean(math.log(v) for v in vals)
            logs += [(math.log(v) - mean_log, len(vals)) for v in vals]
    # pooled within-config variance, each deviation corrected for the mean it was taken from
    noise = math.sqrt(sum(d * d * n / (n - 1) for d, n in logs) / len(logs)) if logs else 0.0
    ok = [c for c in ls.configs if c.truly_feasible and c.true_objective is not None]
    per = statistics.fmean(len(c.measurements) for c in ok)
    se = noise / math.sqrt(per)
    sign = 1.0 if ls.maximize else -1.0
    best = max(ok, key=lambda c: sign * c.true_objective)
    near = {id(c) for c in ok if sign * (c.true_objective - best.true_objective) >= -within * abs(best.true_objective)}
    rng = random.Random(seed)
    kept_best = kept_near = 0.0
    for _ in range(draws):
        new = {id(c): c.true_objective * math.exp(rng.gauss(0.0, se)) for c in ok}
        top = max(new.values(), key=lambda v: sign * v)
        now = {k for k, v in new.items() if sign * (v - top) >= -within * abs(top)}
        kept_best += new[id(best)] == top
        kept_near += len(now & near) / len(now)
    return Settled(noise, se, len(near), kept_best / draws, kept_near / draws)


def write(path: str | Path, header: dict[str, Any], configs: list[Config]) -> None:
    with open(path, "w") as f:
        f.write(json.dumps({"kind": "header", "format": FORMAT, **header}, sort_keys=False) + "\n")
        for c in configs:
            f.write(
                json.dumps(
                    {"kind": "config", "params": c.params, "baseline": c.baseline, "measurements": c.measurements}
                )
                + "\n"
            )


if __name__ == "__main__":  # python benchmarks/landscape.py FILE: check it, print its truth
    try:
        ls = load(sys.argv[1])
    except LandscapeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    best = ls.optimum()
    n = sum(len(c.measurements) for c in ls.configs)
    feas = sum(c.truly_feasible for c in ls.configs)
    print(
        f"{len(ls.configs)} configs, {n} measurements, {feas} truly feasible; optimum "
        f"{ls.objective_key} {best.true_objective:.4g} at {best.params}"
    )
    st = settled(ls)
    print(
        f"noise {st.noise:.1%} per measurement, {st.truth_se:.1%} on a config's mean; {st.within_set} config(s) "
        f"within 5% of the optimum; re-recorded, the optimum stays the best {st.optimum_kept:.0%} of the time "
        f"and {st.within_kept:.0%} of the within-5% set was in this one"
    )
