"""A study read from its storage while workers on other machines fill it: `kvtune show --storage`
and `kvtune report --storage`. results.json lives on the host that ran `kvtune run`; the storage
(PostgreSQL, or `kvtune proxy` in front of it) is what every host can reach.

Reading only: no table is created, nothing is written (no clock tick, no recovery, no heartbeat),
and PostgreSQL readers never block writers, so watching cannot slow the workers. The payload is
results.json's own (`study.results.build_payload`) over the trials told so far, with the
study-level blocks the session adds (the sentinel series, the verdict, the anchor, the load
search: tuner/ledger.py `report`, through `study.results.add_study_blocks`, so the time lines
count the same launches), so `show` and `report` print what they print for a finished study;
what only the running host knows (the backend's version, the importance fit) is left out. A
study set up for workers whose confirmation has not run carries the note that says so
(study/unconfirmed.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kvtune.errors import SpecError
from kvtune.study import unconfirmed
from kvtune.study.results import add_study_blocks, build_payload
from kvtune.study.spec import StudySpec
from kvtune.tuner import accounting, sentinel
from kvtune.tuner.budget import Budget
from kvtune.tuner.fleet import confirmer
from kvtune.tuner.ledger import StudyLedger
from kvtune.tuner.records import TrialRecords
from kvtune.tuner.store import storage


@dataclass(frozen=True)
class Progress:
    """Where a study stands in its storage: trials in flight and queued, configs measured."""

    running: int
    waiting: int
    measured: int
    budget: int

    @property
    def in_flight(self) -> bool:
        return self.running + self.waiting > 0

    def line(self) -> str:
        so_far = f"{self.measured} of {self.budget} configs measured"
        if self.in_flight:
            return f"still running: {self.running} trial(s) in flight, {self.waiting} queued; {so_far} so far"
        return f"no trial in flight: {so_far}"


def read_study(name: str, url: str, on_wait: Callable[[str], None] | None = None) -> tuple[dict, Progress]:
    """results.json's payload for study `name` in storage `url` as it stands, and its progress
    (`on_wait`: says a storage slow to answer, storage.py `make_storage`)."""
    study = storage.load_study(name, url, read_only=True, on_wait=on_wait)
    attrs = study.user_attrs
    if "spec" not in attrs:
        raise SpecError(f"study {name!r} in {storage.redact(url)} was not created by kvtune (no stored spec)")
    spec = StudySpec.from_dict(attrs["spec"])
    ledger = StudyLedger(study, TrialRecords(study), lambda: None, spec.primary.key)
    outcomes = ledger.outcomes()
    payload = build_payload(
        name,
        attrs["spec"],
        attrs.get("hardware") or {},
        "",
        [t.describe() for t in spec.judged_targets],
        spec.objective_specs,
        outcomes,
    )
    add_study_blocks(payload, ledger.report(sentinel.SENTINEL_EVERY))
    if confirmer.pending(study):  # set up for workers, not confirmed yet: every reader says so
        payload[unconfirmed.KEY] = unconfirmed.note(name, storage.redact(url))
    spent = accounting.spent(study)
    budget = accounting.load_budget(study, Budget(spec.trials, spec.time_budget_s))
    return payload, Progress(spent.running, spent.waiting, spent.measured, budget.trials)
