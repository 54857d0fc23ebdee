"""The confirmation's duel: the leader against its nearest rival, A B A B, decided on pairs.

Both configs are re-measured in alternation on fresh servers, so slow drift (a machine getting
busier or quieter) moves both sides of a pair alike and cancels in their log-ratio. After each
pair `objectives.decisions.decide` looks at the 95% interval of the mean paired log-ratio with
the study's pooled noise (recomputed as the runs come in): excluding zero names a winner and the
duel stops; at `confirm_pairs` pairs it is a tie, and the simpler config (fewer flags changed
from the server's defaults) wins. A pair where a side was disturbed, or disagrees with that
config's earlier runs beyond the noise (`objectives.noise.inconsistent`), is not evidence: it is
measured again, at most `MAX_BAD_PAIRS` times per duel. A side whose re-measurement fails (a
crash, a target missed) loses the duel: the named best must hold on a fresh server.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from kvtune.objectives.decisions import PairedInterval, Verdict, decide, tie_break
from kvtune.objectives.noise import Noise, inconsistent
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.remeasure import Remeasurer, only_missed_targets, run_record, runs_of, usable

MAX_BAD_PAIRS = 2  # disturbed or inconsistent pairs measured again per duel


def name_of(o: TrialOutcome) -> str:
    return "the defaults" if o.baseline else f"trial {o.number}"


def _positive(value: Any) -> bool:
    """A figure a log-ratio can take: usable (remeasure.py) and above zero."""
    return usable(value) and value > 0


def interval_text(iv: PairedInterval) -> str:
    """``ratio 1.03, 95% CI 0.97-1.09 over 3 pairs``: the leader over the rival, as people read it."""
    lo, mid, hi = (math.exp(x) for x in (iv.low, iv.mean, iv.high))
    return f"ratio {mid:.2f}, 95% CI {lo:.2f}-{hi:.2f} over {iv.pairs} pair{'s' if iv.pairs != 1 else ''}"


@dataclass
class Duel:
    """One duel; `run()` returns its record (leader, rival, pairs, interval, verdict, winner, reason)."""

    leader: TrialOutcome
    rival: TrialOutcome
    remeasure: Remeasurer
    direction: str
    cap: int
    noise: Callable[[], Noise]  # the study's pooled noise on the objective, as it stands now
    changed: Callable[[TrialOutcome], int]  # flags changed from the server's defaults
    # the study's measured baseline, read once by the caller (relative targets refer to its mean)
    baseline: TrialOutcome | None
    fits: Callable[[TrialOutcome], bool] = lambda o: True  # the time budget allows one more run
    rival_run: dict | None = None  # a run of the rival just measured (the end sentinel): pair 1's B
    leader_run: dict | None = None  # the same for a leader that is the baseline: pair 1's A
    pairs: list[list[float]] = field(default_factory=list)
    bad: list[str] = field(default_factory=list)

    def run(self) -> dict[str, Any] | None:
        """Measure pairs until the decision stops; None when no pair could be measured at all."""
        while len(self.pairs) < self.cap and len(self.bad) < MAX_BAD_PAIRS:
            outcome = self._pair()
            if isinstance(outcome, dict):
                return outcome  # one side failed: decided without an interval
            if outcome is None:
                break  # never started, or the time budget is spent
            if outcome is False:
                continue  # not evidence: measure the pair again
            verdict, iv = decide(self._tuples(), self.direction, self.cap, self.noise())
            if verdict is not Verdict.UNDECIDED:
                return self._record(verdict, iv)
        if not self.pairs:
            return None
        verdict, iv = decide(self._tuples(), self.direction, len(self.pairs), self.noise())
        return self._record(verdict, iv)

    def _tuples(self) -> list[tuple[float, float]]:
        return [(a, b) for a, b in self.pairs]

    def _measure(self, o: TrialOutcome) -> dict | None:
        if not self.fits(o):
            return None
        again = self.remeasure.launch(o, "confirming (A B A B)")
        if again is None:
            return None
        run = run_record(again, self.remeasure.seed(), "duel")
        self.remeasure.add(o, run, self.baseline)
        return run

    def _pair(self) -> bool | dict | None:
        """Measure one pair (leader first; a side whose fresh end-sentinel run is given is not
        measured again):
        True when it counts, False when it is measured again, a decision when a side failed."""
        b: dict | None
        a: dict | None
        if self.rival_run is not None:
            b, self.rival_run = self.rival_run, None
            a = self._measure(self.leader)
        elif self.leader_run is not None:
            a, self.leader_run = self.leader_run, None
            b = self._measure(self.rival)
        else:
            a = self._measure(self.leader)
            b = self._measure(self.rival) if a is not None else None
        if a is None or b is None:
            return None
        for side, run in ((self.leader, a), (self.rival, b)):
            if not run["valid"]:
                self.bad.append(f"{name_of(side)} disturbed")
                return False
        # A run that only missed a target still counts: feasibility is the mean's (remeasure.py).
        failed = [
            side
            for side, run in ((self.leader, a), (self.rival, b))
            if not _positive(run["objective"]) or not (run["feasible"] or only_missed_targets(run))
        ]
        if failed:
            return self._failed(failed, a, b)
        for side, run in ((self.leader, a), (self.rival, b)):
            if self._inconsistent(side, run):
                self.bad.append(f"{name_of(side)} inconsistent with its earlier runs")
                self.remeasure.invalidate(side, len(runs_of(side)) - 1, "inconsistent", self.baseline)
                return False
        self.pairs.append([float(a["objective"]), float(b["objective"])])
        return True

    def _inconsistent(self, o: TrialOutcome, run: dict) -> bool:
        """`run` disagrees beyond the noise with the geometric mean of `o`'s earlier valid runs."""
        earlier = [r["objective"] for r in runs_of(o)[:-1] if r.get("valid", True) and _positive(r.get("objective"))]
        if not earlier:
            return False
        center = math.exp(sum(math.log(v) for v in earlier) / len(earlier))
        return inconsistent(center, float(run["objective"]), self.noise())

    def _failed(self, failed: list[TrialOutcome], a: dict, b: dict) -> dict[str, Any] | None:
        if len(failed) == 2:
            return None
        loser = failed[0]
        winner = self.rival if loser is self.leader else self.leader
        run = a if loser is self.leader else b
        reason = (
            f"{name_of(winner)} named: {name_of(loser)} failed its re-measurement ({run.get('reason') or 'no figure'})"
        )
        verdict = Verdict.RIVAL if loser is self.leader else Verdict.LEADER
        return self._record(verdict, None, winner, reason)

    def _record(
        self, verdict: Verdict, iv: PairedInterval | None, winner: TrialOutcome | None = None, reason: str | None = None
    ) -> dict[str, Any]:
        if winner is None and iv is not None:
            winner, reason = self._winner(verdict, iv)
        assert winner is not None and reason is not None
        return {
            "leader": self.leader.number,
            "rival": self.rival.number,
            "pairs": self.pairs,
            "interval": None
            if iv is None
            else {
                "mean": iv.mean,
                "low": iv.low,
                "high": iv.high,
                "pairs": iv.pairs,
                "dof": iv.dof,
                "source": iv.source,
            },
            "verdict": verdict.value,
            "winner": winner.number,
            "tie": verdict is Verdict.TIE,
            "reason": reason,
            "remeasured_pairs": self.bad,
        }

    def _winner(self, verdict: Verdict, iv: PairedInterval) -> tuple[TrialOutcome, str]:
        what = f"{interval_text(iv)}, {iv.source}"
        if verdict is Verdict.LEADER:
            return self.leader, f"{name_of(self.leader)} beat {name_of(self.rival)} by more than the noise ({what})"
        if verdict is Verdict.RIVAL:
            return self.rival, f"{name_of(self.rival)} beat {name_of(self.leader)} by more than the noise ({what})"
        n_leader, n_rival = self.changed(self.leader), self.changed(self.rival)
        pick = tie_break(n_leader, n_rival)
        winner, other = (self.rival, self.leader) if pick is Verdict.RIVAL else (self.leader, self.rival)
        n_win, n_other = (n_rival, n_leader) if pick is Verdict.RIVAL else (n_leader, n_rival)
        if n_win < n_other:
            why = f"{name_of(winner)} change{'s' if not winner.baseline else ''} fewer flags ({n_win} vs {n_other})"
        else:
            why = f"equally simple ({n_win} flags changed each): the better mean stays"
        return winner, f"tied within noise with {name_of(other)} ({what}): {why}"
