"""The launcher contract every backend implements, and the candidate it turns into argv.

A `Candidate` is the backend-neutral result of one Optuna suggestion: the server flags (keyed by
flag name without dashes, e.g. ``parallel``) and the environment variables it sets. A launcher
turns it into argv with `command()`, which is pure: the same call renders the benchmarked argv
and the deployed launch script, so what was measured is what gets deployed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kvtune.bench.workload import Workload


@dataclass(frozen=True)
class Candidate:
    """Server flags and environment for one trial. ``flags`` values: str/int/float, or bool for
    switches (True renders ``--flag``, False renders the backend's negative form or nothing)."""

    flags: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"flags": dict(self.flags), "env": dict(self.env)}


@dataclass(frozen=True)
class Knob:
    """One tunable flag: a list of choices, an int/float range, or a fixed value.

    ``kind`` is "choices", "int", "float" or "fixed". Ranges use ``low``/``high`` (inclusive),
    with ``log`` for log-uniform sampling and ``step`` for ints.
    """

    name: str
    kind: str
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    step: int | None = None
    log: bool = False
    value: Any = None

    def describe(self) -> str:
        if self.kind == "fixed":
            return f"{self.name} = {self.value!r}"
        if self.kind == "choices":
            return f"{self.name} in {list(self.choices)}"
        return f"{self.name} in [{self.low}, {self.high}]" + (" (log)" if self.log else "")


class Launcher(Protocol):
    """What the tuner needs from a backend. Implementations: llama_server.py (and fakes)."""

    name: str
    health_path: str

    def command(self, candidate: Candidate, port: int, host: str = "127.0.0.1") -> list[str]:
        """The full argv that starts the server with this candidate (pure)."""

    def environment(self, candidate: Candidate) -> dict[str, str]:
        """Environment variables to set on top of the caller's (pure)."""

    def default_knobs(self, workload: Workload, cpu_count: int) -> list[Knob]:
        """The search space kvtune explores when the study file does not narrow it."""

    def request_extra_body(self) -> dict:
        """Extra JSON fields every benchmark request carries (e.g. llama-server's cache_prompt)."""

    def served_model_name(self) -> str:
        """The `model` field benchmark requests send."""

    def version(self) -> str:
        """The server's version string, for the launch script header and results."""

    def precheck(self, candidate: Candidate, workload: Workload) -> str | None:
        """A reason this candidate cannot work (no launch needed), or None."""


def render_flag_map(flags: dict[str, Any], order: tuple[str, ...], negations: dict[str, str]) -> list[str]:
    """Flags dict -> argv tail in a stable order (`order` first, the rest sorted). A True switch
    renders ``--key``; a False one its negative form from `negations`, or nothing; None: unset."""
    ordered = [k for k in order if k in flags] + sorted(k for k in flags if k not in order)
    argv: list[str] = []
    for key in ordered:
        value = flags[key]
        if value is None:
            continue
        if isinstance(value, bool):
            if value:
                argv.append(f"--{key}")
            elif key in negations:
                argv.append(negations[key])
            continue
        argv += [f"--{key}", str(value)]
    return argv
