"""Targets on fresh runs: is each one met, missed, or not yet clear at the design's confidence?

A p95 TPOT of 38 ms over two runs is no pass against 40 ms when runs differ by 10%: a target is
"met" only when the runs show it at the confidence of the look (the same group-sequential
critical values as the objective's test, verdict/boundaries.py), "missed" when they show the
opposite as strongly, and "unclear" otherwise. The interval printed with a latency or throughput
is the test's own (the figure times exp(+/- critical x SE), at the confidence that critical value
stands for): it clears the bound exactly when the test passes, so no line says "met" over an
interval that holds the bound. Latencies and throughputs are tested with t on their logs: a relative target (``tpot_p95<0.7x``) compares the
candidate's runs with the defaults' (two-sample), an absolute one tests one arm against the
bound (one-sample). Rates (error rate, SLO attainment) are judged on the mean of the runs: they
sit at 0 or 1, where a log has no meaning, and a single failed request already shows in them.
Requiring every target to be met is an intersection-union test: each at alpha keeps the whole at
alpha, no correction needed.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

from scipy import stats as _st

from kvtune.verdict.evidence import Run, TargetTest
from kvtune.verdict.record import TargetCheck
from kvtune.verdict.stats import compare, level, mean, t_quantile

MET, MISSED, UNCLEAR = "met", "missed", "unclear"


def figures(runs: Sequence[Run], key: str, positive: bool = True) -> list[float] | None:
    """The runs' figures of `key`; None when a run lacks it (or, for logs, it is not positive)."""
    out = []
    for r in runs:
        v = r.values.get(key)
        if not isinstance(v, (int, float)) or not math.isfinite(v) or (positive and v <= 0):
            return None
        out.append(float(v))
    return out


def _shown(t_below: float, critical: float, upper: bool, interval: tuple[float, float], bound: float) -> str:
    """From a t that is positive when the figure is below its bound, and the test's `interval`
    printed beside it: "met" (or "missed") only when the test shows it and the interval lies
    wholly on that side of the bound (the same thing, but for rounding at the edge), so no line
    reads "met" over an interval that holds the bound; otherwise "unclear". An interval that
    cannot be stated (one run: no spread) leaves it to the test."""
    t_good = t_below if upper else -t_below
    low, high = interval
    stated = math.isfinite(low) and math.isfinite(high)
    below, above = (high < bound, low > bound) if stated else (True, True)
    if t_good > critical and (below if upper else above):
        return MET
    if -t_good > critical and (above if upper else below):
        return MISSED
    return UNCLEAR


def tested_interval(center: float, se: float, critical: float, dof: int) -> tuple[float, float, float | None]:
    """The interval a target's test stands behind, in the metric's unit: exp(center +/- critical
    x se) around the log figure `center`, and the two-sided confidence that critical value is
    at `dof` (None: no spread to state it from)."""
    if dof < 1 or not math.isfinite(critical) or se <= 0:
        half = 0.0 if se <= 0 and dof >= 1 else math.nan
        conf = None
    else:
        half, conf = critical * se, 2 * float(_st.t.cdf(critical, dof)) - 1
    return math.exp(center - half), math.exp(center + half), conf


def check_candidate(
    target: TargetTest, cand: Sequence[Run], base: Sequence[Run], one: float, two: float
) -> TargetCheck:
    """`target` on the candidate's proof runs (`base`: the defaults', for a relative bound);
    `one`/`two`: the look's one- and two-sample critical values."""
    n = len(cand)
    if not target.log_scale:
        return _rate(target, "candidate", cand)
    xs = figures(cand, target.key)
    lvl = level(xs) if xs else None
    if lvl is None or xs is None:
        return TargetCheck(target.text, "candidate", math.nan, math.nan, math.nan, math.nan, UNCLEAR, n)
    figure = math.exp(lvl.center)
    if target.factor is None:
        assert target.threshold is not None
        low, high, conf = tested_interval(lvl.center, lvl.se, one, lvl.dof)
        shown = _shown(lvl.t(target.threshold), one, target.upper, (low, high), target.threshold)
        return TargetCheck(target.text, "candidate", figure, low, high, target.threshold, shown, n, confidence=conf)
    ys = figures(base, target.key)
    comp = compare(xs, ys) if ys else None
    if comp is None or ys is None:
        low, high, conf = tested_interval(lvl.center, lvl.se, one, lvl.dof)
        return TargetCheck(target.text, "candidate", figure, low, high, math.nan, UNCLEAR, n, confidence=conf)
    bound = target.factor * math.exp(mean([math.log(y) for y in ys]))
    # the two-sample test against factor x the defaults: the candidate's figure with the
    # comparison's spread, so the interval clears the bound exactly when the test passes
    low, high, conf = tested_interval(lvl.center, comp.se, two, comp.dof)
    shown = _shown(comp.t(math.log(target.factor)) * -1, two, target.upper, (low, high), bound)
    return TargetCheck(target.text, "candidate", figure, low, high, bound, shown, n, confidence=conf)


def check_defaults(target: TargetTest, base: Sequence[Run], one: float) -> TargetCheck:
    """`target` on the defaults' proof runs. Relative to themselves, the defaults meet a bound
    of factor x their own figure exactly when the factor allows 1x: certain, not a test."""
    n = len(base)
    if not target.log_scale:
        return _rate(target, "defaults", base)
    xs = figures(base, target.key)
    lvl = level(xs) if xs else None
    if lvl is None:
        return TargetCheck(target.text, "defaults", math.nan, math.nan, math.nan, math.nan, UNCLEAR, n)
    if target.factor is not None:
        figure, low, high = lvl.interval()
        within = target.factor > 1 if target.upper else target.factor < 1
        return TargetCheck(
            target.text, "defaults", figure, low, high, target.factor * figure, MET if within else MISSED, n
        )
    assert target.threshold is not None
    figure = math.exp(lvl.center)
    low, high, conf = tested_interval(lvl.center, lvl.se, one, lvl.dof)
    shown = _shown(lvl.t(target.threshold), one, target.upper, (low, high), target.threshold)
    return TargetCheck(target.text, "defaults", figure, low, high, target.threshold, shown, n, confidence=conf)


def _rate(target: TargetTest, who: str, runs: Sequence[Run]) -> TargetCheck:
    xs = figures(runs, target.key, positive=False)
    if not xs or target.threshold is None:
        return TargetCheck(target.text, who, math.nan, math.nan, math.nan, math.nan, UNCLEAR, len(runs))
    m = mean(xs)
    ok = m < target.threshold if target.upper else m > target.threshold
    if target.upper and m == 0 and target.threshold == 0:
        ok = False
    return TargetCheck(target.text, who, m, min(xs), max(xs), target.threshold, MET if ok else MISSED, len(runs))


def with_unit(check: TargetCheck, target: TargetTest) -> TargetCheck:
    """The check with its unit: kvtune's latency keys end in _ms."""
    return replace(check, unit="ms") if target.key.endswith("_ms") else check


def fixed_checks(
    targets: Sequence[TargetTest], runs: Sequence[Run], base: Sequence[Run], alpha: float, defaults: bool = False
) -> tuple[TargetCheck, ...]:
    """Every target on one config's fresh runs, judged once at the number of runs there are (no
    interim looks, so no alpha to spend): the proof's tests at one-sided `alpha`, Student t at
    n - 1 degrees of freedom against a bound, at n + m - 2 against the defaults' fresh runs
    (`base`) for a relative one. `defaults`: `runs` are the defaults' own. This is how a
    re-measured config that the proof did not test (a screened leader, a Pareto member) is
    judged; one run shows nothing on a latency or a throughput (no spread): "unclear"."""
    one = t_quantile(1 - alpha, len(runs) - 1)
    two = t_quantile(1 - alpha, len(runs) + len(base) - 2)
    if defaults:
        return tuple(with_unit(check_defaults(t, runs, one), t) for t in targets)
    return tuple(with_unit(check_candidate(t, runs, base, one, two), t) for t in targets)


def shown(checks: Sequence[TargetCheck]) -> str:
    """What a side's checks show together: MISSED when one target is shown missed, MET when every
    one is shown met (no target: met), UNCLEAR otherwise."""
    if any(c.shown == MISSED for c in checks):
        return MISSED
    return MET if all(c.shown == MET for c in checks) else UNCLEAR
