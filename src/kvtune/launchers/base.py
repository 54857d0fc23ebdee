"""The launcher contract every backend implements, and the candidate it turns into argv.

A `Candidate` is the backend-neutral result of one Optuna suggestion: the server flags (keyed by
flag name without dashes, e.g. ``parallel``) and the environment variables it sets. A backend is
one `Launcher` subclass: it lists everything the tuner, the search space, the CLI and the exports
ask of a server, with defaults where a backend has nothing to add, so callers never probe a
launcher with getattr/hasattr. `command()` is pure: the same call renders the benchmarked argv and
the deployed launch script, so what was measured is what gets deployed. `container_spec` is a
classmethod, so an export can containerize a recorded argv from the backend's name alone. The
contract suite (kvtune.testing.contract) is the checklist a new backend must pass.
"""

from __future__ import annotations

import os
import posixpath
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, Protocol

from kvtune.errors import SpecError
from kvtune.kinds import Backend, KnobKind
from kvtune.knobs import Candidate, Knob
from kvtune.launchers.compile_cache import compile_cache_env, compile_key
from kvtune.launchers.models import cache_dir
from kvtune.launchers.process import last_error_line
from kvtune.launchers.startup_log import backend_compile_cache_hit, backend_startup_split
from kvtune.workload import Workload

if TYPE_CHECKING:
    from kvtune.launchers.flag_table import FlagTable

# How a process killed by SIGILL exits: -4 seen directly, 128 + 4 through a shell or kvtune's guard.
SIGILL_STATUSES = (-4, 132)

# Inside a container the model's host directory is mounted read-only here.
MODELS_DIR = "/models"


@dataclass(frozen=True)
class ContainerSpec:
    """What a container runs for one recorded argv: compose and Kubernetes exports render it.

    ``entrypoint`` None keeps the image's own; ``args`` follow it. ``model_dir`` is the host
    directory mounted read-only at `MODELS_DIR` (None: nothing to mount, e.g. a hub model id).
    ``ipc_host`` shares the host's IPC namespace / a memory-backed /dev/shm (vLLM's workers)."""

    image: str
    args: tuple[str, ...]
    entrypoint: tuple[str, ...] | None = None
    model_dir: str | None = None
    gpus: int = 0
    ipc_host: bool = False
    health_path: str = "/health"


class LaunchSpec(Protocol):
    """What a launcher factory reads from a study (`kvtune.study.spec.StudySpec` has it all)."""

    backend: str
    model: str | None
    llama_server: str | None
    vllm_python: str | None
    draft_model: str | None  # speculative decoding's draft model (None: none)
    speculative: bool  # tune the no-draft-model speculation the backend has (n-gram)


# ---- the informed start: a backend's preferences, applied to the knobs of a study ----------------
# A rule maps (knob, workload) to the value to try first, or None for "no opinion".
Rule = Callable[["Knob", Workload], Any]


def at_least_users(knob: Knob, workload: Workload) -> Any:
    """The smallest choice that serves every user at once (slots, sequences)."""
    if knob.kind != KnobKind.CHOICES:
        return None
    fitting = sorted(c for c in knob.choices if isinstance(c, (int, float)) and c >= workload.concurrency)
    return fitting[0] if fitting else max(knob.choices)


def smallest(knob: Knob, workload: Workload) -> Any:
    """The smallest choice (contexts: the shortest that holds a request)."""
    return min(knob.choices) if knob.kind == KnobKind.CHOICES else None


def largest(knob: Knob, workload: Workload) -> Any:
    return max(knob.choices) if knob.kind == KnobKind.CHOICES else None


def highest_int(knob: Knob, workload: Workload) -> Any:
    """The top of an int range (threads: every core)."""
    return int(knob.bounds[1]) if knob.kind == KnobKind.INT else None


def when_prefixes_shared(knob: Knob, workload: Workload) -> Any:
    """On when the workload shares prompt prefixes (a system prompt, conversations, a trace: a
    prefix cache then pays), else off."""
    return workload.reuses_prefixes if knob.kind == KnobKind.CHOICES else None


def prefer(value: Any) -> Rule:
    """This value, when it is among the knob's choices."""

    def rule(knob: Knob, workload: Workload) -> Any:
        return value if knob.kind == KnobKind.CHOICES and value in knob.choices else None

    return rule


def informed_guess(knobs: list[Knob], workload: Workload, rules: Mapping[str, Rule]) -> dict[str, Any]:
    """Parameters (only for tuned knobs, only the rules' values) of the first informed guess."""
    params: dict[str, Any] = {}
    for k in knobs:
        if k.kind == KnobKind.FIXED or k.name not in rules:
            continue
        value = rules[k.name](k, workload)
        if value is not None:
            params[k.name] = value
    return params


def nearest_offered(knob: Knob, value: Any) -> Any:
    """`value` as the knob can take it: itself when offered, else for numbers the smallest
    offered value above it (the largest below when none is above); None when not comparable."""
    if knob.kind == KnobKind.CHOICES:
        if value in knob.choices:
            return value
        numbers = [c for c in knob.choices if isinstance(c, (int, float)) and not isinstance(c, bool)]
        if not numbers or not isinstance(value, (int, float)) or isinstance(value, bool):
            return None
        above = [c for c in numbers if c >= value]
        return min(above) if above else max(numbers)
    if knob.kind in (KnobKind.INT, KnobKind.FLOAT) and isinstance(value, (int, float)):
        low, high = knob.bounds
        clamped = min(max(value, low), high)
        return int(round(clamped)) if knob.kind == KnobKind.INT else float(clamped)
    return None


def overlay_suggestion(guess: dict[str, Any], knobs: list[Knob], suggested: Mapping[str, Any]) -> dict[str, Any]:
    """The informed guess with the planner's suggested flags (planner/suggest.py: sized for this
    hardware and model) over it, for the knobs the study tunes, as near as each knob offers."""
    tuned = {k.name: k for k in knobs if k.kind != KnobKind.FIXED}
    out = dict(guess)
    for name, value in suggested.items():
        k = tuned.get(name)
        v = nearest_offered(k, value) if k is not None else None
        if v is not None:
            out[name] = v
    return out


# ---- the contract ----------------------------------------------------------------------------------
class Launcher(ABC):
    """What the tuner, the search space, the CLI and the exports need from a backend.

    Attributes every launcher has: ``name`` (the backend's name), ``health_path`` (polled until
    the server is ready), ``model_path`` (the model as the study records it; the tokenizer is
    loaded from it when it is a local path). ``scrapes_metrics``: the loop scrapes the server's
    Prometheus /metrics during the benchmark. ``preferred``: the informed start's rules per knob.
    """

    name: str
    health_path: str = "/health"
    model_path: str
    scrapes_metrics: ClassVar[bool] = False
    preferred: ClassVar[Mapping[str, Rule]] = {}
    # Flags whose value other than this one (or unset) changes the model's answers.
    same_numerics: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    @abstractmethod
    def from_spec(cls, spec: LaunchSpec) -> "Launcher":
        """Resolve the model and the server binary from a study; bad input fails here, one line."""

    @abstractmethod
    def command(self, candidate: Candidate, port: int, host: str = "127.0.0.1") -> list[str]:
        """The full argv that starts the server with this candidate (pure)."""

    @abstractmethod
    def default_knobs(self, workload: Workload, cpu_count: int) -> list[Knob]:
        """The search space kvtune explores when the study file does not narrow it."""

    @abstractmethod
    def served_model_name(self) -> str:
        """The `model` field benchmark requests send."""

    @abstractmethod
    def version(self) -> str:
        """The server's version string, for the launch script header and results."""

    @classmethod
    @abstractmethod
    def container_spec(cls, argv: list[str], gpus: int, version: str = "") -> ContainerSpec:
        """How a container runs this backend's `argv` (host/port already set for deployment)
        on `gpus` GPUs; `version` is the recorded backend version (picks the image tag).
        An argv this backend cannot containerize is a `SpecError`."""

    def server_defaults(self) -> dict[str, Any]:
        """The server's own value of each flag when the argv leaves it out (``env:NAME`` for an
        environment variable), as far as it is fixed and known: a tie goes to the config that
        changes fewer of them. Only the flags listed here can match; by default none is known,
        so every flag a config gives counts as a change."""
        return {}

    def environment(self, candidate: Candidate) -> dict[str, str]:
        """Environment variables to set on top of the caller's (pure)."""
        return dict(candidate.env)

    def conditional(self, name: str, flags: dict[str, Any]) -> tuple[bool, Any]:
        """(tune knob `name`?, the value forced when not), given the flags suggested so far."""
        return True, None

    def offered_choices(self, knob: Knob, flags: dict[str, Any]) -> tuple:
        """The choices of `knob` worth sampling given the flags suggested so far: a backend
        leaves out values that cannot work, or that the server would clamp into an alias of
        another config (e.g. llama-server's ubatch above batch). Default: all of them."""
        return knob.choices

    def precheck(self, candidate: Candidate, workload: Workload) -> str | None:
        """A reason this candidate cannot work (no launch needed), or None."""
        return None

    def numerics_changed(self, flags: Mapping[str, Any]) -> tuple[str, ...]:
        """The flags of `flags` whose values may change what the model answers (a quantised KV
        cache, speculation): a config holding one is probed for fidelity against the defaults
        (objectives/fidelity.py). Default: those of `same_numerics` set to another value."""
        return tuple(k for k, same in self.same_numerics.items() if flags.get(k) not in (None, same))

    def request_extra_body(self) -> dict[str, Any]:
        """Extra JSON fields every benchmark request carries (e.g. llama-server's cache_prompt)."""
        return {}

    def classify_failure(self, returncode: int | None, log_text: str) -> str:
        """Why the server exited before it was ready, as one line read from its log (the caller
        adds the exit status). A SIGILL is named whatever the log says: the binary was built for
        instructions this CPU (or the VM around it) does not run, and no flag will fix that."""
        if returncode in SIGILL_STATUSES:
            return (
                "illegal instruction (SIGILL): this server binary uses CPU instructions this "
                "machine cannot run (e.g. AMX inside a VM); rebuild it for this CPU"
            )
        return last_error_line(log_text)

    def pin_gpus(self, indices: frozenset[int] | None) -> None:  # noqa: B027 (optional hook: default no-op)
        """Its servers will see only these GPU indices (a worker's CUDA_VISIBLE_DEVICES; None:
        all): a backend whose pre-screen reads GPU memory keeps only those. Default: nothing."""

    def gpus_used(self, candidate: Candidate) -> int | None:
        """How many of the GPUs its server sees this candidate's server uses (the first ones, as
        CUDA numbers them): what a per-GPU price bills and the energy meter reads. None: all it
        is given (the default, as llama-server splits a model over every visible GPU)."""
        return None

    def model_context(self) -> int | None:
        """The most tokens one sequence of the model may hold (its trained context: the GGUF's
        context_length, config.json's max_position_embeddings): what a trace's slot is bounded
        by (bench/trace_sizing.py). None: not known (the default)."""
        return None

    def startup_facts(self, log_text: str) -> dict[str, Any]:
        """Facts the server logged while starting (e.g. vLLM's KV cache size in tokens)."""
        return {}

    def startup_split(self, log_text: str) -> dict[str, float]:
        """Seconds of the start-up the server's log accounts for, by phase ("load", "compile",
        "graphs"; launchers/startup_log.py reads both backends' logs), only the phases it names."""
        return backend_startup_split(self.name, log_text)

    def compile_cache_hit(self, log_text: str) -> bool | None:
        """Whether the start-up loaded its compiled graphs from the compile cache instead of
        compiling them (launchers/startup_log.py); None when nothing said so either way."""
        return backend_compile_cache_hit(self.name, log_text)

    def compile_key(self, params: Mapping[str, Any]) -> str | None:
        """What a config's compiled graphs depend on (`params`: a trial's knob values, environment
        knobs as ``env:NAME``): configs with equal keys share vLLM's compile cache
        (launchers/compile_cache.py). None: the config compiles nothing (llama-server, an eager
        vLLM), so its order saves nothing."""
        if self.name != Backend.VLLM:
            return None
        env = {k[len("env:") :]: str(v) for k, v in params.items() if k.startswith("env:")}
        return compile_key({k: v for k, v in params.items() if not k.startswith("env:")}, env)

    def server_environment(self) -> dict[str, str]:
        """Environment the servers kvtune starts get that is no part of a config (not in the
        trial's env, not exported): vLLM's compile cache in one folder for the model, so every
        trial of a study reuses it (launchers/compile_cache.py)."""
        if self.name != Backend.VLLM:
            return {}
        return compile_cache_env(self.model_path, os.environ, cache_dir())

    @classmethod
    def flags_of(cls, spec: LaunchSpec) -> "FlagTable | None":
        """The flags of the build `spec` names, read without the model (the binary's --help, the
        vLLM probe): what a study file's `space:` is checked against before the model is read
        (seconds for a large GGUF). None: the build cannot say, or the backend reads none."""
        return None

    def flag_table(self) -> "FlagTable | None":
        """The flags this build takes, read from the build (launchers/flag_table.py): a study
        file's `space:` is checked against it before any server starts. None: the build could
        not say, and the server judges its flags itself (the default)."""
        return None

    def informed_start(self, knobs: list[Knob], workload: Workload) -> dict[str, Any]:
        """The configuration to measure right after the baseline: the backend's `preferred`
        rules applied to the study's tuned knobs (empty: no informed start)."""
        return informed_guess(knobs, workload, self.preferred)


# ---- helpers the backends share ---------------------------------------------------------------------
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


def option_index(argv: list[str], names: tuple[str, ...], start: int = 1) -> tuple[int, str]:
    """(index of the value of the first option in `names`, prefix before the value inside that
    word: "" for ``--model PATH``, "--model=" for ``--model=PATH``). `SpecError` when absent."""
    for i in range(start, len(argv)):
        if argv[i] in names and i + 1 < len(argv):
            return i + 1, ""
        for n in names:
            if n.startswith("--") and argv[i].startswith(n + "="):
                return i, n + "="
    raise SpecError(f"no model argument in the trial's argv ({' '.join(argv[:4])} ...)")


def mount_model(argv: list[str], index: int, prefix: str = "") -> tuple[list[str], str]:
    """argv with the model path at `index` moved under `MODELS_DIR`, and the host directory to
    mount there (read-only)."""
    out = list(argv)
    model = out[index][len(prefix) :].rstrip("/")
    out[index] = prefix + f"{MODELS_DIR}/{posixpath.basename(model)}"
    return out, posixpath.dirname(model) or "."
