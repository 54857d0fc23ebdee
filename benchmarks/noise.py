"""Noise: how far one config's figure moves when nothing changes (A/A), and whether the
interference monitor tells a busy measurement from a quiet one (detection).

    .venv/bin/python benchmarks/noise.py [--llama-server PATH] [--model GGUF] [--aa 8]
                                         [--measurements 20] [--seed 1] [--json out.json]

One llama-server (the demo model unless --model) is started through kvtune's launcher and
measured through kvtune's own path (`kvtune.bench.client.run` with the launcher's request body,
as a trial does) on a small workload: 4 users, 64-token prompts, 16 output tokens, 8 requests.

(a) A/A: the same config measured --aa times back to back; prints the spread of output tok/s
    (coefficient of variation, min/max ratio). The pooled estimate kvtune reports comes from
    `pooled_noise` (kvtune's own `study.measured_noise.pool` over the A/A values).
(b) Detection: --measurements M measurements, each with the interference monitor around it
    (the server's tree and this process are kvtune's). About half, drawn with --seed, get a
    hog of known size: one core of busy loop, a process outside both trees, started at a
    random moment in the first half of the measurement's expected duration and stopped when
    it ends, so it covers half the window or more. Prints the share of those flagged disturbed
    (goal >= 95%) and the share of quiet measurements wrongly flagged (goal <= 5%). A hog that
    started late (covering under half the window, a slow start) is reported apart, in neither
    share.

Run it on a quiet machine: its figures describe the machine as much as the detector.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from kvtune.bench.client import BenchOptions, run
from kvtune.interference import Interference, Monitor
from kvtune.knobs import Candidate
from kvtune.launchers.llama_server import LlamaServerLauncher, find_llama_server
from kvtune.launchers.models import demo_model_path
from kvtune.launchers.process import ServerProcess, free_port
from kvtune.study.measured_noise import pool
from kvtune.workload import Workload

WORKLOAD = Workload(
    concurrency=4, prompt_tokens=64, output_tokens=16, num_requests=8, warmup_requests=2, request_timeout_s=120
)
FLAGS = {"parallel": 4, "ctx-per-slot": 512}
HOG_COVERAGE = 0.5  # a hog covering at least this share of the window makes it "disturbed"
HOG_LIMIT_S = 300  # the hog ends itself by then, whatever happens to this process
DETECTION_GOAL, FALSE_ALARM_GOAL = 0.95, 0.05
# A hog of one core: forks, the parent prints the child's pid and exits, so the loop is nobody's
# child here (kvtune's own tree is this process and its descendants, as in a study).
HOG = (
    "import os, sys, time\n"
    "pid = os.fork()\n"
    "if pid:\n    print(pid, flush=True)\n    os._exit(0)\n"
    "os.setsid()\nnull = os.open(os.devnull, os.O_WRONLY)\nos.dup2(null, 1)\nos.dup2(null, 2)\n"
    "end = time.monotonic() + float(sys.argv[1])\n"
    "while time.monotonic() < end:\n    pass\n"
)


# ---- pure parts (tests/unit/benchmarks/test_noise.py) ---------------------------------------


def spread(values: list[float]) -> dict[str, float]:
    """The A/A figures: mean, sample standard deviation, CV (sd / mean), min/max ratio."""
    if len(values) < 2:
        raise ValueError("a spread needs two measurements or more")
    mean, sd = statistics.fmean(values), statistics.stdev(values)
    return {
        "n": len(values),
        "mean": mean,
        "sd": sd,
        "cv": sd / mean if mean else float("inf"),
        "min": min(values),
        "max": max(values),
        "min_max_ratio": min(values) / max(values) if max(values) else 0.0,
    }


def pooled_noise(values: list[float]) -> dict[str, float] | None:
    """The noise kvtune itself would report from these repeated measurements of one config
    (`study.measured_noise.pool`: the SD of ln(value), with its degrees of freedom), beside the plain
    CV of the A/A figures. None with fewer than two usable values."""
    noise = pool({0: values})
    if not noise.measured:
        return None
    return {"rel_sd": round(noise.rel_sd, 4), "dof": noise.dof, "t95_half_width": round(noise.t() * noise.rel_sd, 4)}


@dataclass(frozen=True)
class Plan:
    hog: bool
    offset_fraction: float  # when the hog starts, as a share of the expected duration


def plan(measurements: int, seed: int) -> list[Plan]:
    """Which measurements get a hog and when it starts: half of them (rounded up), in an order
    and at offsets drawn from `seed`, so a run can be repeated."""
    if measurements < 2:
        raise ValueError("detection needs two measurements or more (one with a hog, one without)")
    rng = random.Random(seed)
    hogs = [i < (measurements + 1) // 2 for i in range(measurements)]
    rng.shuffle(hogs)
    return [Plan(h, rng.uniform(0.0, HOG_COVERAGE) if h else 0.0) for h in hogs]


def coverage(window_start: float, window_end: float, hog_start: float | None) -> float:
    """Share of the window the hog ran in (it runs from `hog_start` to the window's end)."""
    if hog_start is None or window_end <= window_start or hog_start >= window_end:
        return 0.0
    return (window_end - max(hog_start, window_start)) / (window_end - window_start)


@dataclass(frozen=True)
class Outcome:
    planned_hog: bool
    coverage: float
    flagged: bool
    foreign_cores: float | None
    output_throughput: float | None
    reason: str

    @property
    def truth(self) -> str:
        """ "disturbed", "quiet", or "partial" (a hog that covered under HOG_COVERAGE)."""
        if not self.planned_hog:
            return "quiet"
        return "disturbed" if self.coverage >= HOG_COVERAGE else "partial"


def rates(outcomes: list[Outcome]) -> dict[str, float | int | None]:
    """Detection (flagged share of disturbed) and false alarms (flagged share of quiet)."""
    disturbed = [o for o in outcomes if o.truth == "disturbed"]
    quiet = [o for o in outcomes if o.truth == "quiet"]
    return {
        "disturbed": len(disturbed),
        "quiet": len(quiet),
        "partial": sum(o.truth == "partial" for o in outcomes),
        "detected": sum(o.flagged for o in disturbed),
        "false_alarms": sum(o.flagged for o in quiet),
        "detection_rate": sum(o.flagged for o in disturbed) / len(disturbed) if disturbed else None,
        "false_alarm_rate": sum(o.flagged for o in quiet) / len(quiet) if quiet else None,
    }


def verdict_lines(r: dict) -> list[str]:
    def share(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.0%}"

    det, fa = r["detection_rate"], r["false_alarm_rate"]
    return [
        f"detected: {r['detected']}/{r['disturbed']} disturbed measurements flagged = {share(det)} "
        f"(goal >= {DETECTION_GOAL:.0%}: {'met' if det is not None and det >= DETECTION_GOAL else 'NOT met'})",
        f"false alarms: {r['false_alarms']}/{r['quiet']} quiet measurements flagged = {share(fa)} "
        f"(goal <= {FALSE_ALARM_GOAL:.0%}: {'met' if fa is not None and fa <= FALSE_ALARM_GOAL else 'NOT met'})"
        + (
            f"; {r['partial']} with a late hog (under {HOG_COVERAGE:.0%} of the window) in neither"
            if r["partial"]
            else ""
        ),
    ]


# ---- the real measurements -------------------------------------------------------------------


def start_hog() -> int:
    """A one-core busy loop outside this process's tree; its pid."""
    # the loop lets go of stdout and stderr at once, so reading the pid does not wait for it
    out = subprocess.run(
        [sys.executable, "-c", HOG, str(HOG_LIMIT_S)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return int(out.split()[0])


def stop_hog(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def measure(url: str, options: BenchOptions) -> tuple[float | None, float]:
    """One measurement through the tuner's path: (output tok/s, seconds)."""
    t0 = time.monotonic()
    res = run(url, WORKLOAD, options)
    return res.metrics.get("output_throughput"), time.monotonic() - t0


def detection_round(
    url: str, options: BenchOptions, monitor: Callable[[], Monitor], p: Plan, expected_s: float
) -> Outcome:
    hog: dict[str, float | int] = {}

    def begin() -> None:
        hog["start"] = time.monotonic()
        hog["pid"] = start_hog()

    timer = threading.Timer(p.offset_fraction * expected_s, begin) if p.hog else None
    mon = monitor()
    mon.start()
    t0 = time.monotonic()
    if timer:
        timer.start()
    try:
        tput, _ = measure(url, options)
    finally:
        t1 = time.monotonic()
        seen: Interference = mon.stop()
        if timer:
            timer.cancel()
            timer.join()
        if "pid" in hog:
            stop_hog(int(hog["pid"]))
    time.sleep(1.0)  # the hog's last slice and its exit stay out of the next window
    return Outcome(p.hog, coverage(t0, t1, hog.get("start")), seen.disturbed, seen.foreign_cores, tput, seen.reason)


def start_server(binary: str, model: Path, logs: Path) -> tuple[ServerProcess, LlamaServerLauncher]:
    launcher = LlamaServerLauncher(binary=binary, model_path=str(model))
    cand = Candidate(flags=dict(FLAGS))
    port = free_port()
    proc = ServerProcess(
        argv=launcher.command(cand, port), env=launcher.environment(cand), log_path=logs / "server.log", port=port
    )
    proc.start()
    proc.wait_ready(180)
    return proc, launcher


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--llama-server", help="llama-server binary (default: found as kvtune finds it)")
    ap.add_argument("--model", type=Path, help="GGUF model (default: the demo model)")
    ap.add_argument("--aa", type=int, default=8, help="A/A measurements of the one config")
    ap.add_argument("--measurements", type=int, default=20, help="detection measurements (M)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, help="write the figures here")
    a = ap.parse_args()
    if a.aa < 2:
        ap.error("--aa needs 2 or more")
    plans = plan(a.measurements, a.seed)
    binary, model = find_llama_server(a.llama_server), a.model or demo_model_path()
    logs = Path(os.environ.get("TMPDIR", "/tmp")) / f"kvtune-noise-{os.getpid()}"
    command = " ".join([Path(sys.executable).name, *sys.argv])
    proc, launcher = start_server(binary, model, logs)
    try:
        options = BenchOptions(
            model=launcher.served_model_name(), extra_body=launcher.request_extra_body(), tokenizer=model
        )
        print(
            f"noise: llama-server {binary}, model {model.name}, flags {FLAGS}; "
            f"{WORKLOAD.concurrency} users x {WORKLOAD.num_requests} requests, "
            f"{WORKLOAD.prompt_tokens}/{WORKLOAD.output_tokens} tokens; {os.cpu_count()} CPUs"
        )
        measure(proc.base_url, options)  # warm the server once, outside both figures
        aa = [measure(proc.base_url, options) for _ in range(a.aa)]
        tputs = [t for t, _ in aa if t is not None]
        s = spread(tputs)
        print(
            f"(a) A/A, {s['n']} measurements: output {s['mean']:.2f} tok/s, sd {s['sd']:.2f}, "
            f"CV {s['cv']:.1%}, min/max {s['min_max_ratio']:.3f} ({s['min']:.2f} .. {s['max']:.2f})"
        )
        pooled = pooled_noise(tputs)
        print(
            "    pooled noise kvtune reports: "
            + ("none (fewer than two usable measurements)" if pooled is None else json.dumps(pooled))
        )
        expected = statistics.median(d for _, d in aa)
        server_root = proc.proc.pid if proc.proc is not None else -1  # the guard: the server's group

        def monitor() -> Monitor:
            return Monitor(own_pids=lambda: (os.getpid(),), server_pids=lambda: (server_root,))

        outcomes = []
        for i, p in enumerate(plans):
            o = detection_round(proc.base_url, options, monitor, p, expected)
            outcomes.append(o)
            print(
                f"    {i + 1:>3} hog={'yes' if p.hog else 'no ':<3} covered {o.coverage:>4.0%}  "
                f"foreign {o.foreign_cores or 0.0:.2f} cores  {'FLAGGED' if o.flagged else 'quiet  '}  "
                f"{o.output_throughput or 0.0:.2f} tok/s"
            )
        r = rates(outcomes)
        print(f"(b) detection over {len(outcomes)} measurements (seed {a.seed}), hog = 1 core busy loop:")
        for line in verdict_lines(r):
            print("    " + line)
        print(f"command: {command}")
    finally:
        proc.stop()
    if a.json:
        a.json.write_text(
            json.dumps(
                {
                    "command": command,
                    "aa": s,
                    "pooled": pooled,
                    "detection": r,
                    "outcomes": [asdict(o) for o in outcomes],
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
