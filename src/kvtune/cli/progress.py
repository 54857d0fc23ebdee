"""How a run shows its progress: a live table with a bar and ETA on a terminal, plain lines
when piped, nothing with --quiet, JSON lines with --jsonl (one event per line, for scripts).

Console-layer code (like cli.py): the tuner only calls the three callbacks.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group, JustifyMethod
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from kvtune.clock import REAL_CLOCK
from kvtune.jsonsafe import dumps
from kvtune.kinds import ProgressMode
from kvtune.knobs import Candidate
from kvtune.study.capacity_text import capacity_figure
from kvtune.study.outcome import TrialOutcome
from kvtune.tuner.events import Callbacks
from kvtune.tuner.trial.screening import SCREENED


def fmt_flags(c: Candidate) -> str:
    """Flags (and env) as k=v; the baseline has none, so all a candidate sets differ from it."""
    if not c.flags and not c.env:
        return "(server defaults)"
    return " ".join([f"{k}={v}" for k, v in c.flags.items()] + [f"{k}={v}" for k, v in c.env.items()])


def fmt_ms(x: Any) -> str:
    return "-" if x is None or x != x or x == float("inf") else f"{x:.0f} ms"


def status_text(o: TrialOutcome) -> str:
    s = "[green]feasible[/green]" if o.feasible else f"[red]infeasible[/red]: {o.reason}"
    if o.duplicate_of is not None:
        s += f" [dim](same config as trial {o.duplicate_of}, not re-run)[/dim]"
    if (o.metrics or {}).get(SCREENED):
        s += " [dim](screened: its short run cannot reach the leader, so it was not measured in full)[/dim]"
    return s


def row_extra(o: TrialOutcome) -> str:
    m = o.metrics or {}
    extra = ""
    if "capacity" in m:
        extra += f"  capacity {capacity_figure(m)}"
    if m.get("repeats"):
        extra += f"  {m['repeats']:g} runs"
    if o.spread:
        extra += f"  (CV tok/s {o.spread.get('output_throughput', 0) * 100:.1f}%)"
    facts, sm = o.server_facts or {}, o.server_metrics or {}
    if o.startup_s is not None:  # on GPUs start-up is most of a trial's cost
        extra += f"  start {o.startup_s:.0f}s"
    if facts.get("kv_cache_tokens"):
        extra += f"  KV {facts['kv_cache_tokens']} tok"
        if facts.get("kv_cache_tokens_predicted"):
            extra += f" (planner {facts['kv_cache_tokens_predicted']})"
        if facts.get("max_concurrency"):
            extra += f" ({facts['max_concurrency']:g}x max-len)"
    if sm.get("available"):
        usage = sm.get("max_kv_cache_usage_perc")
        if usage is not None:
            extra += f", KV use max {usage * 100 if usage <= 1 else usage:.0f}%"
        if sm.get("num_preemptions_delta"):
            extra += f", {sm['num_preemptions_delta']:g} preemptions"
        if sm.get("max_num_requests_waiting"):
            extra += f", max waiting {sm['max_num_requests_waiting']:g}"
    return extra


class PlainReporter:
    """One line per event; what a log file or CI sees."""

    def __init__(self, console: Console, total: int):
        self.console, self.total = console, total

    def started(self, n: int, c: Candidate, baseline: bool) -> None:
        # the trial's number only: repeats of a measured config and pre-screen rejections take
        # numbers without counting against --trials, so "n of total" would read "trial 6/5"
        label = "baseline (server defaults)" if baseline else fmt_flags(c)
        self.console.print(f"[dim]trial {n}: {label}[/dim]")

    def phase(self, n: int, phase: str) -> None:
        self.console.print(f"[dim]  ... {phase}[/dim]")

    def finished(self, o: TrialOutcome) -> None:
        m = o.metrics or {}
        tput = m.get("output_throughput")
        self.console.print(
            f"  #{o.number:<3} TTFT p95 {fmt_ms(m.get('p95_ttft_ms')):>8}  "
            f"TPOT p95 {fmt_ms(m.get('p95_tpot_ms')):>7}  "
            f"out {('-' if tput is None else f'{tput:.1f}'):>7} tok/s{row_extra(o)}  {status_text(o)}"
        )

    def close(self) -> None:
        pass

    def callbacks(self) -> Callbacks:
        return Callbacks(trial_started=self.started, phase=self.phase, trial_finished=self.finished)


class LiveReporter(PlainReporter):
    """A table of finished trials, the current trial's phase, and a bar with an ETA."""

    def __init__(self, console: Console, total: int, done: int = 0):
        super().__init__(console, total)
        self.table = Table(expand=False)
        columns: list[tuple[str, JustifyMethod]] = [
            ("#", "right"),
            ("flags", "left"),
            ("TTFT p95", "right"),
            ("TPOT p95", "right"),
            ("out tok/s", "right"),
            ("result", "left"),
        ]
        for col, just in columns:
            self.table.add_column(col, justify=just, overflow="fold")
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
        )
        self.task = self.bar.add_task("trials", total=total, completed=done)
        self.current = ""
        self.live = Live(self._render(), console=console, refresh_per_second=4, transient=False)
        self.live.start()

    def _render(self) -> Group:
        return Group(self.table, self.bar, self.current)

    def started(self, n: int, c: Candidate, baseline: bool) -> None:
        self.current = f"trial {n}: {'baseline (server defaults)' if baseline else fmt_flags(c)}"
        self.live.update(self._render())

    def phase(self, n: int, phase: str) -> None:
        self.bar.update(self.task, description=phase[:40])
        self.live.update(self._render())

    def finished(self, o: TrialOutcome) -> None:
        m = o.metrics or {}
        tput = m.get("output_throughput")
        self.table.add_row(
            str(o.number),
            "baseline" if o.baseline else fmt_flags(o.candidate),
            fmt_ms(m.get("p95_ttft_ms")),
            fmt_ms(m.get("p95_tpot_ms")),
            "-" if tput is None else f"{tput:.1f}",
            status_text(o) + row_extra(o),
        )
        if o.confirmation is None and o.launched:  # pre-screen rejections and duplicates are free
            self.bar.advance(self.task)
        self.current = ""
        self.live.update(self._render())

    def close(self) -> None:
        self.live.stop()


class QuietReporter(PlainReporter):
    def started(self, n: int, c: Candidate, baseline: bool) -> None:
        pass

    def phase(self, n: int, phase: str) -> None:
        pass

    def finished(self, o: TrialOutcome) -> None:
        pass


class JsonlReporter(PlainReporter):
    """One JSON object per line on stdout: trial_started, phase, trial_finished (and the CLI's
    final summary event)."""

    def emit(self, event: str, **fields: Any) -> None:
        print(dumps({"event": event, "time": REAL_CLOCK.wall(), **fields}), flush=True)

    def started(self, n: int, c: Candidate, baseline: bool) -> None:
        self.emit("trial_started", trial=n, baseline=baseline, candidate=c.to_dict())

    def phase(self, n: int, phase: str) -> None:
        self.emit("phase", trial=n, phase=phase)

    def finished(self, o: TrialOutcome) -> None:
        self.emit("trial_finished", **o.to_dict())


def make_reporter(mode: ProgressMode | str, console: Console, total: int, done: int = 0) -> PlainReporter:
    """mode: auto (live on a terminal, plain otherwise), plain, quiet, jsonl."""
    if mode == ProgressMode.QUIET:
        return QuietReporter(console, total)
    if mode == ProgressMode.JSONL:
        return JsonlReporter(console, total)
    if mode == ProgressMode.AUTO and console.is_terminal:
        return LiveReporter(console, total, done)
    return PlainReporter(console, total)
