"""Start-up liveness (launchers/startup.py through ServerProcess.wait_ready): a start fails when
its log stops growing for the stall window or at the cap, whichever comes first, and says which.

No process is started: the server is a stand-in whose log is written on the virtual clock as
the health polls go by, and /health answers from an httpx.MockTransport."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from kvtune.kinds import FailureKind
from kvtune.launchers.process import HEALTH_POLL_S, ServerProcess, ServerStartError
from kvtune.launchers.startup import StartupLimits, give_up_reason, last_log_line
from kvtune.testing.virtual_time import VirtualClock


class ScriptedProcess:
    """A live server process (never exits) whose log gets `script`'s text at its virtual times;
    each health poll (`poll`) writes what is due, so the log grows as a real one would."""

    pid = 2**22 + 7  # no such process: nothing here signals it

    def __init__(self, log: Path, clock: VirtualClock, script: list[tuple[float, str]]):
        self.log, self.clock, self.script = log, clock, sorted(script)

    def poll(self) -> int | None:
        while self.script and self.script[0][0] <= self.clock.monotonic():
            with open(self.log, "a") as f:
                f.write(self.script.pop(0)[1])
        return None


def _server(tmp_path: Path, script: list[tuple[float, str]], ready_at: float | None = None) -> ServerProcess:
    """A started server on virtual time: its log follows `script`; /health answers 200 from
    `ready_at` (None: never), 503 before."""
    clock = VirtualClock()
    log = tmp_path / "server.log"
    log.write_text("")

    def health(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200 if ready_at is not None and clock.monotonic() >= ready_at else 503)

    s = ServerProcess(
        argv=["server"],
        env={},
        log_path=log,
        port=8000,  # never bound: /health is the mock transport
        clock=clock,
        health_transport=httpx.MockTransport(health),
    )
    s.proc = ScriptedProcess(log, clock, script)  # type: ignore[assignment]
    return s


def every(step_s: float, until_s: float, text: str = "Loading safetensors checkpoint shards\n"):
    return [(t * step_s, text) for t in range(int(until_s / step_s) + 1)]


LIMITS = StartupLimits(stall_s=300, cap_s=1800)


def test_a_start_that_keeps_logging_may_take_longer_than_the_stall_window(tmp_path):
    s = _server(tmp_path, every(100, 1000), ready_at=1000)  # compiling for 1000 s, a line every 100 s
    assert s.wait_ready(LIMITS) == pytest.approx(1000, abs=HEALTH_POLL_S)


def test_a_log_that_stops_growing_fails_after_the_stall_window_naming_its_last_line(tmp_path):
    script = [(0, "INFO Starting to load model\n"), (50, "Loading safetensors checkpoint shards:  50% 1/2\n")]
    s = _server(tmp_path, script)
    with pytest.raises(ServerStartError) as e:
        s.wait_ready(LIMITS)
    # the last growth at 50 s, then 300 s of silence: given up at the first poll past 350 s
    assert s.clock.monotonic() == pytest.approx(350 + HEALTH_POLL_S, abs=1e-6)
    assert e.value.kind is FailureKind.START_TIMEOUT and e.value.transient
    assert e.value.reason == (
        'stalled: no new log output for 300 s (startup_stall_s) after "Loading safetensors '
        'checkpoint shards:  50% 1/2", 350 s after the launch'
    )


def test_the_cap_ends_a_start_that_keeps_logging(tmp_path):
    s = _server(tmp_path, every(10, 4000, "Capturing CUDA graphs\n"))
    with pytest.raises(ServerStartError) as e:
        s.wait_ready(StartupLimits(stall_s=300, cap_s=600))
    assert s.clock.monotonic() == pytest.approx(600 + HEALTH_POLL_S, abs=1e-6)
    assert e.value.kind is FailureKind.START_TIMEOUT
    assert e.value.reason.startswith("not healthy after 600 s, the start-up cap (startup_timeout_s)")
    assert e.value.reason.endswith('"Capturing CUDA graphs"')


def test_a_progress_bar_rewriting_its_line_counts_as_progress(tmp_path):
    """tqdm (weights, graph capture) redraws one line with carriage returns: no newline for
    minutes, yet the file grows, and the failure would name the bar's latest state."""
    bar = [(t, f"\rCapturing CUDA graphs: {t // 10}%") for t in range(0, 1000, 200)]
    assert _server(tmp_path, bar, ready_at=900).wait_ready(LIMITS) == pytest.approx(900, abs=HEALTH_POLL_S)
    assert last_log_line("a\n\rbar: 10%\rbar: 40%") == "bar: 40%"


def test_a_server_silent_from_the_launch_is_a_stall_after_no_output(tmp_path):
    s = _server(tmp_path, [])
    with pytest.raises(ServerStartError) as e:
        s.wait_ready(StartupLimits(stall_s=120, cap_s=1800))
    assert s.clock.monotonic() == pytest.approx(120 + HEALTH_POLL_S, abs=1e-6)
    assert 'after "(no output)"' in e.value.reason


def test_a_bare_number_is_a_cap_with_no_stall_check(tmp_path):
    s = _server(tmp_path, [(0, "loading\n")])  # silent for far longer than any stall window
    with pytest.raises(ServerStartError) as e:
        s.wait_ready(500)
    assert s.clock.monotonic() == pytest.approx(500 + HEALTH_POLL_S, abs=1e-6)
    assert e.value.reason.startswith("not healthy after 500 s")


def test_whichever_limit_comes_first_decides():
    log = lambda: "last line\n"  # noqa: E731
    assert give_up_reason(LIMITS, elapsed_s=1000, silent_s=299, read_log=log) is None
    assert give_up_reason(LIMITS, elapsed_s=1000, silent_s=301, read_log=log).startswith("stalled")
    assert give_up_reason(LIMITS, elapsed_s=1801, silent_s=10, read_log=log).startswith("not healthy after 1800 s")
    # both passed: the stall is named (the log said nothing for the whole window)
    assert give_up_reason(LIMITS, elapsed_s=1801, silent_s=400, read_log=log).startswith("stalled")
    no_stall = StartupLimits(stall_s=None, cap_s=1800)
    assert give_up_reason(no_stall, elapsed_s=1700, silent_s=1700, read_log=log) is None
