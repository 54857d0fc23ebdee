"""A fake launcher for loop tests: it starts the real fake server as a real process.

Everything but the model is real: process groups, readiness, the load client, Optuna storage.
Its knobs map to set latencies, so a test knows which config must win:

- ``speed`` (1, 2, 4): TTFT = base_ttft_ms / speed, ITL = base_itl_ms / speed.
- ``bogus`` (True/False): True adds a flag the fake server rejects (exit status 2), like a real
  server refusing an argument.
- ``fail-status``, ``startup-delay-s``, ``crash-after-requests``, ``hang-after-tokens``,
  ``truncate-at``: faults, passed to the fake server (HTTP errors, a slow start, a crash or a hang
  mid-benchmark, answers cut short).
- ``port-clash`` (1): the server exits as if another process had taken its port; with
  ``start-count-file`` (a path) and ``faulty-starts`` (N >= 1) the start-up faults (port clash,
  slow start) hit only the first N starts counted in that file: a transient fault.
- ``min-slot`` is checked by precheck(): a value below the workload's request length is rejected
  without a launch, like llama-server's per-slot context rule.
- ``answer-drift`` (a number): the fake model's answers drift from the defaults' by that much
  (a quantised cache's numerics): a config with it is probed for fidelity.
- ``parallel``: the informed start tries as many as there are users (no effect on the server).

It implements the whole launcher contract and passes the contract suite like a real backend.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from kvtune.kinds import KnobKind
from kvtune.knobs import Candidate, Knob
from kvtune.launchers.base import ContainerSpec, Launcher, LaunchSpec, Rule, at_least_users
from kvtune.workload import Workload

SERVER_MODULE = "kvtune.testing.fake_server"
IMAGE = "python:3-slim"


# Fault knobs passed straight to the fake server.
FAULT_FLAGS = (
    "fail-status",
    "startup-delay-s",
    "crash-after-requests",
    "hang-after-tokens",
    "ttft-per-active-ms",
    "port-clash",
    "start-count-file",
    "faulty-starts",
    "truncate-at",
    "answer-drift",
)


# A single `fault` knob picks one fault by name (soak tests draw it at random).
FAULTS_BY_NAME: dict[str, dict[str, Any]] = {
    "bogus": {"bogus": True},
    "http500": {"fail-status": 500},
    "crash": {"crash-after-requests": 1},
    "hang": {"hang-after-tokens": 1},
    "slow-start": {"startup-delay-s": 30},
}


@dataclass
class FakeLauncher(Launcher):
    base_ttft_ms: float = 200.0
    base_itl_ms: float = 20.0
    name: str = "fake"
    health_path: str = "/health"
    model_path: str = "fake-model"
    # Set on every server started, so a test can find (and count) its processes by environment.
    extra_env: dict[str, str] = field(default_factory=dict)
    knobs: tuple[Knob, ...] = (
        Knob("speed", KnobKind.CHOICES, choices=(1, 2, 4)),
        Knob("bogus", KnobKind.CHOICES, choices=(False, True)),
    )

    # Flags every launch carries, baseline included (like a server's fixed behaviour).
    always: dict[str, Any] = field(default_factory=dict)
    # The model's context in tokens, as a real launcher reads it from the model (None: unknown).
    context_length: int | None = None

    preferred: ClassVar[Mapping[str, Rule]] = {"parallel": at_least_users}

    @classmethod
    def from_spec(cls, spec: LaunchSpec) -> "FakeLauncher":
        return cls(model_path=spec.model or "fake-model")

    def model_context(self) -> int | None:
        return self.context_length

    def command(self, candidate: Candidate, port: int, host: str = "127.0.0.1") -> list[str]:
        f = {**self.always, **candidate.flags}
        f.update(FAULTS_BY_NAME.get(str(f.get("fault", "")), {}))
        speed = float(f.get("speed", 1))  # may be a float knob
        argv = [
            sys.executable,
            "-m",
            SERVER_MODULE,
            "--host",
            host,
            "--port",
            str(port),
            "--ttft-ms",
            f"{self.base_ttft_ms / speed:g}",
            "--itl-ms",
            f"{self.base_itl_ms / speed:g}",
        ]
        if f.get("bogus"):
            argv.append("--bogus-flag")
        for fault in FAULT_FLAGS:
            if f.get(fault):  # 0 or None: no fault
                argv += [f"--{fault}", str(f[fault])]
        return argv

    def numerics_changed(self, flags: Mapping[str, Any]) -> tuple[str, ...]:
        return ("answer-drift",) if flags.get("answer-drift") else ()

    def environment(self, candidate: Candidate) -> dict[str, str]:
        return {**self.extra_env, **candidate.env}

    def default_knobs(self, workload: Workload, cpu_count: int) -> list[Knob]:
        return list(self.knobs)

    def precheck(self, candidate: Candidate, workload: Workload) -> str | None:
        slot = candidate.flags.get("min-slot")
        if slot is not None and int(slot) < workload.request_tokens:
            return f"per-slot context {slot} < request length {workload.request_tokens}"
        return None

    def served_model_name(self) -> str:
        return self.model_path

    def version(self) -> str:
        return "fake-server 1.0"

    @classmethod
    def container_spec(cls, argv: list[str], gpus: int, version: str = "") -> ContainerSpec:
        """A Python image running the fake server module (kvtune must be installed in it)."""
        return ContainerSpec(
            image=IMAGE,
            args=tuple(argv[3:]),
            entrypoint=("python3", "-m", SERVER_MODULE),
            gpus=gpus,
            health_path=cls.health_path,
        )
