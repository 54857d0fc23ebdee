"""A measurement taken while the machine was busy is dropped and re-measured inside the runner:
what the trial record keeps of it. The re-measurement itself starts the fake launcher's server (a
child process on a real port), so those tests are in tests/integration/tuner/trial/test_disturbed.py."""

from __future__ import annotations

from kvtune.study.outcome import TrialOutcome


def test_old_records_without_the_fields_read_back_undisturbed():
    old = {"number": 1, "candidate": {"flags": {}}, "argv": [], "env": {}, "constraints": {"server_ran": 0.0}}
    o = TrialOutcome.from_dict(old)
    assert o.interference is None and o.disturbed_attempts == [] and not o.disturbed
