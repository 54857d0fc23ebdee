"""The verdict: one pure package that decides whether a tuned config beats the server's defaults.

Input: every measurement (verdict/evidence.py); output: what to measure next or the `Verdict`
(verdict/record.py), through `next_step` (verdict/engine.py). No I/O, no Optuna, no clock: the
tuner only schedules what it is asked to measure, and benchmarks/verdicts.py simulates thousands
of studies through the same code to state its error rates (docs/verdicts.md). The same tests
judge a re-measured config the proof did not test (verdict/target_checks.py `fixed_checks`) and
the best overall of several studies (verdict/overall.py): kvtune's one standard of proof.
"""

from kvtune.verdict.engine import Done, Measure, Step, next_step
from kvtune.verdict.evidence import ALPHA, OBJECTIVE, Config, Evidence, Goal, Policy, Role, Run, TargetTest
from kvtune.verdict.record import Counted, DecisionKind, Effect, TargetCheck, Verdict

__all__ = [
    "ALPHA",
    "Config",
    "Counted",
    "DecisionKind",
    "Done",
    "Effect",
    "Evidence",
    "Goal",
    "Measure",
    "OBJECTIVE",
    "Policy",
    "Role",
    "Run",
    "Step",
    "TargetCheck",
    "TargetTest",
    "Verdict",
    "next_step",
]
