"""Other processes on the trial's GPUs, through recorded NVML answers: a busy foreign process
disturbs, one that only holds memory or that this namespace cannot see does not, and a driver
without per-process samples leaves the SM share unknown."""

from __future__ import annotations

import pytest

from kvtune import nvml
from kvtune.interference import Monitor
from kvtune.testing.nvml_recorded import Recorded
from tests.unit.interference.fakeproc import Clock, FakeProc, ManualTicker

KVTUNE, SERVER, TRAINER, HIDDEN = 500, 601, 900, 99999
GIB = 2**30


def _recording(samples, processes=None) -> dict:
    procs = (
        processes
        if processes is not None
        else [
            {"pid": SERVER, "used_gpu_memory": 20 * GIB},
            {"pid": TRAINER, "used_gpu_memory": 30 * GIB},
            {"pid": HIDDEN, "used_gpu_memory": GIB},
        ]
    )
    return {
        "devices": [
            {
                "name": "H200",
                "memory": {"total": 141 * GIB, "free": 90 * GIB},
                "processes": procs,
                "process_utilisation": samples,
                "utilisation": {"gpu": 80, "memory": 40},
            }
        ]
    }


def _window(tmp_path, recording: dict, samples: int = 2):
    proc, clock, ticker = FakeProc(tmp_path / "proc"), Clock(), ManualTicker()
    proc.process(KVTUNE, "kvtune", 0)
    proc.process(SERVER, "llama-server", 0, ppid=KVTUNE)
    proc.process(TRAINER, "train.py", 0)
    mon = Monitor(
        proc_root=proc.root,
        clock=clock,
        own_pids=lambda: (KVTUNE,),
        server_pids=lambda: (SERVER,),
        gpus=[0],
        nvml=Recorded(recording),
        cpus=(0, 1),
        ticks_per_s=100,
        ticker=ticker,
    )
    mon.start()
    for _ in range(samples):
        proc.run_cpus(0)
        clock.advance(1.0)
        mon.sample()
    return mon.stop()


def _util(pid: int, t: int, sm: int) -> dict:
    return {"pid": pid, "time_stamp": t, "sm_util": sm, "mem_util": 5}


def test_a_busy_foreign_process_on_the_trials_gpu_is_disturbed(tmp_path) -> None:
    answers = {
        "successive": [
            [_util(SERVER, 10, 70), _util(TRAINER, 11, 60)],
            [_util(SERVER, 10, 70), _util(TRAINER, 11, 60), _util(TRAINER, 20, 40)],
            [_util(TRAINER, 30, 50)],
        ]
    }
    r = _window(tmp_path, _recording(answers))
    assert r.disturbed
    trainer = next(g for g in r.gpu_others if g.pid == TRAINER)
    assert trainer.name == "train.py" and trainer.used_bytes == 30 * GIB
    assert trainer.sm_pct == pytest.approx(50.0)  # 60, 40, 50: each sample once
    assert "pid 900 (train.py) on GPU 0, 30.0 GiB, 50% SM" in r.reason
    assert all(g.pid != SERVER for g in r.gpu_others)


def test_a_process_this_namespace_cannot_see_is_listed_and_never_disturbs(tmp_path) -> None:
    answers = [_util(HIDDEN, 11, 95)]
    r = _window(tmp_path, _recording(answers, [{"pid": HIDDEN, "used_gpu_memory": GIB}]))
    assert not r.disturbed
    assert [(g.pid, g.name) for g in r.gpu_others] == [(HIDDEN, None)]
    assert r.gpu_others[0].sm_pct == pytest.approx(95 / 3)  # one sample over three queries


def test_memory_alone_does_not_disturb_and_missing_samples_mean_unknown(tmp_path) -> None:
    r = _window(tmp_path, _recording(None))  # the driver answers NotSupported
    assert not r.disturbed
    trainer = next(g for g in r.gpu_others if g.pid == TRAINER)
    assert trainer.sm_pct is None and trainer.used_bytes == 30 * GIB


def test_utilisation_queries_return_only_newer_samples() -> None:
    rec = Recorded(_recording([_util(SERVER, 10, 70), _util(TRAINER, 20, 40)]))
    newer = nvml.process_utilisation(rec, None, since_us=15)
    assert [(s.pid, s.sm_pct) for s in newer] == [(TRAINER, 40)]
    assert nvml.device_utilisation(rec) == {0: 80}
    assert [p.pid for p in nvml.running_processes(rec, frozenset({0}))] == [SERVER, TRAINER, HIDDEN]
    assert nvml.running_processes(rec, frozenset({1})) == []


def test_record_keeps_the_utilisation_answers_a_driver_gives() -> None:
    rec = _recording([_util(TRAINER, 20, 40)])
    again = nvml.record(Recorded(rec))
    assert again["devices"][0]["utilisation"] == {"gpu": 80, "memory": 40}
    assert again["devices"][0]["process_utilisation"] == [_util(TRAINER, 20, 40)]
