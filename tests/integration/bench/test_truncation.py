"""A truncated answer is a failed request, and a missing token count is counted, never 0.

With ``ignore_eos`` and ``max_tokens=N`` every answer must have N tokens; fewer means the context
filled up (prompt + chat template + output did not fit a slot) or the server ignored
``ignore_eos``, and a short answer must not pass for a fast one. Against the fake server's
`truncate_at` and `omit_usage`, and canned streams through httpx.MockTransport.

Here the tests that start processes; the rest are in tests/unit/bench/test_truncation.py.
"""

from __future__ import annotations

from kvtune.kinds import FailureKind
from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from tests.conftest import TINY


def test_a_truncating_server_makes_the_trial_infeasible_with_that_reason(make_tuner) -> None:
    launcher = FakeLauncher(knobs=(Knob("truncate-at", "fixed", value=2), Knob("speed", "choices", choices=(1, 2))))
    tuner, _ = make_tuner(StudySpec(study="t", trials=2, workload=TINY, confirm_top=0).validate(), launcher)
    base, bad = tuner.run()
    assert base.feasible  # the baseline has no truncate-at flag
    assert not bad.feasible and bad.failure is FailureKind.REQUESTS_FAILED
    # the early stop ends the trial at the first truncated answer, and says why it failed
    assert "failed (first: truncated: 2 of" in bad.reason, bad.reason
    assert bad.metrics["truncated_requests"] >= 1
