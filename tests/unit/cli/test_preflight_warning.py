"""The pre-flight before the baseline: a busy machine is named on stderr and, with --jsonl, as an
event (a fake monitor: no /proc, no waiting)."""

from __future__ import annotations

from kvtune.cli.one_study import check_machine
from kvtune.interference import Consumer, Interference
from kvtune.interference.preflight import PREFLIGHT_S


class Seen:
    def __init__(self, disturbed: bool):
        self.disturbed = disturbed
        self.windows = 0

    def start(self) -> None:
        self.windows += 1

    def stop(self) -> Interference:
        top = (Consumer(4242, "pip", 180.0),) if self.disturbed else ()
        return Interference(
            seconds=PREFLIGHT_S,
            cpus=2,
            foreign_cores=1.8 if self.disturbed else 0.0,
            foreign_cores_peak=1.9,
            server_cores=0.0,
            own_cores=0.05,
            steal_share=0.0,
            cpu_pressure=None,
            memory_pressure=None,
            top=top,
            disturbed=self.disturbed,
            crossed=("foreign CPU 1.80 cores on average",) if self.disturbed else (),
        )


class Events:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def emit(self, event: str, **fields) -> None:
        self.events.append((event, fields))


def test_a_busy_machine_is_named_before_the_baseline_and_emitted_as_an_event():
    slept: list[float] = []
    reporter = Events()
    text = check_machine(Seen(True), reporter, "jsonl", sleep=slept.append)
    assert text is not None and "pid 4242 (pip) 180% CPU" in text and "already busy" in text
    assert slept == [PREFLIGHT_S]
    ((event, fields),) = reporter.events
    assert event == "preflight" and fields["disturbed"] is True and fields["warning"] == text
    assert fields["interference"]["top"][0]["name"] == "pip"


def test_a_quiet_machine_gives_no_warning_and_other_modes_emit_no_event():
    reporter = Events()
    assert check_machine(Seen(False), reporter, "plain", sleep=lambda s: None) is None
    assert reporter.events == []
