"""Who confirms a shared study: the claims election (tuner/fleet/claims.py) and the paths of
`confirm_study` that measure nothing (tuner/fleet/confirmer.py), on SQLite files in the test's
folder and virtual time. The confirmation itself starts servers: tests/integration/tuner/fleet/
test_confirmer.py."""

from __future__ import annotations

import threading

import optuna
import pytest

from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.testing.virtual_time import VirtualClock
from kvtune.tuner.assemble import prepare
from kvtune.tuner.confirmation import VERDICT_ATTR
from kvtune.tuner.fleet import claims, confirmer
from kvtune.tuner.fleet.confirmer import CONFIRMED_ATTR, Ending
from kvtune.tuner.fleet.setup import set_up_study
from kvtune.tuner.trial.context import worker_identity
from tests.conftest import TINY

pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
S = optuna.trial.TrialState


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'study.db'}"


def elsewhere(pid: int = 4242) -> dict:
    """The identity of a worker on another host (only its beat tells whether it lives)."""
    return {"host": "node-b", "pid": pid, "start_ticks": 1, "slot": 3}


def test_the_first_claim_holds_and_a_later_one_sees_it_alive_once_it_beats(url):
    side = claims.side_study("s", url)
    first = claims.claim(side, elsewhere())
    second = claims.claim(side, elsewhere(4343))
    assert (first.number, second.number) == (0, 1)
    watcher = claims.Election(side, "node-a", VirtualClock(), grace_s=60)
    assert watcher.look(first.number) == (None, True)  # nothing below the first: it holds
    holder, known = watcher.look(second.number)
    assert holder is not None and holder.number == 0 and not known  # not seen beating yet
    first.beat()
    holder, known = watcher.look(second.number)
    assert holder is not None and known and "slot 3 on node-b" in holder.describe()


def test_a_remote_claim_silent_for_the_grace_period_is_failed_and_the_next_one_holds(url):
    side = claims.side_study("s", url)
    silent = claims.claim(side, elsewhere())
    mine = claims.claim(side, elsewhere(4343))
    clock = VirtualClock()
    watcher = claims.Election(side, "node-a", clock, grace_s=60)
    assert watcher.look(mine.number)[1] is False
    clock.advance(59)
    assert watcher.look(mine.number)[0] is not None  # silent, but not for the whole grace period
    clock.advance(1)
    assert watcher.look(mine.number) == (None, True)
    assert side.trials[silent.number].state is S.FAIL


def test_a_claim_that_beat_then_stopped_is_dead_a_grace_period_after_its_last_beat(url):
    side = claims.side_study("s", url)
    holder = claims.claim(side, elsewhere())
    mine = claims.claim(side, elsewhere(4343))
    clock = VirtualClock()
    watcher = claims.Election(side, "node-a", clock, grace_s=60)
    watcher.look(mine.number)
    clock.advance(50)
    holder.beat()
    assert watcher.look(mine.number)[1] is True
    clock.advance(59)
    assert watcher.look(mine.number)[1] is True  # alive: it beat 59 s ago
    clock.advance(1)
    assert watcher.look(mine.number) == (None, True)


def test_a_claim_of_a_dead_process_on_this_host_is_failed_at_once(url):
    side = claims.side_study("s", url)
    here = worker_identity(0, None)
    dead = claims.claim(side, {**here, "start_ticks": -1})  # the pid is another process now
    alive = claims.claim(side, here)
    mine = claims.claim(side, elsewhere())
    watcher = claims.Election(side, here["host"], VirtualClock(), grace_s=60)
    holder, known = watcher.look(mine.number)
    assert side.trials[dead.number].state is S.FAIL
    assert holder is not None and holder.number == alive.number and known  # this process: alive


def test_a_released_claim_holds_nothing_and_one_taken_over_is_lost_to_its_holder(url):
    side = claims.side_study("s", url)
    done = claims.claim(side, elsewhere())
    taken = claims.claim(side, elsewhere(4343))
    mine = claims.claim(side, elsewhere(4444))
    done.release(True)
    assert side.trials[done.number].state is S.COMPLETE
    side.tell(taken.number, state=S.FAIL)  # another process found it dead
    taken.beat()
    assert taken.lost
    assert claims.Election(side, "node-a", VirtualClock()).look(mine.number) == (None, True)


def test_claims_made_at_once_through_separate_storages_get_distinct_numbers(url):
    claims.side_study("s", url)  # the side study exists; each thread opens its own storage
    made: list[int] = []

    def make() -> None:
        made.append(claims.claim(claims.side_study("s", url), elsewhere()).number)

    threads = [threading.Thread(target=make) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(made) == list(range(6))  # one lowest: exactly one holder


# ---- confirm_study's paths that measure nothing -------------------------------------------------
def set_up(url: str, tmp_path, confirm_top: int = 2) -> optuna.Study:
    spec = StudySpec(study="w", trials=3, workload=TINY, confirm_top=confirm_top).validate()
    return set_up_study(prepare(spec, launcher=FakeLauncher(), runs_dir=str(tmp_path / "runs")), url)


def joined(url: str, tmp_path):
    from kvtune.tuner.fleet.workers import join

    return join(url, "w", launcher=FakeLauncher(), runs_dir=str(tmp_path / "runs"))


def test_a_set_up_study_is_pending_until_its_confirmation_is_stored(url, tmp_path):
    study = set_up(url, tmp_path)
    assert confirmer.pending(study) and not confirmer.confirmed(study)
    study.set_user_attr(VERDICT_ATTR, {"kind": "tied"})
    assert confirmer.confirmed(study) and not confirmer.pending(study)


def test_a_study_that_asks_for_no_confirmation_or_was_not_set_up_for_workers_is_not_pending(url, tmp_path):
    assert not confirmer.pending(set_up(url, tmp_path, confirm_top=0))
    local = optuna.create_study(study_name="local", storage=url)
    local.set_user_attr("spec", StudySpec(study="local").to_dict())
    assert not confirmer.pending(local)


def test_a_worker_ends_with_the_election_only_in_a_study_set_up_for_workers(url, tmp_path):
    set_up(url, tmp_path)
    assert confirmer.ends_with_confirmation(joined(url, tmp_path))


def test_a_worker_leaves_the_confirmation_to_a_live_claim_below_its_own(url, tmp_path):
    set_up(url, tmp_path)
    tuner = joined(url, tmp_path)
    side = claims.side_study("w", url)
    holder = claims.claim(side, tuner.worker)  # this very process, alive
    result = confirmer.confirm_study(tuner, url, wait=False, clock=VirtualClock(), beat_s=3600)
    assert result.ending is Ending.ELSEWHERE and result.holder is not None
    assert result.holder.number == holder.number
    mine = side.trials[-1]
    assert mine.state is S.FAIL and CONFIRMED_ATTR not in tuner.study.user_attrs  # it left its claim


def test_kvtune_confirm_waits_for_the_holder_and_ends_when_it_stored_the_verdict(url, tmp_path):
    set_up(url, tmp_path)
    tuner = joined(url, tmp_path)
    claims.claim(claims.side_study("w", url), tuner.worker)
    heard: list[str] = []

    def holder_finishes(line: str) -> None:  # while this one waits, the holder stores its verdict
        heard.append(line)
        tuner.study.set_user_attr(VERDICT_ATTR, {"kind": "tied"})

    result = confirmer.confirm_study(tuner, url, wait=True, on_wait=holder_finishes, clock=VirtualClock(), beat_s=3600)
    assert result.ending is Ending.DONE
    assert len(heard) == 1 and "confirms study w; waiting for its verdict" in heard[0]


def test_a_confirmed_study_is_not_claimed_again(url, tmp_path):
    set_up(url, tmp_path)
    tuner = joined(url, tmp_path)
    tuner.study.set_user_attr(CONFIRMED_ATTR, {"by": {}})
    assert confirmer.confirm_study(tuner, url, wait=False).ending is Ending.DONE
    names = [s.study_name for s in optuna.get_all_study_summaries(url)]
    assert claims.side_name("w") not in names


def test_still_searching_names_the_trials_in_flight_until_the_budget_is_spent(url, tmp_path):
    study = set_up(url, tmp_path)  # the baseline is queued, nothing measured
    assert confirmer.still_searching(study) == "0 trial(s) running, 1 queued, 0 of 3 configs measured"
