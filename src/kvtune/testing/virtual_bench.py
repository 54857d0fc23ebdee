"""Loop tests on virtual time: real server processes, the load measured on a virtual clock.

The tuning loop's tests start the fake server as a real process (FakeLauncher): launch,
readiness, process groups and crashes are what they test. Its latencies, though, are wall-clock
sleeps, and on a loaded machine a 200 ms TTFT measures 400 ms, a capacity of 4 becomes 2, a 2 s
request timeout hits a healthy baseline. `VirtualBench` is a load client for those tests (the
Tuner's ``bench``): it sends each request to a `MockOpenAI` with the settings of the server
launched on that port (read from its command line by `RecordingFakeLauncher`) on a fresh
`VirtualClock`, so the trial's figures are exactly the fake's. The process still has to start and
answer /health; what happens to requests (faults included) is the mock's. A fault that only a
process shows (a crash: its exit) needs the real client.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

from kvtune.bench import client as bench_client
from kvtune.bench.options import BenchOptions, BenchRun
from kvtune.knobs import Candidate
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.testing.fake_server import settings_from_argv
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.workload import Workload


@dataclass
class RecordingFakeLauncher(FakeLauncher):
    """A FakeLauncher that remembers the last command it rendered for each port."""

    commands: dict[int, list[str]] = field(default_factory=dict)

    def command(self, candidate: Candidate, port: int, host: str = "127.0.0.1") -> list[str]:
        argv = super().command(candidate, port, host)
        self.commands[port] = argv
        return argv


class VirtualBench:
    """``bench(base_url, workload, options)`` against the mock twin of the server on that port.
    One mock per launch (a new command on a port is a new server), kept across that server's
    runs (repeats, capacity levels), so its state (requests seen, a crash) carries on."""

    def __init__(self, launcher: RecordingFakeLauncher) -> None:
        self.launcher = launcher
        self.mocks: dict[int, tuple[list[str], MockOpenAI]] = {}

    def mock_for(self, base_url: str) -> MockOpenAI:
        port = urlsplit(base_url).port
        if port is None or port not in self.launcher.commands:
            raise LookupError(f"no fake server was launched for {base_url}")
        argv = self.launcher.commands[port]
        known = self.mocks.get(port)
        if known is None or known[0] is not argv:
            settings: dict[str, Any] = settings_from_argv(argv)
            settings["startup_delay_s"] = 0.0  # the process has started: readiness was real
            known = (argv, MockOpenAI(**settings))
            self.mocks[port] = known
        return known[1]

    def __call__(self, base_url: str, workload: Workload, options: BenchOptions) -> BenchRun:
        mock = self.mock_for(base_url)
        return bench_client.run(base_url, workload, replace(options, transport=mock.transport(), clock=mock.clock))
