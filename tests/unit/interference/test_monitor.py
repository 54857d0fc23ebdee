"""The interference monitor on a fake /proc and a fake clock: foreign CPU (attributed to visible
processes, and the part no visible process explains), the server's and kvtune's trees kept
apart, steal, pressure, pid reuse, thresholds that scale with the CPUs."""

from __future__ import annotations

import json

import pytest

from kvtune.interference import Interference, Monitor, foreign_cores_threshold
from kvtune.interference.procfs import parse_pid_stat, processes, trees
from tests.unit.interference.fakeproc import Clock, FakeProc, ManualTicker

KVTUNE, GUARD, SERVER, SSHD, HOG = 500, 600, 601, 300, 700


class Machine:
    """A 2-CPU host: kvtune (500), its server (guard 600 -> llama-server 601, group 600), sshd."""

    def __init__(self, tmp_path, cpus: int = 2):
        self.proc = FakeProc(tmp_path / "proc", cpus)
        self.clock = Clock()
        self.ticker = ManualTicker()
        self.ticks = {KVTUNE: 1000, GUARD: 10, SERVER: 5000, SSHD: 40}
        self.server_roots: tuple[int, ...] = (GUARD,)
        self.used_cpus: tuple[int, ...] | None = None  # where kvtune's processes run (None: all)
        self._write()

    def _write(self) -> None:
        p = self.proc
        p.process(KVTUNE, "kvtune", self.ticks[KVTUNE], ppid=1)
        p.process(GUARD, "python3", self.ticks[GUARD], ppid=KVTUNE, pgid=GUARD)
        p.process(SERVER, "llama-server", self.ticks[SERVER], ppid=GUARD, pgid=GUARD)
        p.process(SSHD, "sshd", self.ticks[SSHD], ppid=1)

    def monitor(self, **kw) -> Monitor:
        kw.setdefault("cpus", tuple(self.proc.cpu))
        return Monitor(
            proc_root=self.proc.root,
            clock=self.clock,
            own_pids=lambda: (KVTUNE,),
            server_pids=lambda: self.server_roots,
            ticks_per_s=100,
            ticker=self.ticker,
            **kw,
        )

    def second(self, server: int = 150, own: int = 30, sshd: int = 2, extra_busy: int = 0, steal: int = 0) -> None:
        """One second passes: each tree uses that many ticks (100 = one core); the CPUs' busy
        ticks are what the processes used plus `extra_busy` nobody visible explains."""
        self.ticks[SERVER] += server
        self.ticks[KVTUNE] += own
        self.ticks[SSHD] += sshd
        self._write()
        self.proc.run_cpus(server + own + sshd + extra_busy, steal, self.used_cpus)
        self.clock.advance(1.0)


def test_a_quiet_window_is_not_disturbed_and_each_tree_is_counted_apart(tmp_path) -> None:
    m = Machine(tmp_path)
    mon = m.monitor()
    mon.start()
    for _ in range(4):
        m.second()
        mon.sample()
    r = mon.stop()
    assert not r.disturbed and r.reason.startswith("quiet")
    assert r.seconds == pytest.approx(4.0)
    assert r.server_cores == pytest.approx(1.5)
    assert r.own_cores == pytest.approx(0.3)
    assert r.foreign_cores == pytest.approx(0.02)
    assert [c.pid for c in r.top] == [SSHD]
    assert r.top[0].cpu_pct == pytest.approx(2.0)
    assert not m.ticker.running


def test_a_one_core_hog_is_disturbed_and_named_first(tmp_path) -> None:
    m = Machine(tmp_path)
    mon = m.monitor()
    mon.start()
    hog = 0
    for _ in range(3):
        hog += 90
        m.proc.process(HOG, "python3", hog, ppid=1, start=5000)
        m.second(server=100, extra_busy=90)  # the hog's 90 ticks, as the CPUs saw them
        mon.sample()
    r = mon.stop()
    assert r.disturbed
    assert r.foreign_cores == pytest.approx(0.92)
    assert r.top[0].pid == HOG and r.top[0].cpu_pct == pytest.approx(90.0)
    assert "foreign CPU 0.92 cores" in r.reason and "pid 700 (python3) 90% CPU" in r.reason
    stored = json.loads(json.dumps(r.to_dict()))
    assert Interference.from_dict(stored) == r


def test_cpu_no_visible_process_explains_still_counts_as_foreign(tmp_path) -> None:
    """A compiler's short jobs, or another container on the same cores: busy CPUs, no pid."""
    m = Machine(tmp_path)
    mon = m.monitor()
    mon.start()
    for _ in range(2):
        m.second(extra_busy=60)
        mon.sample()
    r = mon.stop()
    assert r.disturbed
    assert r.foreign_cores == pytest.approx(0.62)
    assert [c.pid for c in r.top] == [SSHD]


def test_peak_is_the_busiest_interval_and_the_average_spreads_it_over_the_window(tmp_path) -> None:
    m = Machine(tmp_path)
    mon = m.monitor()
    mon.start()
    m.second(sshd=0, extra_busy=80)
    mon.sample()
    m.second(sshd=0)
    mon.sample()
    r = mon.stop()
    assert r.foreign_cores_peak == pytest.approx(0.8)
    assert r.foreign_cores == pytest.approx(0.4)


def test_a_server_started_after_the_window_opened_is_the_servers(tmp_path) -> None:
    m = Machine(tmp_path)
    m.server_roots = ()
    m.proc.exit(SERVER)
    m.proc.exit(GUARD)
    mon = m.monitor()
    mon.start()
    m.server_roots = (GUARD,)
    m.ticks[GUARD], m.ticks[SERVER] = 0, 0
    m.second(server=150)  # the server's whole life so far is inside the window
    mon.sample()
    r = mon.stop()
    assert r.server_cores == pytest.approx(1.5)
    assert not r.disturbed


def test_a_reused_pid_is_a_new_process_not_a_negative_delta(tmp_path) -> None:
    m = Machine(tmp_path)
    m.proc.process(HOG, "make", 10_000, ppid=1, start=200)
    mon = m.monitor()
    mon.start()
    m.proc.exit(HOG)
    m.proc.process(HOG, "cc1", 40, ppid=1, start=9000)  # same pid, later start, 40 ticks so far
    m.second(extra_busy=40)
    mon.sample()
    r = mon.stop()
    assert r.top[0].pid == HOG and r.top[0].name == "cc1"
    assert r.top[0].cpu_pct == pytest.approx(40.0)


def test_steal_beyond_five_percent_is_disturbed(tmp_path) -> None:
    m = Machine(tmp_path)
    mon = m.monitor()
    mon.start()
    m.second(steal=8)
    mon.sample()
    r = mon.stop()
    assert r.steal_share == pytest.approx(0.08)
    assert r.disturbed and "steal 8.0%" in r.reason


def test_memory_pressure_is_a_criterion_cpu_pressure_is_only_recorded(tmp_path) -> None:
    m = Machine(tmp_path)
    m.proc.pressure("cpu", 1_000_000)
    m.proc.pressure("memory", 0)
    mon = m.monitor()
    mon.start()
    m.second()
    m.second()
    m.proc.pressure("cpu", 2_000_000)  # 1 s of 2 s: half the window contended
    mon.sample()
    r = mon.stop()
    assert r.cpu_pressure == pytest.approx(0.5)
    assert r.memory_pressure == pytest.approx(0.0)
    assert not r.disturbed

    mon.start()
    m.second()
    m.proc.pressure("memory", 150_000)  # 15% of a second stalled on memory
    r = mon.stop()
    assert r.disturbed and "memory pressure 15.0%" in r.reason


def test_without_psi_the_pressures_are_unknown_not_zero(tmp_path) -> None:
    m = Machine(tmp_path)
    mon = m.monitor()
    mon.start()
    m.second()
    r = mon.stop()
    assert r.cpu_pressure is None and r.memory_pressure is None


def test_without_proc_stat_foreign_is_what_the_visible_processes_used(tmp_path) -> None:
    m = Machine(tmp_path)
    mon = m.monitor()
    (m.proc.root / "stat").unlink()
    mon.start()
    m.proc.process(HOG, "python3", 50, ppid=1, start=5000)
    m.ticks[SERVER] += 100
    m.ticks[SSHD] += 2
    m._write()
    m.clock.advance(1.0)
    r = mon.stop()
    assert r.foreign_cores == pytest.approx(0.52)
    assert r.steal_share is None
    assert r.disturbed


def test_only_the_cpus_kvtune_may_run_on_are_counted(tmp_path) -> None:
    m = Machine(tmp_path, cpus=4)
    m.used_cpus = (0, 1)
    mon = m.monitor(cpus=(0, 1))
    mon.start()
    m.second()
    m.proc.cpu[3]["user"] += 100  # a neighbour's whole core, outside our cpuset
    m.proc.write_cpus()
    mon.sample()
    r = mon.stop()
    assert r.cpus == 2
    assert r.foreign_cores == pytest.approx(0.02)
    assert not r.disturbed


@pytest.mark.parametrize("cpus, bar", [(1, 0.25), (2, 0.25), (4, 0.25), (8, 0.4), (64, 3.2)])
def test_the_foreign_cpu_threshold_follows_the_cpu_count(cpus: int, bar: float) -> None:
    assert foreign_cores_threshold(cpus) == pytest.approx(bar)


def test_half_a_foreign_core_disturbs_a_small_machine_not_a_large_one(tmp_path) -> None:
    results = {}
    for cpus in (2, 64):
        m = Machine(tmp_path / str(cpus), cpus=cpus)
        mon = m.monitor()
        mon.start()
        m.proc.process(HOG, "python3", 50, ppid=1, start=5000)
        m.second(sshd=0, extra_busy=50)
        mon.sample()
        results[cpus] = mon.stop().disturbed
    assert results == {2: True, 64: False}


def test_a_name_with_parentheses_and_spaces_parses() -> None:
    s = parse_pid_stat("42 (my (odd) name) R 7 42 1 0 -1 0 0 0 0 0 30 12 0 0 20 0 1 0 777 0\n")
    assert s is not None and (s.name, s.ppid, s.pgid, s.cpu_ticks, s.start_ticks) == ("my (odd) name", 7, 42, 42, 777)
    assert parse_pid_stat("garbage") is None


def test_a_tree_holds_descendants_and_the_roots_process_group(tmp_path) -> None:
    p = FakeProc(tmp_path / "proc")
    p.process(10, "guard", 0, ppid=1, pgid=10)
    p.process(11, "server", 0, ppid=10, pgid=10)
    p.process(12, "worker", 0, ppid=11, pgid=10)
    p.process(13, "orphan", 0, ppid=1, pgid=10)  # its parent exited; the group remains
    p.process(14, "other", 0, ppid=1, pgid=14)
    assert trees(processes(p.root), [10]) == {10, 11, 12, 13}
    assert trees(processes(p.root), [99]) == set()
