"""How fast this host serves the model: one short probe of the server's defaults, before a
trace study's first trial, so the trace's replay can be sized to what a trial can answer
(bench/trace_demand.py says why and how).

The probe starts the baseline's own server (the defaults: the config every study measures first),
sends a few requests one at a time (a prompt of `PROBE_PROMPT_TOKENS`, or less on a short
context, and `PROBE_OUTPUT_TOKENS` forced output tokens, one warm-up request left out) and stops
it. Seconds per prompt token come from TTFT, seconds per output token from TPOT, medians of the
measured requests. Its server log is kept in the study's folder (host-speed/server.log).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from kvtune.bench.client import BenchOptions
from kvtune.bench.client import run as run_bench
from kvtune.bench.trace_demand import HostSpeed, speed_from_probe
from kvtune.knobs import Candidate
from kvtune.launchers.base import Launcher
from kvtune.launchers.process import ServerProcess, ServerStartError, free_port
from kvtune.launchers.startup import StartupLimits
from kvtune.study.spec import StudySpec
from kvtune.tuner.trial.runner import study_tokenizer
from kvtune.workload import Workload

PROBE_PROMPT_TOKENS = 1024
PROBE_OUTPUT_TOKENS = 32
PROBE_REQUESTS = 3


class ProbeFailed(Exception):
    """The probe got no speed: the defaults did not start, or no request was answered."""


def probe_workload(w: Workload, model_context: int | None) -> Workload:
    """The probe's load: one user, a warm-up request, `PROBE_REQUESTS` measured, the study's
    endpoint, seed and request timeout; the prompt shortened to fit a short model context."""
    room = (model_context or PROBE_PROMPT_TOKENS * 2) - PROBE_OUTPUT_TOKENS - w.template_tokens
    return Workload(
        concurrency=1,
        prompt_tokens=max(16, min(PROBE_PROMPT_TOKENS, room)),
        output_tokens=PROBE_OUTPUT_TOKENS,
        num_requests=PROBE_REQUESTS,
        warmup_requests=1,
        request_timeout_s=w.request_timeout_s,
        seed=w.seed,
        endpoint=w.endpoint,
    )


def measure_host_speed(
    launcher: Launcher,
    spec: StudySpec,
    folder: Path,
    host: str = "127.0.0.1",
    cpus: set[int] | None = None,
    on_phase: Callable[[str], None] = lambda p: None,
) -> HostSpeed:
    """Start the defaults, probe them, stop them. Raises ProbeFailed with the reason."""
    port = free_port(host)
    candidate = Candidate()
    server = ServerProcess(
        argv=launcher.command(candidate, port, host),
        env={**launcher.server_environment(), **launcher.environment(candidate)},
        log_path=folder / "server.log",
        port=port,
        host=host,
        health_path=launcher.health_path,
        pid_file=folder / "server.pid",
        cpus=cpus,
    )
    workload = probe_workload(spec.workload, launcher.model_context())
    tokenizer = study_tokenizer(launcher)
    on_phase("measuring this host's speed for the trace: starting the server's defaults")
    try:
        server.start()
        server.wait_ready(StartupLimits(stall_s=spec.startup_stall_s, cap_s=spec.startup_timeout_s))
        on_phase(
            f"measuring this host's speed for the trace: {PROBE_REQUESTS} requests of {workload.prompt_tokens} tokens"
        )
        options = BenchOptions(
            model=launcher.served_model_name(), extra_body=dict(launcher.request_extra_body()), tokenizer=tokenizer
        )
        run = run_bench(server.base_url, workload, options)
    except ServerStartError as e:
        raise ProbeFailed(f"the server's defaults did not start ({e.reason})") from e
    finally:
        server.stop()
    speed = speed_from_probe([(s.prompt_tokens, s.ttft_s or 0.0, s.tpot_s) for s in run.samples if s.ok])
    if speed is None:
        errors = sorted({s.error for s in run.samples if s.error})
        raise ProbeFailed("no probe request was answered" + (f" ({errors[0]})" if errors else ""))
    return speed
