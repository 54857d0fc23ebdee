"""What relative targets are anchored on: a quiet measurement of the defaults, never a disturbed one.

A relative target ("tpot_median<0.5x") is a threshold set from the baseline's figure. A baseline
measured while something else used the machine is slower than the defaults really are, so its
figure sets a loose threshold, the search ranks configs against it, and the verdict then tests
a config fresh defaults rightly refuse while one that met the real bound is never tested.

So when the baseline's first measurement stays disturbed after the runner's own re-measurements
(tuner/trial/disturbance.py), its figures anchor nothing for good: the search goes on judging
against them provisionally (and watches no relative target for the early stop, whose cut could
not be undone), and after each trial, once a short look finds the machine quiet, the defaults
are measured again on a fresh server with the study's own prompts, at most `ANCHOR_LAUNCHES`
times (each is a launch and measurement out of the time budget, said in a progress line; its
run record keeps the launch's hardware-seconds by phase, which the study's time lines count as
"anchor", study/time_spent.py, and it moves the budget's clock as a finished trial does, so a
resumed study counts it too, tuner/accounting.py). The first quiet one becomes the anchor:
every earlier trial is judged again against it (the re-judgement is stored in the study,
`ANCHOR_ATTR`, and the trial records apply it on reading, tuner/records.py, so the verdict's
shortlist, results.json and `kvtune show` all see it), and later trials are judged against it
directly. When no quiet measurement of the defaults can be had before the verdict, one line
says so and the search's judgement leaves the relative targets out: they are judged only on the
verdict's fresh paired runs (D W W D), which compare each candidate run with the defaults' runs
of the same minutes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import optuna

from kvtune.clock import REAL_CLOCK
from kvtune.interference import Interference, preflight
from kvtune.kinds import FailureKind
from kvtune.objectives.objective import Objective
from kvtune.objectives.targets import Target
from kvtune.study.outcome import TrialOutcome
from kvtune.study.time_spent import ANCHOR, with_failed_starts
from kvtune.tuner import accounting
from kvtune.tuner.events import Callbacks
from kvtune.tuner.trial import scoring
from kvtune.tuner.trial.disturbance import QUIET_WINDOW_S

if TYPE_CHECKING:
    from kvtune.tuner.trial.runner import TrialRunner

ANCHOR_ATTR = "anchor"  # the study's user attr: the anchor runs, the quiet one, the re-judgements
ANCHOR_LAUNCHES = 2  # fresh measurements of the defaults at most, to find a quiet anchor
END_LOOKS = 5  # before the verdict: looks at the machine (one `look` each) waiting for quiet

# A fresh launch and measurement of the defaults for the anchor (the k-th); None: never started.
MeasureDefaults = Callable[[TrialOutcome, int], "TrialOutcome | None"]
# One short look at the machine with nothing of kvtune's running (None: nothing watched).
Look = Callable[[], "Interference | None"]


def stored(study: optuna.Study) -> dict[str, Any]:
    return dict(study.user_attrs.get(ANCHOR_ATTR) or {})


def summary_line(state: Mapping[str, Any] | None) -> str | None:
    """What relative targets were judged against, for the summary and `kvtune show` (results.json's
    "anchor" block, the study's `ANCHOR_ATTR`): None when the defaults' first measurement was
    quiet and anchored them (no block), so a run only says so when it is not the plain case."""
    if not state:
        return None
    runs = list(state.get("runs") or [])
    quiet = state.get("quiet")
    if quiet:
        k = next((i for i, r in enumerate(runs, 1) if r.get("quiet")), len(runs))
        return (
            f"Relative targets were anchored on the defaults measured again, quiet (anchor run {k} of {len(runs)}): "
            "their first measurement was disturbed, so every trial was judged against the quiet one."
        )
    if state.get("gave_up"):
        return (
            f"Relative targets: no quiet measurement of the defaults in {len(runs)} tries (the first was disturbed "
            "too), so they were judged only on the verdict's fresh paired runs against the defaults."
        )
    return "Relative targets are judged provisionally against a disturbed measurement of the defaults" + (
        f" ({len(runs)} anchor run(s) so far disturbed too)." if runs else "."
    )


def anchored_on(baseline: TrialOutcome | None, state: dict[str, Any]) -> TrialOutcome | None:
    """The measurement relative targets are judged against: the baseline's first one when it was
    quiet, else the quiet re-measurement (the baseline with its figures), else the disturbed first
    one, provisionally (its `disturbed` says so: nothing is cut early on it)."""
    quiet = state.get("quiet")
    if baseline is None or not baseline.disturbed or not quiet:
        return baseline
    return replace(
        baseline, metrics=dict(quiet["metrics"]), interference=quiet.get("interference"), disturbed_attempts=[]
    )


def rejudged(
    o: TrialOutcome, targets: Sequence[Target], objectives: Sequence[Objective], anchor: dict[str, float] | None
) -> dict[str, Any] | None:
    """`o`'s search measurement judged against `anchor` (None: relative targets left out, the
    verdict's fresh paired runs judge them): its constraints, failure and reason. None when its
    judgement cannot move: no full figures of its own (a crash, failed requests, a pre-screen
    rejection, a measurement the early stop or the screen cut short)."""
    m = o.metrics or {}
    if not m or m.get("early_stopped") or m.get("screened") or o.failure not in (None, FailureKind.TARGET_MISSED):
        return None
    judged = replace(o, constraints={}, failure=None, reason="")
    resolved = (
        [t for t in targets if not t.relative]
        if anchor is None
        else scoring.resolved_targets(targets, replace(o, metrics=anchor), judged)
    )
    scoring.judge(judged, resolved, targets, objectives)
    return {
        "constraints": judged.constraints,
        "failure": judged.failure.value if judged.failure else None,
        "reason": judged.reason,
    }


def apply(outcomes: Sequence[TrialOutcome], state: dict[str, Any]) -> None:
    """Set each outcome's judgement to its stored re-judgement (the trial records call this on
    every read, so every reader of the study sees the same judgement)."""
    again = state.get("rejudged") or {}
    for o in outcomes:
        j = again.get(str(o.number))
        if j is not None:
            o.constraints = {k: (float("inf") if v is None else v) for k, v in j["constraints"].items()}
            o.failure = FailureKind(j["failure"]) if j["failure"] else None
            o.reason = j["reason"]


@dataclass
class Anchoring:
    """Finds the quiet anchor of a study whose baseline was measured disturbed (see the module
    docstring). `measure` launches the defaults afresh, `look` watches the machine briefly: the
    tuner passes its trial runner's, a test scripted ones."""

    study: optuna.Study
    targets: Sequence[Target]
    objectives: Sequence[Objective]
    callbacks: Callbacks
    measure: MeasureDefaults
    look: Look
    launches: int = ANCHOR_LAUNCHES

    def wanted(self, baseline: TrialOutcome | None) -> bool:
        """Whether the study still needs a quiet anchor for `baseline` (its measured baseline)."""
        state = stored(self.study)
        return (
            baseline is not None
            and baseline.disturbed
            and any(t.relative for t in self.targets)
            and not state.get("quiet")
            and not state.get("gave_up")
        )

    def after_trial(self, baseline: TrialOutcome | None, outcomes: Sequence[TrialOutcome]) -> None:
        """Between search trials: measure the defaults again when the machine looks quiet now."""
        if not self.wanted(baseline) or len(stored(self.study).get("runs") or []) >= self.launches:
            return
        assert baseline is not None
        window = self.look()
        if window is not None and window.disturbed:
            self.callbacks.phase(
                baseline.number,
                f"relative targets wait for a quiet measurement of the defaults: the machine is still "
                f"busy ({window.reason}); judged provisionally against the disturbed one",
            )
            return
        self._measure(baseline, outcomes)

    def before_verdict(self, baseline: TrialOutcome | None, outcomes: Sequence[TrialOutcome]) -> None:
        """At the end of the search: wait a little for quiet and measure the defaults again while
        launches are left; failing that, say so and leave relative targets to the verdict."""
        if not self.wanted(baseline):
            return
        assert baseline is not None
        while len(stored(self.study).get("runs") or []) < self.launches:
            for _ in range(END_LOOKS):
                window = self.look()
                if window is None or not window.disturbed:
                    break
            if self._measure(baseline, outcomes):
                return
        self._give_up(baseline, outcomes)

    def _measure(self, baseline: TrialOutcome, outcomes: Sequence[TrialOutcome]) -> bool:
        """One fresh measurement of the defaults; True when it is quiet and now anchors."""
        state = stored(self.study)
        runs = list(state.get("runs") or [])
        k = len(runs) + 1
        self.callbacks.phase(
            baseline.number,
            f"the defaults' first measurement was disturbed, so it anchors no relative target: "
            f"measuring them again on a fresh server (anchor run {k} of at most {self.launches})",
        )
        again = self.measure(baseline, k)
        figures = dict(again.metrics or {}) if again is not None else {}
        quiet = (
            again is not None
            and bool(figures)
            and not again.disturbed
            and again.failure in (None, FailureKind.TARGET_MISSED)  # it misses its own 0.5x: measured in full
        )
        run = {
            "metrics": figures or None,
            "interference": again.interference if again is not None else None,
            "disturbed": again is None or again.disturbed,
            "at": REAL_CLOCK.wall(),
            "quiet": quiet,
            "time_spent": again.time_spent if again is not None else None,  # by phase (study/time_spent.py)
        }
        state["runs"] = [*runs, run]
        if quiet:
            state["quiet"] = run
            state["rejudged"] = self._rejudge(outcomes, figures)
        self.study.set_user_attr(ANCHOR_ATTR, state)
        accounting.tick_clock(self.study)  # the launch spent the time budget, as a trial does
        if quiet:
            self.callbacks.phase(baseline.number, self._moved(baseline, figures, outcomes, state["rejudged"]))
        elif again is not None:
            self.callbacks.phase(baseline.number, f"anchor run {k} was disturbed too: it anchors nothing")
        return quiet

    def _give_up(self, baseline: TrialOutcome, outcomes: Sequence[TrialOutcome]) -> None:
        state = stored(self.study)
        state["gave_up"] = True
        state["rejudged"] = self._rejudge(outcomes, None)
        self.study.set_user_attr(ANCHOR_ATTR, state)
        relative = ", ".join(t.text for t in self.targets if t.relative)
        self.callbacks.phase(
            baseline.number,
            f"no quiet measurement of the defaults in {len(state.get('runs') or [])} tries: {relative} "
            "judged only on the verdict's fresh paired runs against the defaults",
        )

    def _rejudge(self, outcomes: Sequence[TrialOutcome], anchor: dict[str, float] | None) -> dict[str, Any]:
        out = {}
        for o in outcomes:
            j = rejudged(o, self.targets, self.objectives, anchor)
            if j is not None:
                out[str(o.number)] = j
        return out

    def _moved(
        self, baseline: TrialOutcome, anchor: dict[str, float], outcomes: Sequence[TrialOutcome], again: dict
    ) -> str:
        """The progress line: the thresholds the quiet anchor sets, and the trials it changed."""
        bounds = []
        for t in self.targets:
            if t.factor is not None:
                was, now = (baseline.metrics or {}).get(t.key), anchor.get(t.key)
                if isinstance(was, (int, float)) and isinstance(now, (int, float)):
                    bounds.append(f"{t.text} = {t.factor * now:.4g} (was {t.factor * was:.4g} on the disturbed one)")
        changed = []
        for o in outcomes:
            j = again.get(str(o.number))
            if j is None or o.baseline:
                continue
            met = all(v <= 0 for v in j["constraints"].values())
            if met != o.feasible:
                changed.append(f"trial {o.number} now {'meets' if met else 'misses'} them")
        return (
            "relative targets anchored on a quiet measurement of the defaults: "
            + ("; ".join(bounds) or "set")
            + "; earlier trials judged again"
            + (f" ({', '.join(changed)})" if changed else " (none changed)")
        )


LAUNCH_ATTEMPTS = 2  # launches of one anchor run while they fail transiently (a port clash)


def runner_measure(runner: "TrialRunner", run_dir: Path, callbacks: Callbacks, study: optuna.Study) -> MeasureDefaults:
    """`MeasureDefaults` through the study's trial runner: a fresh server, the study's own
    workload and prompts, measured in full (its own interference watch re-measures a disturbed
    run on that server), into ``trials/NNNN-anchor-K``. A launch that failed transiently is
    launched again; its seconds count in the start-up and waits of the one that ran
    (study/time_spent.py `with_failed_starts`), or, when none ran, are kept in `study` as the
    anchor's (tuner/accounting.py `keep_never_started`)."""

    def measure(baseline: TrialOutcome, k: int) -> TrialOutcome | None:
        failed: list[dict[str, Any] | None] = []
        for attempt in range(LAUNCH_ATTEMPTS):
            again, port = runner.new_outcome(baseline.number, baseline.candidate, True)
            callbacks.trial_started(baseline.number, baseline.candidate, True)
            folder = run_dir / "trials" / (f"{baseline.number:04d}-anchor-{k}" + (f"-{attempt + 1}" if attempt else ""))
            runner.run(again, port, folder, None, early_stop=False)
            if not again.transient:
                again.time_spent = with_failed_starts(again.time_spent, failed)
                return again
            failed.append(again.time_spent)
        accounting.keep_never_started(study, ANCHOR, baseline.number, failed)
        return None

    return measure


def runner_look(runner: "TrialRunner", seconds: float = QUIET_WINDOW_S) -> Look:
    """`Look` through the trial runner's interference monitor, with no server of kvtune's running."""
    return lambda: preflight(runner.monitor(lambda: (), None), seconds, runner.sleep)
