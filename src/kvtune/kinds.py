"""The enums of kvtune's typed core: backends, failure kinds, knob kinds, directions, progress
modes. (Workload modes and endpoints are checked words in workload/: MODES, ENDPOINTS.)

A leaf module (it imports nothing of kvtune), so every layer can use the same kinds: the
launchers classify a failed start with `FailureKind`, the tuner records it on the trial outcome,
and the artifacts group failures by it, without any of them parsing a reason string back.
Members are strings (`StrEnum`), so they serialize to YAML/JSON as the plain words users see.
"""

from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    """`enum.StrEnum` for Python 3.10: members compare and format as their values."""

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def values(cls) -> tuple[str, ...]:
        return tuple(m.value for m in cls)


class Backend(StrEnum):
    LLAMA_SERVER = "llama-server"
    VLLM = "vllm"


class FailureKind(StrEnum):
    """Why a trial is infeasible. The reason text beside it is for people; code reads the kind."""

    PRE_SCREEN = "pre-screen"  # arithmetic proved it cannot work: never launched
    START_FAILED = "start failed"  # the server exited before it was ready
    START_TIMEOUT = "start timed out"  # not ready within the start-up timeout
    PORT_BUSY = "port busy"  # something else answered on the trial's port
    CRASHED = "crashed"  # the server died during the benchmark
    REQUESTS_FAILED = "requests failed"  # the error-rate target broke
    TARGET_MISSED = "target missed"  # measured, but a latency/throughput target broke
    INTERRUPTED = "interrupted"  # Ctrl-C / SIGTERM / a dead worker: re-queued

    @property
    def label(self) -> str:
        """How summaries name the kind (the words users saw in earlier versions)."""
        return FAILURE_LABELS[self]


FAILURE_LABELS = {
    FailureKind.PRE_SCREEN: "pre-screen",
    FailureKind.START_FAILED: "server failed to start",
    FailureKind.START_TIMEOUT: "server start timed out",
    FailureKind.PORT_BUSY: "port busy",
    FailureKind.CRASHED: "server crashed during the benchmark",
    FailureKind.REQUESTS_FAILED: "requests failed",
    FailureKind.TARGET_MISSED: "target missed",
    FailureKind.INTERRUPTED: "interrupted",
}


class KnobKind(StrEnum):
    CHOICES = "choices"
    INT = "int"
    FLOAT = "float"
    FIXED = "fixed"


class Direction(StrEnum):
    MAXIMIZE = "maximize"
    MINIMIZE = "minimize"


class ProgressMode(StrEnum):
    AUTO = "auto"
    PLAIN = "plain"
    QUIET = "quiet"
    JSONL = "jsonl"
