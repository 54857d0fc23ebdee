"""Who listens on a port: so a server is ready only when it is *our* server that answers.

A port checked free before the launch can still be taken by another process before our server
binds it (another tool, another worker's server); then the health check gets a 200 from the
other process while ours is alive and still loading, or has failed to bind and goes on. Linux
says which socket listens on a port (/proc/net/tcp, tcp6) and which process holds that socket
(/proc/PID/fd); this module reads both, and nothing else. Any fact it cannot read (not Linux,
another user's process) means "unknown", never "someone else": only a listener positively held
by a process outside the server's process group counts as another process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
LISTEN = "0A"  # the TCP state LISTEN in /proc/net/tcp's "st" column


@dataclass(frozen=True)
class Listener:
    """A process holding a listening socket: its PID and command name."""

    pid: int
    name: str

    def describe(self) -> str:
        return f"pid {self.pid} ({self.name})"


def listening_inodes(port: int, proc: Path = PROC) -> set[int]:
    """The socket inodes listening on `port` (IPv4 and IPv6), empty if none or unreadable."""
    inodes: set[int] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            if len(cols) > 9 and cols[3] == LISTEN and cols[1].rsplit(":", 1)[-1] == f"{port:04X}":
                inodes.add(int(cols[9]))
    return inodes


def _holds(pid: int, inodes: set[int], proc: Path) -> bool:
    try:
        fds = os.listdir(proc / str(pid) / "fd")
    except OSError:
        return False
    for fd in fds:
        try:
            target = os.readlink(proc / str(pid) / "fd" / fd)
        except OSError:
            continue
        if target.startswith("socket:[") and int(target[8:-1]) in inodes:
            return True
    return False


def _pgid(pid: int, proc: Path) -> int | None:
    try:
        return int((proc / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[2])
    except (OSError, IndexError, ValueError):
        return None


def _name(pid: int, proc: Path) -> str:
    try:
        return (proc / str(pid) / "comm").read_text().strip() or "?"
    except OSError:
        return "?"


def other_listener(port: int, pgid: int, proc: Path = PROC) -> Listener | None:
    """The process outside process group `pgid` that listens on `port`, or None: nobody listens,
    a process of the group does, or the holder cannot be seen (then it is not called another)."""
    inodes = listening_inodes(port, proc)
    if not inodes:
        return None
    pids = sorted(int(p) for p in os.listdir(proc) if p.isdigit()) if proc.is_dir() else []
    holders = [pid for pid in pids if _holds(pid, inodes, proc)]
    # a holder whose group cannot be read (it exited meanwhile) is unknown, not another process
    if not holders or any(_pgid(pid, proc) in (pgid, None) for pid in holders):
        return None
    return Listener(holders[0], _name(holders[0], proc))
