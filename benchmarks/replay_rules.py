"""kvtune's own rules, as the replay (search_efficiency.py) applies them to recorded measurements.

Each function here either calls kvtune's code or states the one thing the replay must do
differently because it reads a recording instead of starting servers: how a measurement is
scored (tuner/trial/scoring.py, relative targets from the baseline's first measurement in the
replayed study), when the exact early stop would have ended it (objectives/early_stop.py, the
targets tuner/trial/stopping.py lets it watch), the informed start (deterministic, as kvtune's
is) and the named best (study/naming.py, one call).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))
from landscape import Config, Landscape  # noqa: E402

from kvtune.errors import KvtuneError  # noqa: E402
from kvtune.kinds import Direction, FailureKind, KnobKind  # noqa: E402
from kvtune.knobs import (
    Candidate,
    Knob,  # noqa: E402
)
from kvtune.launchers.base import at_least_users  # noqa: E402
from kvtune.launchers.registry import launcher_class  # noqa: E402
from kvtune.objectives.early_stop import EarlyStop  # noqa: E402
from kvtune.objectives.metrics import RequestSample, summarize_requests  # noqa: E402
from kvtune.objectives.objective import Objective  # noqa: E402
from kvtune.objectives.targets import Target  # noqa: E402
from kvtune.study.naming import name_best  # noqa: E402
from kvtune.study.outcome import TrialOutcome  # noqa: E402
from kvtune.tuner.trial import scoring  # noqa: E402
from kvtune.tuner.trial.screening import SCREENED, Leader, ScreenWatch  # noqa: E402
from kvtune.workload import Workload  # noqa: E402


def stop_at(ls: Landscape, m: dict, watched: Sequence[Target]) -> float | None:
    """Seconds into measurement `m` at which kvtune's exact early stop (objectives/early_stop.py)
    watching `watched` (tuner/trial/stopping.py: none on the baseline, relative targets resolved
    from the baseline's first measurement) would have ended it, or None when it runs whole: its
    recorded requests are fed to the rule in the order they ended."""
    samples = m.get("samples") or []
    if not samples or not watched:
        return None
    rule = EarlyStop(list(watched), int(ls.header["workload"]["num_requests"]))
    for x in samples:
        sample = RequestSample(
            send_time=0.0,
            ok=bool(x["ok"]),
            ttft_s=x.get("ttft_s"),
            e2el_s=x.get("e2el_s"),
            output_tokens=int(x.get("output_tokens") or 0),
        )
        if rule.observe(sample) is not None:
            return float(x["end_s"])
    return None


def _sample(x: dict) -> RequestSample:
    """A recorded request as the load client hands it to a watch: sent ``e2el_s`` before it
    ended (the recording's clock starts at the first send)."""
    end, e2el = float(x["end_s"]), x.get("e2el_s")
    return RequestSample(
        send_time=end - float(e2el or 0.0),
        ok=bool(x["ok"]),
        ttft_s=x.get("ttft_s"),
        e2el_s=e2el,
        output_tokens=int(x.get("output_tokens") or 0),
        end_time=end,
    )


def cut_of(
    ls: Landscape, m: dict, watched: Sequence[Target], leader: Leader | None, fraction: float
) -> tuple[str, float, dict[str, float]] | None:
    """Where the tuner's two watches (tuner/trial/measure.py feeds each request to the early
    stop, then to the screen: the first reason wins) would have cut recorded measurement `m`:
    ("early", seconds into it, {}) or ("screened", seconds, the short run's metrics, as the
    load client summarizes the requests it kept), None when it runs whole."""
    samples = m.get("samples") or []
    if not samples:
        return None
    planned = int(ls.header["workload"]["num_requests"])
    rule = EarlyStop(list(watched), planned) if watched else None
    screen = ScreenWatch.over(leader, planned, fraction)
    kept: list[RequestSample] = []
    for x in samples:
        sample = _sample(x)
        kept.append(sample)
        if rule is not None and rule.observe(sample) is not None and rule.observed < planned:
            return ("early", float(x["end_s"]), {})  # (decided by the last request: nothing cut)
        if screen is not None and screen(sample) is not None:
            started = min(s.send_time for s in kept)
            short = summarize_requests(kept, float(x["end_s"]) - started)
            return ("screened", float(x["end_s"]), {**short, SCREENED: 1.0})
    return None


def knobs_of(ls: Landscape) -> list[Knob]:
    """The study's knobs as recorded (an int range stays an int range); else the grid's lists."""
    recorded = {k["name"]: k for k in ls.header.get("knobs", [])}
    out = []
    for name, values in ls.header["space"].items():
        k = recorded.get(name)
        if k and k.get("kind") == "int":
            out.append(Knob(name, KnobKind.INT, low=k["low"], high=k["high"], step=k.get("step")))
        else:
            out.append(Knob(name, KnobKind.CHOICES, choices=tuple(values)))
    return out


def _as_range(k: Knob) -> Knob:
    """An int-valued choice knob as the int range it spans: kvtune's default space tunes such
    knobs (threads) as ranges, and its informed-start rules read ranges."""
    ints = [c for c in k.choices if isinstance(c, int) and not isinstance(c, bool)]
    if k.kind is not KnobKind.CHOICES or len(ints) != len(k.choices):
        return k
    return Knob(k.name, KnobKind.INT, low=min(ints), high=max(ints))


def informed_start(ls: Landscape, seed: int) -> dict[str, Any]:
    """The informed start of a replayed study: the recorded guess, completed. The recording's
    guess lacks a knob when kvtune's rule for it read nothing on the recorded knob (threads:
    "every core" reads an int range; the recording offered {1, 2} as choices), and Optuna would
    then let each sampler pick it with its own RNG, so samplers started from different configs.
    kvtune's informed start is deterministic: a missing knob gets the backend's own rule on the
    range its choices span (threads: 2, every core of the recording machine), else one value
    drawn per seed, the same for every sampler and budget."""
    guess = dict(ls.header.get("informed_start") or {})
    if not guess:
        return guess
    try:
        rules = launcher_class(str(ls.header.get("backend"))).preferred
        workload = Workload(**ls.header["workload"])
    except (KvtuneError, TypeError):
        rules, workload = {}, Workload()
    pick = random.Random(f"informed-start:{seed}")
    for k in knobs_of(ls):
        if k.name in guess or k.kind is not KnobKind.CHOICES:
            continue
        rule = rules.get(k.name)
        value = rule(_as_range(k), workload) if rule else None
        guess[k.name] = value if value in k.choices else pick.choice(list(k.choices))
    return guess


def slot_ladder(ls: Landscape, seed: int) -> list[dict[str, Any]]:
    """Issue 38 item 3, as the replay can try it: the informed start, then the same config at
    every other slot count (the knob whose informed rule is "at least the users": --parallel,
    --max-num-seqs) in the order the bandwidth-bound decode ceiling ranks them: counts at or
    above the users tie on the ceiling (min(slots, users) sequences per read of the weights), so
    the next larger ones first, then the smaller ones, largest first. The planner's KV capacity
    would drop counts that cannot fit; every recorded config started, so none is dropped here."""
    guess = informed_start(ls, seed)
    if not guess:
        return []
    try:
        rules = launcher_class(str(ls.header.get("backend"))).preferred
    except KvtuneError:
        return [guess]
    out = [guess]
    for k in knobs_of(ls):
        if rules.get(k.name) is not at_least_users or k.kind is not KnobKind.CHOICES or k.name not in guess:
            continue
        at = guess[k.name]
        above = sorted(c for c in k.choices if c > at)
        below = sorted((c for c in k.choices if c < at), reverse=True)
        out += [{**guess, k.name: v} for v in above + below]
    return out


def objective_of(ls: Landscape) -> Objective:
    o = ls.header["objective"]
    return Objective(
        str(o.get("name") or o["key"]), str(o["key"]), Direction.MAXIMIZE if ls.maximize else Direction.MINIMIZE
    )


def outcome_of(
    ls: Landscape, number: int, c: Config, m: dict, baseline: bool, base: TrialOutcome | None
) -> TrialOutcome:
    """The TrialOutcome the tuner would record for measurement `m` of config `c`, scored by
    kvtune's own scoring against the targets as written, relative ones resolved from `base`
    (the baseline's first measurement in this study; None while it has none)."""
    o = TrialOutcome(
        number=number, candidate=Candidate(flags=dict(c.params)), argv=[], env={}, baseline=baseline, launched=True
    )
    if m.get("metrics") is None:
        try:
            kind = FailureKind(m.get("failure"))
        except ValueError:
            kind = FailureKind.START_FAILED
        return scoring.infeasible(o, ls.declared, kind, str(m.get("reason") or "the recorded launch failed"))
    o.metrics = dict(m["metrics"])
    scoring.judge(o, scoring.resolved_targets(ls.declared, base, o), ls.declared, [objective_of(ls)])
    return o


def named_best(outcomes: list[TrialOutcome], direction: Direction) -> TrialOutcome | None:
    """The named best, by kvtune's own naming code and nothing else (study/naming.py: the stored
    verdict's, else the search's top, unconfirmed): one call, so the replay names as the shipped
    tuner names when those rules change."""
    return name_best(outcomes, direction).best
