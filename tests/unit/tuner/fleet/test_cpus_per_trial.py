"""The space belongs to the study, not to the host that set it up (issue 31): `--setup-only`
stores the CPUs each trial gets, and a worker on any host builds the same space from it (the
threads knob up to that count), pins its servers to that many CPUs, and is refused, in one line,
when it has fewer. SQLite in the test's folder; the host's CPUs are injected; nothing starts."""

from __future__ import annotations

import pytest

from kvtune.errors import SpecError
from kvtune.kinds import KnobKind
from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.assemble import prepare
from kvtune.tuner.fleet.setup import read_set_up, set_up_study, stored_cpus_per_trial
from kvtune.tuner.fleet.workers import cpus_for_trials, join
from kvtune.tuner.store.storage import sqlite_url
from tests.conftest import TINY


class ThreadsLauncher(FakeLauncher):
    """A fake whose space depends on the CPUs it is offered, as llama-server's threads do."""

    def default_knobs(self, workload, cpu_count):  # type: ignore[no-untyped-def]
        return [Knob("threads", KnobKind.INT, low=1, high=cpu_count)]


def _set_up(tmp_path, cpus_per_trial):
    spec = StudySpec(study="sched", trials=4, workload=TINY, startup_timeout_s=20).validate()
    p = prepare(
        spec,
        launcher=ThreadsLauncher(model_path="/m.gguf"),
        runs_dir=str(tmp_path / "login"),
        cpus_per_trial=cpus_per_trial,
    )
    url = sqlite_url(tmp_path)
    set_up_study(p, url)
    return url


def _join(tmp_path, url, host_cpus):
    return join(
        url,
        "sched",
        launcher=ThreadsLauncher(model_path="/m.gguf"),
        runs_dir=str(tmp_path / "node"),
        host_cpus=host_cpus,
    )


def test_the_set_up_stores_the_cpus_per_trial_and_sizes_the_space_by_them(tmp_path):
    url = _set_up(tmp_path, cpus_per_trial=2)
    assert read_set_up("sched", url).cpus_per_trial == 2
    spec = StudySpec(study="sched", trials=4, workload=TINY).validate()
    p = prepare(spec, launcher=ThreadsLauncher(model_path="/m.gguf"), runs_dir=str(tmp_path / "x"), cpus_per_trial=2)
    assert p.space.knobs[0].high == 2 and p.hardware["cpus"] == 2  # the study's class, not this host's


def test_a_worker_with_more_cpus_joins_with_the_studys_space_and_pins_its_servers(tmp_path):
    url = _set_up(tmp_path, cpus_per_trial=2)
    tuner = _join(tmp_path, url, host_cpus=range(8))  # a bigger node: same space, no "different space"
    assert tuner.space.knobs[0].high == 2
    assert tuner.ctx.where.cpus == {0, 1}  # its servers get the study's 2 CPUs


def test_a_worker_with_fewer_cpus_is_refused_in_one_line_naming_the_difference(tmp_path):
    url = _set_up(tmp_path, cpus_per_trial=2)
    with pytest.raises(SpecError) as e:
        _join(tmp_path, url, host_cpus=[0])
    msg = str(e.value)
    assert "this worker has 1 CPU(s), the study's trials get 2" in msg and "--cpus-per-task 2" in msg
    assert "\n" not in msg


def test_the_cpus_a_worker_pins_to():
    assert cpus_for_trials(2, None, [4, 5, 6]) == {4, 5}
    assert cpus_for_trials(1, {3, 7}, range(8)) == {3}  # its seat's first, on a shared host
    with pytest.raises(SpecError):
        cpus_for_trials(3, {3, 7}, range(8))


@pytest.mark.parametrize(
    "placement, expected",
    [({"cpus_per_trial": 4}, 4), ({}, None), ({"cpus_per_trial": 0}, None), ({"cpus_per_trial": True}, None)],
)
def test_an_older_set_up_without_the_count_is_joined_as_before(placement, expected):
    assert stored_cpus_per_trial(placement) == expected
