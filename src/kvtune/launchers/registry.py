"""Backend names to launchers: the one place that knows which backends exist.

`create_launcher(spec)` builds the study's launcher (each backend's `from_spec` resolves its own
model and binary), and `launcher_class(name)` gives the class alone, so an export can
containerize a recorded argv (`container_spec` is a classmethod) from the backend name in
results.json without finding a binary or a model. Adding a backend is one entry here plus one
module that passes the contract suite (kvtune.testing.contract).
"""

from __future__ import annotations

from kvtune.errors import BackendError
from kvtune.kinds import Backend
from kvtune.launchers.base import Launcher, LaunchSpec
from kvtune.launchers.flag_table import FlagTable
from kvtune.launchers.llama_server import LlamaServerLauncher
from kvtune.launchers.vllm import VllmLauncher

LAUNCHERS: dict[Backend, type[Launcher]] = {
    Backend.LLAMA_SERVER: LlamaServerLauncher,
    Backend.VLLM: VllmLauncher,
}


def launcher_class(backend: str) -> type[Launcher]:
    """The launcher class of a backend name; an unknown name is a one-line `BackendError`."""
    try:
        return LAUNCHERS[Backend(backend)]
    except ValueError:
        raise BackendError(f"unknown backend {backend!r}: use one of {', '.join(b.value for b in LAUNCHERS)}") from None


def build_flags(spec: LaunchSpec) -> FlagTable | None:
    """The flags the study's server build takes, read before its model (see `Launcher.flags_of`)."""
    return launcher_class(spec.backend).flags_of(spec)


def create_launcher(spec: LaunchSpec) -> Launcher:
    """The study's launcher. Bad input (backend, model, binary) fails here, before any launch."""
    return launcher_class(spec.backend).from_spec(spec)
