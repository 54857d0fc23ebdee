"""The facts every trial needs (tuner/trial/context.py): `Placement.here` builds this process's
worker on a slot, with copies of what it was given, and `worker_identity` says who runs trials
(the host name is injected through KVTUNE_WORKER_HOST; nothing about this machine is asserted)."""

from __future__ import annotations

import os

from kvtune.launchers.process import process_start_ticks
from kvtune.tuner.trial.context import Placement, worker_identity


def test_worker_identity_names_the_host_the_process_its_start_and_its_slot(monkeypatch):
    monkeypatch.setenv("KVTUNE_WORKER_HOST", "worker-a")
    who = worker_identity(2, {3, 1})
    assert who == {
        "host": "worker-a",
        "pid": os.getpid(),
        "start_ticks": process_start_ticks(os.getpid()),
        "slot": 2,
        "cpus": [1, 3],  # sorted: JSON-ready and stable
    }


def test_no_cpu_set_is_recorded_as_none(monkeypatch):
    monkeypatch.setenv("KVTUNE_WORKER_HOST", "worker-a")
    assert worker_identity(0, None)["cpus"] is None and worker_identity(0, set())["cpus"] is None


def test_placement_here_is_this_process_on_its_slot_with_copies_of_what_it_was_given(monkeypatch):
    monkeypatch.setenv("KVTUNE_WORKER_HOST", "worker-b")
    device_env = {"CUDA_VISIBLE_DEVICES": "0"}
    hw = {"gpu_count": 1}
    p = Placement.here(slot=1, cpus={4}, device_env=device_env, hardware=hw, host="0.0.0.0")
    assert (p.host, p.slot, p.cpus, p.hardware) == ("0.0.0.0", 1, {4}, hw)
    assert p.device_env == device_env and p.device_env is not device_env  # the slot's own copy
    assert p.worker == worker_identity(1, {4})


def test_placement_defaults_are_a_local_unpinned_worker():
    p = Placement.here()
    assert (p.host, p.slot, p.cpus, p.device_env, p.hardware) == ("127.0.0.1", 0, None, {}, {})
    assert Placement().worker == {}  # a bare placement has no identity until `here` gives one
