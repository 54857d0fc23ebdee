"""A fake /proc in a folder: processes (stat lines), CPUs (/proc/stat), PSI totals, changed by
the test between samples; and a clock and a ticker the test moves by hand."""

from __future__ import annotations

import shutil
from pathlib import Path


class FakeProc:
    def __init__(self, root: Path, cpus: int = 2):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.cpu = {i: {"user": 0, "system": 0, "idle": 0, "steal": 0} for i in range(cpus)}
        self.write_cpus()

    def process(
        self, pid: int, name: str, ticks: int, ppid: int = 1, pgid: int | None = None, start: int = 100
    ) -> None:
        d = self.root / str(pid)
        d.mkdir(exist_ok=True)
        # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        # utime stime cutime cstime priority nice threads itrealvalue starttime vsize
        utime, stime = ticks - ticks // 4, ticks // 4
        fields = [
            "S",
            ppid,
            pgid if pgid is not None else pid,
            1,
            0,
            -1,
            0,
            0,
            0,
            0,
            0,
            utime,
            stime,
            999,
            999,
            20,
            0,
            1,
            0,
            start,
            1000,
        ]
        (d / "stat").write_text(f"{pid} ({name}) " + " ".join(str(f) for f in fields) + "\n")
        (d / "comm").write_text(name + "\n")

    def exit(self, pid: int) -> None:
        shutil.rmtree(self.root / str(pid))

    def run_cpus(self, busy: int, steal: int = 0, cpus: tuple[int, ...] | None = None) -> None:
        """One second (100 ticks per CPU) passes on `cpus` (default all): `busy` user ticks in
        all, spread exactly over them, and `steal` ticks of each; the rest idle."""
        on = list(self.cpu) if cpus is None else list(cpus)
        for k, i in enumerate(on):
            mine = busy // len(on) + (1 if k < busy % len(on) else 0)
            c = self.cpu[i]
            c["user"] += mine
            c["steal"] += steal
            c["idle"] += 100 - mine - steal
        for i in self.cpu:
            if i not in on:
                self.cpu[i]["idle"] += 100
        self.write_cpus()

    def write_cpus(self) -> None:
        lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
        for i, c in self.cpu.items():
            lines.append(f"cpu{i} {c['user']} 0 {c['system']} {c['idle']} 0 5 7 {c['steal']} 0 0")
        lines.append("intr 1 2 3")
        (self.root / "stat").write_text("\n".join(lines) + "\n")

    def pressure(self, resource: str, some_total_us: int) -> None:
        (self.root / "pressure").mkdir(exist_ok=True)
        (self.root / "pressure" / resource).write_text(
            f"some avg10=1.00 avg60=0.50 avg300=0.10 total={some_total_us}\n"
            "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
        )


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class ManualTicker:
    """Ticks only when the test says so: no thread, no sleep."""

    def __init__(self) -> None:
        self.fn = None
        self.running = False

    def start(self, fn, interval_s: float) -> None:
        self.fn, self.running = fn, True

    def stop(self) -> None:
        self.running = False
