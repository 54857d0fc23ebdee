"""The decision procedure: what to measure next, and when the answer is clear.

`next_step(evidence, goal, policy)` is all a caller needs: it returns `Measure(config, role)`
until the verdict is decided, then `Done(verdict)`. It keeps no state (everything is read from
the runs given), so a study that was interrupted resumes where it stopped, and the simulator of
benchmarks/verdicts.py drives exactly this code. The design (docs/verdicts.md has its measured
error rates):

1. Select, never prove, with the search: the feasible configs ranked by their one search
   measurement; the top `policy.screen` are screened in rounds of one fresh run each, those
   clearly behind at the measured noise set aside after each (verdict/selection.py), and the
   leader by its search and screening figures together is chosen. One candidate only is then
   tested against the defaults, so there is nothing to correct for multiplicity.
2. Prove with fresh runs only: candidate (W) and defaults (D) alternate D W W D D W W D ... on
   fresh servers (linear drift cancels between the arms), and every `policy.every` pairs the
   gain's trimmed two-sample t on log figures (the candidate's best run and the defaults' worst
   set aside: one undetected outlier cannot name a config) is judged against a group-sequential
   critical value (Lan-DeMets alpha spending, verdict/boundaries.py), so looking early costs no
   false wins. Every target must be shown met at the same confidence (verdict/target_checks.py).
3. Named: "beats the defaults" when the objective's gain crosses the boundary and the targets
   are met; "meets the targets where the defaults miss" when the defaults are shown to miss a
   target the candidate is shown to meet. Stopped for futility at an interim look when the
   candidate measured no better than the defaults. At the cap, a tie when the whole interval of
   the gain lies below `policy.margin`, else "not enough evidence", with the smallest gain the
   runs spent could have detected. Everything short of a named config keeps the defaults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Sequence

from kvtune.verdict import wording
from kvtune.verdict.boundaries import Statistic, boundary, looks
from kvtune.verdict.evidence import OBJECTIVE, Evidence, Goal, Policy, Role, Run
from kvtune.verdict.record import Counted, DecisionKind, Effect, TargetCheck, Verdict
from kvtune.verdict.selection import next_screen
from kvtune.verdict.stats import Comparison, compare, detectable, mean, t_quantile, trimmed
from kvtune.verdict.target_checks import MET, MISSED, check_candidate, check_defaults, figures, with_unit

# Metrics whose effect (candidate over defaults) every verdict reports besides the objective.
EFFECT_METRICS = ("output_throughput", "request_throughput", "p95_ttft_ms", "p95_tpot_ms", "p95_e2el_ms")


@dataclass(frozen=True)
class Measure:
    """Measure `config` once more, fresh, in `role`."""

    config: int
    role: Role


@dataclass(frozen=True)
class Done:
    verdict: Verdict


Step = Measure | Done


def candidates(ev: Evidence, goal: Goal, headroom: float = 0.0) -> list[int]:
    """Configs other than the defaults that met the targets on their search measurement; those
    that met every target with `headroom` to spare first, then best search objective (ties:
    fewer flags changed, then the earlier trial).

    Why headroom: one config is tested, and one that met a target by less than the run-to-run
    noise is rarely *shown* to meet it on fresh runs, so testing it would spend the only test on
    a likely "not shown". This orders the selection only; the proof is unchanged."""
    sign = -1.0 if goal.maximize else 1.0
    base = next((r for r in ev.of(ev.baseline.number, Role.SEARCH) if r.usable), None) if ev.baseline else None
    scored = []
    for c in ev.configs:
        if c.baseline:
            continue
        runs = [r for r in ev.of(c.number, Role.SEARCH) if r.usable and r.met]
        if runs:
            best = runs[0].objective
            assert best is not None
            tight = not _clear_of_targets(runs[0], base, goal, headroom)
            scored.append((tight, sign * best, c.flags_changed, c.number))
    return [n for *_, n in sorted(scored)]


def _clear_of_targets(run: Run, base: Run | None, goal: Goal, headroom: float) -> bool:
    """`run` meets every latency/throughput target with `headroom` (a fraction) to spare;
    relative targets against the defaults' search figure (rates are not judged here)."""
    for t in goal.targets:
        if not t.log_scale or headroom <= 0:
            continue
        value = run.values.get(t.key)
        ref = (
            t.threshold
            if t.factor is None
            else (t.factor * base.values[t.key] if base and t.key in base.values else None)
        )
        if value is None or ref is None:
            continue
        if (value * (1 + headroom) > ref) if t.upper else (value < ref * (1 + headroom)):
            return False
    return True


def _disturbed(ev: Evidence) -> int:
    return sum(1 for r in ev.runs if r.disturbed and r.role is not Role.SEARCH)


DEFAULT_POLICY = Policy()


def next_step(ev: Evidence, goal: Goal, policy: Policy = DEFAULT_POLICY, stop_now: bool = False) -> Step:
    """The next measurement, or the verdict. `stop_now`: no more may be measured (the time
    budget is spent): decide on what there is."""
    base = ev.baseline
    ranked = candidates(ev, goal, policy.headroom)
    counted = Counted(disturbed=_disturbed(ev))
    if not ranked:
        return Done(_no_candidate(ev, goal, policy, counted))
    if counted.disturbed > policy.max_disturbed:
        return Done(
            _verdict(ev, DecisionKind.NOT_ENOUGH_EVIDENCE, wording.busy(counted.disturbed), goal, policy, counted)
        )
    shortlist = ranked[: policy.screen] if policy.screen > 1 else ranked[:1]
    screen_next = None if stop_now else next_screen(ev, goal, policy, shortlist)
    if screen_next is not None:
        return Measure(screen_next, Role.SCREEN)
    counted = replace(counted, screened=sum(1 for r in ev.runs if r.role is Role.SCREEN and not r.disturbed))
    chosen = choose(ev, goal, shortlist) if len(shortlist) > 1 else shortlist[0]
    if chosen is None:
        v = _verdict(ev, DecisionKind.CANDIDATE_FAILED, wording.all_failed_screening(shortlist), goal, policy, counted)
        return Done(replace(v, shortlist=tuple(shortlist)))
    step = _prove(ev, goal, policy, chosen, base.number if base else None, counted, stop_now)
    if isinstance(step, Done):
        return Done(replace(step.verdict, shortlist=tuple(shortlist)))
    return step


def choose(ev: Evidence, goal: Goal, shortlist: Sequence[int]) -> int | None:
    """The shortlisted config to test: those whose screening run met the targets first, then by
    the mean log objective of its search and screening runs; None when every one failed."""
    sign = -1.0 if goal.maximize else 1.0
    scored = []
    for number in shortlist:
        screen = ev.of(number, Role.SCREEN)
        if any(r.failed for r in screen):
            continue
        runs = [r for r in (*ev.of(number, Role.SEARCH), *screen) if r.usable]
        met = all(r.met for r in screen if r.usable)
        score = mean([math.log(r.objective) for r in runs if r.objective is not None])
        scored.append((not met, sign * score, number))
    return min(scored)[2] if scored else None


def _prove(
    ev: Evidence, goal: Goal, policy: Policy, chosen: int, base: int | None, counted: Counted, stop_now: bool
) -> Step:
    cand_runs = ev.of(chosen, Role.PROOF)
    base_runs = ev.of(base, Role.PROOF) if base is not None else []
    failed = next((r for r in cand_runs if r.failed), None)
    if failed is not None:
        return Done(
            _verdict(
                ev, DecisionKind.CANDIDATE_FAILED, wording.failed(chosen, failed.failed), goal, policy, counted, chosen
            )
        )
    base_failed = next((r for r in base_runs if r.failed), None)
    if base_failed is not None or base is None:
        why = base_failed.failed if base_failed else "no baseline was measured"
        return Done(
            _verdict(ev, DecisionKind.NOT_ENOUGH_EVIDENCE, wording.defaults_failed(why), goal, policy, counted, chosen)
        )
    w = [r for r in cand_runs if r.usable]
    d = [r for r in base_runs if r.usable]
    n = min(len(w), len(d))
    for p in looks(policy.cap, policy.every):
        if p > n:
            break
        decided = judge(ev, goal, policy, chosen, w[:p], d[:p], replace(counted, pairs=p))
        if decided is not None:
            return Done(decided)
    if stop_now:
        why = wording.out_of_time(n)
        return Done(
            _verdict(
                ev, DecisionKind.NOT_ENOUGH_EVIDENCE, why, goal, policy, replace(counted, pairs=n), chosen, w[:n], d[:n]
            )
        )
    if len(d) < len(w):
        return Measure(base, Role.PROOF)
    if len(w) < len(d):
        return Measure(chosen, Role.PROOF)
    return Measure(base if len(d) % 2 == 0 else chosen, Role.PROOF)


def _objective(w: Sequence[Run], d: Sequence[Run]) -> Comparison | None:
    return compare([r.objective for r in w if r.objective], [r.objective for r in d if r.objective])


def _gain(w: Sequence[Run], d: Sequence[Run], goal: Goal) -> Comparison | None:
    """The comparison the gain is judged on: the candidate's best run and the defaults' worst
    set aside (stats.py `trimmed`), so one undetected outlier cannot name a config."""
    return trimmed([r.objective for r in w if r.objective], [r.objective for r in d if r.objective], goal.maximize)


def judge(
    ev: Evidence, goal: Goal, policy: Policy, chosen: int, w: Sequence[Run], d: Sequence[Run], counted: Counted
) -> Verdict | None:
    """The verdict at a look of `counted.pairs` pairs, or None to measure on."""
    p = counted.pairs
    final = p >= policy.cap
    two = boundary(Statistic.TWO_SAMPLE, p, policy.cap, policy.every, policy.alpha) or math.inf
    one = boundary(Statistic.ONE_SAMPLE, p, policy.cap, policy.every, policy.alpha) or math.inf
    counted = replace(counted, looks=looks(policy.cap, policy.every).index(p) + 1)
    critical = boundary(Statistic.TRIMMED, p, policy.cap, policy.every, policy.alpha) or math.inf
    obj = _objective(w, d)
    assert obj is not None
    gain = _gain(w, d, goal)
    gain_t = -math.inf if gain is None else (gain.t() if goal.maximize else -gain.t())
    cand = [with_unit(check_candidate(t, w, d, one, two), t) for t in goal.targets]
    dflt = [with_unit(check_defaults(t, d, one), t) for t in goal.targets]
    args = (ev, goal, policy, counted, chosen, w, d, cand + dflt, critical)
    defaults_miss = any(c.shown == MISSED for c in dflt)
    if any(c.shown == MISSED for c in cand):
        kind = DecisionKind.NOTHING_MEETS if defaults_miss else DecisionKind.CANDIDATE_FAILED
        return _stats_verdict(kind, wording.candidate_misses(chosen, cand), *args)
    met = all(c.shown == MET for c in cand)
    if met and defaults_miss:
        return _stats_verdict(
            DecisionKind.MEETS_WHERE_DEFAULTS_MISS, wording.meets_where_defaults_miss(chosen, dflt), *args
        )
    if met and gain_t > critical:
        return _stats_verdict(DecisionKind.BEATS_DEFAULTS, wording.beats(chosen, goal), *args)
    if not final:
        if (obj.t() if goal.maximize else -obj.t()) <= 0 and not defaults_miss:
            return _stats_verdict(DecisionKind.TIED, wording.futile(chosen, p), *args)
        return None
    if defaults_miss:
        return _stats_verdict(DecisionKind.NOTHING_MEETS, wording.targets_unclear(chosen, cand), *args)
    if gain_t > critical:
        return _stats_verdict(DecisionKind.NOT_ENOUGH_EVIDENCE, wording.targets_unclear(chosen, cand), *args)
    low, high = obj.interval()
    best_gain = math.exp(high if goal.maximize else -low) - 1
    if best_gain < policy.margin:
        return _stats_verdict(DecisionKind.TIED, wording.tied(chosen, policy.margin, best_gain), *args)
    return _stats_verdict(DecisionKind.NOT_ENOUGH_EVIDENCE, wording.unresolved(chosen, p), *args)


def effects(w: Sequence[Run], d: Sequence[Run], goal: Goal) -> tuple[Effect, ...]:
    """Candidate over defaults, per metric present in every run of both arms."""
    # the objective is reported under its name; a metric of that name is not reported twice
    keys = [OBJECTIVE, *(k for k in EFFECT_METRICS if k != goal.objective_name)]
    keys += [t.key for t in goal.targets if t.log_scale]
    out = []
    for key in dict.fromkeys(keys):
        xs, ys = figures(w, key), figures(d, key)
        comp = compare(xs, ys) if xs and ys else None
        if comp is not None and comp.dof >= 1:
            ratio, low, high = comp.ratio()
            out.append(Effect(goal.objective_name if key == OBJECTIVE else key, ratio, low, high, comp.n))
    return tuple(out)


def _stats_verdict(
    kind: DecisionKind,
    reason: str,
    ev: Evidence,
    goal: Goal,
    policy: Policy,
    counted: Counted,
    chosen: int,
    w: Sequence[Run],
    d: Sequence[Run],
    checks: list[TargetCheck],
    critical: float,
) -> Verdict:
    v = _verdict(ev, kind, reason, goal, policy, counted, chosen, w, d)
    return replace(v, targets=tuple(checks), mde=_mde(w, d, goal, critical))


def _mde(w: Sequence[Run], d: Sequence[Run], goal: Goal, critical: float) -> float | None:
    """The smallest gain the trimmed test could have detected: the runs it judges, the spread of
    those runs, its critical value at this look."""
    gain = _gain(w, d, goal)
    return None if gain is None else detectable(gain.sd, gain.n, critical)


def _verdict(
    ev: Evidence,
    kind: DecisionKind,
    reason: str,
    goal: Goal,
    policy: Policy,
    counted: Counted,
    chosen: int | None = None,
    w: Sequence[Run] = (),
    d: Sequence[Run] = (),
) -> Verdict:
    base = ev.baseline
    if not kind.changes_flags and not _defaults_met(ev) and not _defaults_unheard(ev):
        kind = DecisionKind.NOTHING_MEETS  # keeping defaults that miss the targets is no answer
    named = chosen if kind.changes_flags else None
    if kind is not DecisionKind.NOTHING_MEETS and not kind.changes_flags and base is not None:
        named = base.number
    obj = _objective(w, d) if w and d else None
    mde = None
    if obj is not None and obj.n >= 2:
        mde = detectable(obj.sd, obj.n, t_quantile(1 - policy.alpha, 2 * obj.n - 2))
    return Verdict(
        kind=kind,
        named=named,
        reason=reason,
        candidate=chosen,
        baseline=base.number if base else None,
        effects=effects(w, d, goal) if w and d else (),
        mde=mde,
        noise=obj.sd if obj is not None and obj.dof > 0 else None,
        alpha=policy.alpha,
        counted=counted,
        objective=goal.objective_name,
    )


def _defaults_met(ev: Evidence) -> bool:
    """The defaults met the targets on their search measurement (the runner's judgement)."""
    base = ev.baseline
    return base is not None and any(r.usable and r.met for r in ev.of(base.number, Role.SEARCH))


def _met_only_disturbed(runs: Sequence[Run]) -> bool:
    """A config's search measurements met the targets, but only ones other load disturbed: the
    search cannot tell whether it meets them (no evidence either way)."""
    return not any(r.usable for r in runs) and any(r.met and not r.failed and r.disturbed for r in runs)


def _defaults_unheard(ev: Evidence) -> bool:
    """The defaults met the targets in the search only on disturbed measurements."""
    base = ev.baseline
    return base is not None and _met_only_disturbed(ev.of(base.number, Role.SEARCH))


def _no_candidate(ev: Evidence, goal: Goal, policy: Policy, counted: Counted) -> Verdict:
    """No config besides the defaults met the targets on an undisturbed search measurement.
    Configs whose only measurements that met them were disturbed are not "configs that missed":
    a verdict that said nothing met the targets would contradict the table that shows them met."""
    unheard = [c.number for c in ev.configs if not c.baseline and _met_only_disturbed(ev.of(c.number, Role.SEARCH))]
    if unheard or _defaults_unheard(ev):
        why = wording.met_only_disturbed(unheard, _defaults_unheard(ev))
        return _verdict(ev, DecisionKind.NOT_ENOUGH_EVIDENCE, why, goal, policy, counted)
    if _defaults_met(ev):
        return _verdict(ev, DecisionKind.DEFAULTS_ONLY, wording.defaults_only(), goal, policy, counted)
    return _verdict(ev, DecisionKind.NOTHING_MEETS, wording.nothing_met(), goal, policy, counted)
