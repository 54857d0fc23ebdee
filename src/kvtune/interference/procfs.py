"""What /proc says about CPU time: every process's ticks, each CPU's ticks, pressure stall totals.

Plain readers over a `proc_root` (``/proc`` on a real host, a folder written by a test
otherwise), so the interference monitor can be tested on a constructed tree. Nothing here raises
for a missing or half-written file: a process that exits while it is read is simply absent, a
kernel without PSI gives no pressure figures. Times stay in kernel clock ticks (USER_HZ, 100 on
Linux) until the monitor divides by the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

# /proc/stat cpu columns: user nice system idle iowait irq softirq steal guest guest_nice.
# guest and guest_nice are already inside user and nice, so they are left out of the total.
_STAT_COLUMNS = 8


@dataclass(frozen=True)
class ProcStat:
    """One process as /proc/[pid]/stat tells it. `start_ticks` (since boot) tells a reused pid
    from the process that had it before; `cpu_ticks` is its own user + system time (children
    it reaped are not included: they are counted while they run, as processes of their own)."""

    pid: int
    name: str
    ppid: int
    pgid: int
    cpu_ticks: int
    start_ticks: int


def parse_pid_stat(text: str) -> ProcStat | None:
    """A /proc/[pid]/stat line, None when it is not one. The name is between the first '(' and
    the last ')' because a process may put anything, parentheses included, in its name."""
    try:
        head, rest = text.split("(", 1)
        name, tail = rest.rsplit(")", 1)
        fields = tail.split()
        # after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        # utime(11) stime(12) cutime cstime priority nice threads itrealvalue starttime(19)
        return ProcStat(
            pid=int(head),
            name=name,
            ppid=int(fields[1]),
            pgid=int(fields[2]),
            cpu_ticks=int(fields[11]) + int(fields[12]),
            start_ticks=int(fields[19]),
        )
    except (ValueError, IndexError):
        return None


def processes(proc_root: Path) -> dict[int, ProcStat]:
    """Every process visible under `proc_root`, by pid (threads are inside their process's
    figures). A process that exits between listing and reading is left out."""
    out: dict[int, ProcStat] = {}
    try:
        entries = list(proc_root.iterdir())
    except OSError:
        return out
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = parse_pid_stat((entry / "stat").read_text())
        except (OSError, UnicodeDecodeError):
            continue
        if stat is not None:
            out[stat.pid] = stat
    return out


@dataclass(frozen=True)
class CpuTicks:
    """Summed ticks of some CPUs (/proc/stat cpuN lines): `busy` is user + nice + system (the
    time processes ran; irq and softirq are left out because the load kvtune itself sends over
    loopback is handled there), `steal` the time a hypervisor gave the CPUs to someone else."""

    busy: int = 0
    steal: int = 0
    total: int = 0

    def __sub__(self, other: "CpuTicks") -> "CpuTicks":
        return CpuTicks(self.busy - other.busy, self.steal - other.steal, self.total - other.total)


def cpu_ticks(proc_root: Path, cpus: Iterable[int]) -> CpuTicks | None:
    """The ticks of CPUs `cpus` (the ones kvtune may run on), None when /proc/stat is unreadable
    or lists none of them."""
    wanted = {f"cpu{c}" for c in cpus}
    try:
        lines = (proc_root / "stat").read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    busy = steal = total = 0
    found = False
    for line in lines:
        parts = line.split()
        if not parts or parts[0] not in wanted:
            continue
        try:
            cols = [int(v) for v in parts[1 : 1 + _STAT_COLUMNS]]
        except ValueError:
            continue
        cols += [0] * (_STAT_COLUMNS - len(cols))
        busy += cols[0] + cols[1] + cols[2]
        steal += cols[7]
        total += sum(cols)
        found = True
    return CpuTicks(busy, steal, total) if found else None


def pressure_total_us(proc_root: Path, resource: str) -> int | None:
    """The `some` stall total (microseconds during which at least one task waited for
    `resource`: "cpu" or "memory") from /proc/pressure, None where the kernel has no PSI."""
    try:
        text = (proc_root / "pressure" / resource).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if line.startswith("some "):
            for item in line.split()[1:]:
                key, _, value = item.partition("=")
                if key == "total":
                    try:
                        return int(value)
                    except ValueError:
                        return None
    return None


def trees(stats: dict[int, ProcStat], roots: Iterable[int]) -> set[int]:
    """`roots`, their descendants, and every process in a process group led by a root (a server
    started in its own session keeps its group even when a middle process exits)."""
    roots = {int(r) for r in roots}
    children: dict[int, list[int]] = {}
    for s in stats.values():
        children.setdefault(s.ppid, []).append(s.pid)
    found = set()
    todo = [r for r in roots if r in stats]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.add(pid)
        todo.extend(children.get(pid, ()))
    found.update(s.pid for s in stats.values() if s.pgid in roots)
    return found
