"""The errors a user can act on.

Every expected failure (bad input, a missing binary, a model file that is not there) is a
`KvtuneError` subclass whose message alone tells the user what to fix. The CLI prints it as one
line and exits with status 2. Foreign errors (httpx, subprocess, yaml) are wrapped once at the
boundary with `raise ... from e`; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class KvtuneError(Exception):
    """Base class: an expected failure with a one-line, actionable message."""

    exit_code = 2


class TargetError(KvtuneError):
    """A latency/throughput target such as ``ttft<1s`` could not be parsed or is contradictory."""


class SpecError(KvtuneError):
    """A study file or a combination of flags is invalid."""


class ModelError(KvtuneError):
    """The model file is missing, unreadable, or could not be fetched."""


class ServerNotFoundError(KvtuneError):
    """No server binary (llama-server, vLLM) could be found."""


class BackendError(KvtuneError):
    """An unknown backend name, or a backend that cannot run here."""


class TransientError(KvtuneError):
    """A failure that may pass on its own (a storage that is down or restarting, a network
    hiccup): exit status 75 (EX_TEMPFAIL), so a scheduler retries the job instead of failing it.
    Kubernetes' podFailurePolicy and Slurm's requeue read this status."""

    exit_code = 75


class StorageUnreachableError(TransientError):
    """The study's storage (PostgreSQL, the gRPC proxy) did not answer: named as unreachable,
    never as a missing study."""


#: Exit statuses, as the README documents them.
EXIT_DONE = 0
EXIT_NOTHING_FEASIBLE = 1
EXIT_BAD_INPUT = 2
EXIT_TRANSIENT = TransientError.exit_code
