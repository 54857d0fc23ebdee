"""Issue 22 §3/§4: the confirmation's duel on paired re-measurements, on an injected fake
re-measurer (each launch answers the next scripted figure of that config, no server runs)."""

from __future__ import annotations

from dataclasses import dataclass, field

from kvtune.kinds import FailureKind
from kvtune.launchers.base import Candidate
from kvtune.objectives.noise import Noise
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.duel import MAX_BAD_PAIRS, Duel
from kvtune.tuner.remeasure import aggregate, runs_of

QUIET = Noise(0.05, 20)  # 5% pooled noise with 20 dof: the study measured it


def _outcome(number: int, first: float, flags: dict, baseline: bool = False) -> TrialOutcome:
    return TrialOutcome(
        number=number,
        candidate=Candidate(flags=flags),
        argv=["x"],
        env={},
        baseline=baseline,
        metrics={"output_throughput": first},
        constraints={"server_ran": -1.0},
        objective=first,
        objectives=[first],
    )


class Disturbed(TrialOutcome):
    """A re-measurement the runner says stayed disturbed (the interference monitor's verdict)."""

    disturbed = True


@dataclass
class FakeRemeasurer:
    """Answers each launch of trial n with the next of `script[n]`: a number, or ("disturbed", v),
    or ("failed", reason); records the launch order and keeps runs as the real one does."""

    script: dict[int, list]
    order: list[int] = field(default_factory=list)

    def seed(self) -> int:
        return 1

    def launch(self, o: TrialOutcome, role: str) -> TrialOutcome | None:
        self.order.append(o.number)
        step = self.script[o.number].pop(0)
        kind, value = step if isinstance(step, tuple) else ("ok", step)
        if kind == "missed":  # measured in full, a target broke: ("missed", objective)
            again = _outcome(o.number, value, dict(o.candidate.flags), o.baseline)
            again.constraints, again.failure, again.reason = {"t": 0.2}, FailureKind.TARGET_MISSED, "tpot broke"
            return again
        cls = Disturbed if kind == "disturbed" else TrialOutcome
        again = cls(
            number=o.number,
            candidate=o.candidate,
            argv=["x"],
            env={},
            baseline=o.baseline,
            metrics={"output_throughput": value if kind != "failed" else 1.0},
            constraints={"server_ran": -1.0 if kind != "failed" else 1.0},
            objective=None if kind == "failed" else value,
            objectives=[] if kind == "failed" else [value],
        )
        if kind == "failed":
            again.reason = value
        return again

    def add(self, o: TrialOutcome, run: dict, baseline: TrialOutcome | None) -> None:
        o.confirmation = aggregate([*runs_of(o), run])

    def invalidate(self, o: TrialOutcome, index: int, why: str, baseline: TrialOutcome | None) -> None:
        runs = runs_of(o)
        runs[index] = {**runs[index], "valid": False, "invalid": why}
        o.confirmation = aggregate(runs)


def _duel(leader, rival, fake, cap=3, noise=QUIET, **kw) -> Duel:
    return Duel(leader, rival, fake, "maximize", cap, lambda: noise, lambda o: len(o.candidate.flags), None, **kw)


def test_the_duel_measures_leader_and_rival_in_turn_and_stops_once_the_interval_excludes_zero():
    leader, rival = _outcome(3, 200.0, {"parallel": 8}), _outcome(5, 180.0, {"parallel": 4, "threads": 2})
    fake = FakeRemeasurer({3: [150.0, 152.0, 151.0], 5: [100.0, 101.0, 99.0]})
    record = _duel(leader, rival, fake).run()
    # a 1.5x gap with 5% noise: one pair decides (the 95% half-width is 1.96 * 0.05 * sqrt(2) ~ 14%)
    assert fake.order == [3, 5]
    assert record["verdict"] == "leader wins" and record["winner"] == 3 and record["pairs"] == [[150.0, 100.0]]
    assert "trial 3 beat trial 5 by more than the noise (ratio 1.50" in record["reason"]


def test_a_close_duel_measures_a_b_a_b_until_the_cap_then_the_simpler_config_wins():
    leader = _outcome(2, 110.0, {"parallel": 8, "threads": 2})
    base = _outcome(0, 100.0, {}, baseline=True)
    fake = FakeRemeasurer({2: [101.0, 99.0, 102.0], 0: [100.0, 100.0, 100.0]})
    record = _duel(leader, base, fake).run()
    assert fake.order == [2, 0, 2, 0, 2, 0]  # A B A B A B on fresh servers, cap 3 pairs
    assert record["verdict"] == "tie at the cap" and record["tie"] and len(record["pairs"]) == 3
    assert record["winner"] == 0
    assert record["reason"].startswith("tied within noise with trial 2 (ratio 1.01, 95% CI ")
    assert record["reason"].endswith(
        "over 3 pairs, pooled noise 5.0%, 20 dof): the defaults change fewer flags (0 vs 2)"
    )


def test_a_tie_between_equally_simple_configs_keeps_the_leader():
    leader, rival = _outcome(2, 110.0, {"parallel": 8}), _outcome(4, 108.0, {"parallel": 4})
    fake = FakeRemeasurer({2: [100.0, 101.0], 4: [100.0, 100.0]})
    record = _duel(leader, rival, fake, cap=2).run()
    assert record["tie"] and record["winner"] == 2 and "equally simple" in record["reason"]


def test_a_disturbed_pair_is_measured_again_not_averaged():
    leader, rival = _outcome(3, 200.0, {"parallel": 8}), _outcome(5, 180.0, {"parallel": 4})
    # the first rival run was disturbed (a hog): 40 tok/s would make the leader look 3.75x better
    fake = FakeRemeasurer({3: [150.0, 150.0], 5: [("disturbed", 40.0), 145.0]})
    record = _duel(leader, rival, fake, cap=1).run()
    assert fake.order == [3, 5, 3, 5]
    assert record["pairs"] == [[150.0, 145.0]] and record["tie"]
    assert record["remeasured_pairs"] == ["trial 5 disturbed"]
    assert rival.confirmation["objective"] == 145.0  # the disturbed run is kept but not evidence
    assert [r["valid"] for r in rival.confirmation["runs"]] == [False, True]


def test_a_run_inconsistent_with_the_configs_earlier_runs_is_measured_again():
    leader, rival = _outcome(3, 200.0, {"parallel": 8}), _outcome(5, 180.0, {"parallel": 4})
    # pair 1 ties; then the leader's run halves (150 -> 75, far beyond 5% noise): re-measured
    fake = FakeRemeasurer({3: [150.0, 75.0, 151.0, 150.0], 5: [149.0, 150.0, 150.0, 149.0]})
    record = _duel(leader, rival, fake, cap=3).run()
    assert record["remeasured_pairs"] == ["trial 3 inconsistent with its earlier runs"]
    assert [a for a, _ in record["pairs"]] == [150.0, 151.0, 150.0]
    assert leader.confirmation["objective"] == (150.0 + 151.0 + 150.0) / 3  # 75 is not averaged in
    assert [r.get("invalid") for r in leader.confirmation["runs"]][1] == "inconsistent"


def test_bad_pairs_are_bounded():
    leader, rival = _outcome(3, 200.0, {"parallel": 8}), _outcome(5, 180.0, {"parallel": 4})
    fake = FakeRemeasurer({3: [150.0] * 5, 5: [("disturbed", 40.0)] * 5})
    assert _duel(leader, rival, fake).run() is None  # no undisturbed pair: no decision
    assert fake.order.count(5) == MAX_BAD_PAIRS


def test_the_fresh_sentinel_run_is_the_first_pairs_rival_side():
    leader, base = _outcome(2, 110.0, {"parallel": 8}), _outcome(0, 100.0, {}, baseline=True)
    fake = FakeRemeasurer({2: [150.0], 0: []})
    sentinel = {"objective": 100.0, "feasible": True, "valid": True, "reason": ""}
    base.confirmation = aggregate([sentinel])
    record = _duel(leader, base, fake, rival_run=sentinel).run()
    assert fake.order == [2]  # the baseline is not measured twice in a row: B A, then decided
    assert record["pairs"] == [[150.0, 100.0]] and record["winner"] == 2


def test_a_run_that_only_missed_a_target_still_counts_as_a_pair():
    """One slow request in 16 (a p95 tail) made the defaults lose a duel they were tying: the pair
    counts, and feasibility is judged later on the mean of the runs (remeasure.aggregate)."""
    base, rival = _outcome(0, 100.0, {}, baseline=True), _outcome(2, 101.0, {"parallel": 2})
    fake = FakeRemeasurer({0: [("missed", 99.0), 100.0], 2: [101.0, 100.0]})
    record = _duel(base, rival, fake, cap=2).run()
    assert record["pairs"] == [[99.0, 101.0], [100.0, 100.0]]
    assert record["winner"] == 0 and record["verdict"] != "rival wins"


def test_a_leader_that_fails_its_re_measurement_loses():
    leader, rival = _outcome(3, 200.0, {"parallel": 8}), _outcome(5, 180.0, {"parallel": 4})
    fake = FakeRemeasurer({3: [("failed", "crashed: exit 139")], 5: [170.0]})
    record = _duel(leader, rival, fake).run()
    assert record["winner"] == 5 and record["verdict"] == "rival wins"
    assert "trial 3 failed its re-measurement (crashed: exit 139)" in record["reason"]


def test_a_baseline_leader_uses_its_fresh_sentinel_run_as_the_first_pairs_a_side():
    base, rival = _outcome(0, 120.0, {}, baseline=True), _outcome(4, 100.0, {"parallel": 4})
    fake = FakeRemeasurer({0: [], 4: [80.0]})
    sentinel = {"objective": 120.0, "feasible": True, "valid": True, "reason": ""}
    base.confirmation = aggregate([sentinel])
    record = _duel(base, rival, fake, leader_run=sentinel).run()
    assert fake.order == [4] and record["pairs"] == [[120.0, 80.0]] and record["winner"] == 0
