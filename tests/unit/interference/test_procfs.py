"""What /proc says about CPU time (interference/procfs.py), parsed from recorded texts written to
the test's own folder: never this machine's /proc. The /proc/[pid]/stat lines are real lines as
Linux writes them (names with spaces and parentheses included), /proc/stat and /proc/pressure
files as a kernel with PSI writes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.interference.procfs import (
    CpuTicks,
    ProcStat,
    cpu_ticks,
    parse_pid_stat,
    pressure_total_us,
    processes,
    trees,
)

# Recorded from a Linux 6.x host (pid, name, then 50 fields; utime=14 stime=15 starttime=22).
LLAMA = (
    "4242 (llama-server) S 4200 4242 4200 0 -1 4194560 91422 0 12 0 "
    "5230 870 0 0 20 0 9 0 123456 2147483648 10240 18446744073709551615 1 1 0 0 0 0 0 4096 "
    "0 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
)
ODD_NAME = "77 (tmux: client (1)) S 1 77 77 34816 77 4194304 300 0 0 0 12 3 0 0 20 0 1 0 999 1 1 1\n"
STAT = """\
cpu  10132153 290696 3084719 46828483 16683 0 25195 0 0 0
cpu0 1393280 32966 572056 13343292 6130 0 17875 0 0 0
cpu1 1335000 32000 500000 13000000 5000 0 1000 700 0 0
cpu2 abc 1 1 1 1 1 1 1
cpu3 100 10 20 30
intr 1462898 25 0 0 0
ctxt 115315133
"""
PSI_CPU = "some avg10=1.50 avg60=0.80 avg300=0.20 total=12345678\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
PSI_MEMORY_OLD = "some avg10=0.00 avg60=0.00 avg300=0.00 total=42\n"  # kernels before 5.13: no "full" for cpu


def write(root: Path, relative: str, text: str | bytes) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)


# ---- /proc/[pid]/stat -------------------------------------------------------------------------
def test_a_pid_stat_line_gives_the_process_its_parent_group_cpu_and_start():
    assert parse_pid_stat(LLAMA) == ProcStat(
        pid=4242, name="llama-server", ppid=4200, pgid=4242, cpu_ticks=5230 + 870, start_ticks=123456
    )


def test_a_name_with_spaces_and_parentheses_is_read_to_the_last_parenthesis():
    stat = parse_pid_stat(ODD_NAME)
    assert stat is not None and stat.name == "tmux: client (1)" and stat.cpu_ticks == 15 and stat.start_ticks == 999


@pytest.mark.parametrize(
    "text", ["", "garbage", "12 (short) S 1 2", "x (name) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19"]
)
def test_what_is_not_a_stat_line_is_none(text):
    assert parse_pid_stat(text) is None


def test_processes_reads_every_pid_folder_and_skips_what_vanished_or_is_not_a_process(tmp_path):
    write(tmp_path, "4242/stat", LLAMA)
    write(tmp_path, "77/stat", ODD_NAME)
    (tmp_path / "4300").mkdir()  # exited between listing and reading: no stat file
    write(tmp_path, "4301/stat", "half-writ")
    write(tmp_path, "4302/stat", b"\xff\xfe not text")
    write(tmp_path, "self/stat", LLAMA)  # not a pid folder
    write(tmp_path, "stat", STAT)
    assert sorted(processes(tmp_path)) == [77, 4242]
    assert processes(tmp_path / "missing") == {}


# ---- /proc/stat -------------------------------------------------------------------------------
def test_cpu_ticks_sum_the_wanted_cpus_busy_steal_and_total(tmp_path):
    write(tmp_path, "stat", STAT)
    t = cpu_ticks(tmp_path, [0, 1])
    assert t == CpuTicks(
        busy=(1393280 + 32966 + 572056) + (1335000 + 32000 + 500000),
        steal=0 + 700,
        total=sum([1393280, 32966, 572056, 13343292, 6130, 0, 17875, 0])
        + sum([1335000, 32000, 500000, 13000000, 5000, 0, 1000, 700]),
    )


def test_the_aggregate_line_guest_columns_and_unparsable_cpus_are_not_counted(tmp_path):
    write(tmp_path, "stat", STAT)
    assert cpu_ticks(tmp_path, [2]) is None  # its figures are not numbers: nothing found
    short = cpu_ticks(tmp_path, [3])  # an old kernel with fewer columns: the rest are 0
    assert short == CpuTicks(busy=130, steal=0, total=160)
    assert cpu_ticks(tmp_path, [9]) is None  # not on this host
    assert cpu_ticks(tmp_path / "missing", [0]) is None


def test_cpu_ticks_subtract_to_a_window():
    assert CpuTicks(50, 5, 200) - CpuTicks(20, 1, 100) == CpuTicks(30, 4, 100)


# ---- /proc/pressure ---------------------------------------------------------------------------
def test_pressure_gives_the_some_stall_total(tmp_path):
    write(tmp_path, "pressure/cpu", PSI_CPU)
    write(tmp_path, "pressure/memory", PSI_MEMORY_OLD)
    assert pressure_total_us(tmp_path, "cpu") == 12345678
    assert pressure_total_us(tmp_path, "memory") == 42


def test_a_kernel_without_psi_or_a_malformed_file_gives_no_pressure(tmp_path):
    assert pressure_total_us(tmp_path, "cpu") is None
    write(tmp_path, "pressure/cpu", "some avg10=0.00 total=lots\n")
    assert pressure_total_us(tmp_path, "cpu") is None
    write(tmp_path, "pressure/memory", "full avg10=0.00 total=5\n")  # no "some" line
    assert pressure_total_us(tmp_path, "memory") is None


# ---- process trees ----------------------------------------------------------------------------
def stat(pid: int, ppid: int, pgid: int | None = None) -> ProcStat:
    return ProcStat(
        pid=pid, name=f"p{pid}", ppid=ppid, pgid=pgid if pgid is not None else pid, cpu_ticks=0, start_ticks=0
    )


def test_a_tree_is_its_roots_their_descendants_and_their_process_groups():
    stats = {s.pid: s for s in [stat(1, 0), stat(10, 1), stat(11, 10), stat(12, 11), stat(20, 1), stat(30, 1, pgid=10)]}
    # 30's parent exited and it was re-parented to 1, but it is still in the server's group
    assert trees(stats, [10]) == {10, 11, 12, 30}
    assert trees(stats, ["20"]) == {20}  # pids as text (a pid file) count too
    assert trees(stats, [999]) == set()  # gone
    assert trees(stats, []) == set()
