"""The two groups of facts every trial needs, typed: what is measured and where it runs.

The search loop, the confirmation and any re-measurement run trials with the same facts, so they
travel together instead of as a dozen loose constructor parameters (the study in storage, the
third group, is the loop's: see `tuner.loop.TunerContext`).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any, Callable

from kvtune.bench import client as bench_client
from kvtune.bench.fidelity_probe import ask_answers
from kvtune.launchers.base import Launcher
from kvtune.launchers.process import free_port, process_start_ticks
from kvtune.objectives.targets import Target
from kvtune.study.spec import StudySpec
from kvtune.tuner.trial.capacity import CapacityPlan
from kvtune.tuner.trial.disturbance import MonitorFactory, watch_machine
from kvtune.tuner.trial.fidelity_check import AskAnswers
from kvtune.tuner.trial.measure import Bench


@dataclass(frozen=True)
class Subject:
    """What a trial measures: the study's spec, its backend's launcher, the parsed targets, the
    load client (`kvtune.bench.client.run`, or a test's stand-in), the interference monitor of
    each launch (tuner/trial/disturbance.py; tests of the loop on fake servers watch nothing)
    and the fidelity probe's client (bench/fidelity_probe.py; a test's on the fake's transport)."""

    spec: StudySpec
    launcher: Launcher
    targets: list[Target]
    bench: Bench = bench_client.run
    monitor: MonitorFactory = watch_machine
    ask: AskAnswers = ask_answers


@dataclass(frozen=True)
class Placement:
    """Where trials run: the host servers listen on, this worker's slot, its CPU set (servers are
    pinned to it), its GPU slot's environment (set on its servers only, e.g.
    CUDA_VISIBLE_DEVICES), the host's hardware fingerprint, the worker's identity (recorded
    on each trial, so a dead worker's trial is recognised: see tuner/fleet/recovery.py), and how
    a server's port on `host` is picked: one the OS says is free (a bind to port 0), or, in a
    test whose servers are never started or are fakes behind a mocked transport, a fixed number
    that nothing binds (tests/unit opens no socket)."""

    host: str = "127.0.0.1"
    slot: int = 0
    cpus: set[int] | None = None
    device_env: dict[str, str] = field(default_factory=dict)
    hardware: dict[str, Any] = field(default_factory=dict)
    worker: dict[str, Any] = field(default_factory=dict)
    ports: Callable[[str], int] = free_port

    @classmethod
    def here(
        cls,
        slot: int = 0,
        cpus: set[int] | None = None,
        device_env: dict[str, str] | None = None,
        hardware: dict[str, Any] | None = None,
        host: str = "127.0.0.1",
        ports: Callable[[str], int] = free_port,
    ) -> "Placement":
        """This process as the worker on `slot`."""
        return cls(
            host=host,
            slot=slot,
            cpus=cpus,
            device_env=dict(device_env or {}),
            hardware=hardware or {},
            worker=worker_identity(slot, cpus),
            ports=ports,
        )


def worker_identity(slot: int, cpus: set[int] | None) -> dict[str, Any]:
    """Who runs trials here: host, pid and the process's start time (a pid reused by another
    process is not mistaken for this worker), slot and CPU set."""
    pid = os.getpid()
    return {
        "host": os.environ.get("KVTUNE_WORKER_HOST") or socket.gethostname(),
        "pid": pid,
        "start_ticks": process_start_ticks(pid),
        "slot": slot,
        "cpus": sorted(cpus) if cpus else None,
    }


@dataclass(frozen=True)
class LoadSearch:
    """What one run measures instead of the study's objective when nothing met the targets:
    the load at which they hold for the nearest config, below the load asked (tuner/load_search.py
    sets it on the runner for that run). `targets` are resolved (a relative bound already set
    from the baseline's figure)."""

    plan: CapacityPlan
    targets: list[Target]
