"""llama-server: its tunable flags, how a candidate becomes argv, the pre-screen, and how the
recorded argv runs in llama.cpp's container image (the binary itself, its version, its defaults
and its start-up log: llama_binary.py).

The context gotcha of the seeds is built in: ``--ctx-size`` is shared by the ``--parallel``
slots, so kvtune tunes a per-slot context (never below the workload's prompt + output tokens)
and renders ``--ctx-size = per-slot x slots``, always passing both flags. Quantized V cache needs
flash attention, so the V cache type is only tuned when flash attention is on; the server clamps
the micro-batch to the batch, so only ubatch <= batch is sampled. The informed start
follows the seeds: a slot per user, the shortest context, every core, flash attention,
continuous batching, an unquantized KV cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping

from kvtune import hardware
from kvtune.kinds import Backend, KnobKind
from kvtune.knobs import Candidate, Knob
from kvtune.launchers.base import (
    ContainerSpec,
    Launcher,
    LaunchSpec,
    Rule,
    at_least_users,
    highest_int,
    largest,
    mount_model,
    option_index,
    overlay_suggestion,
    prefer,
    render_flag_map,
    smallest,
)
from kvtune.launchers.flag_table import FlagTable
from kvtune.launchers.llama_binary import (
    FALLBACK,
    LOG_VERBOSITY_ENV,
    TRACE_VERBOSITY,
    LlamaDefaults,
    binary_version,
    find_llama_server,
    installed_help,
    named_as,
    parse_load_facts,
)
from kvtune.launchers.llama_devices import (
    SPLIT_MODES,
    Device,
    gpu_layer_choices,
    list_devices,
    pinned,
    tensor_split_choices,
)
from kvtune.launchers.llama_memory import file_bytes, memory_fits
from kvtune.launchers.llama_reuse import reuse_knobs
from kvtune.launchers.llama_speculative import DRAFT_TYPE, SPEC_OFF, SPEC_TYPE, LlamaSpeculation
from kvtune.launchers.models import resolve_model
from kvtune.planner.gpus import CpuRam, GpuInfo, bandwidth_for, hardware_budget
from kvtune.planner.kv import ModelShape
from kvtune.planner.shape import shape_from_gguf
from kvtune.planner.suggest import suggest
from kvtune.workload import Workload

NAME = Backend.LLAMA_SERVER.value
IMAGE = "ghcr.io/ggml-org/llama.cpp:server"
IMAGE_GPU = "ghcr.io/ggml-org/llama.cpp:server-cuda"
# The share of RAM the KV pre-screen keeps back for everything but weights and cache.
RESERVE_FRACTION = 0.1
CACHE_TYPES = ("f16", "q8_0", "q4_0")
DEFAULT_BATCH = 2048  # llama-server's --batch-size when unset
# kvtune-level knob: per-slot context; rendered as --ctx-size = ctx-per-slot x parallel.
CTX_PER_SLOT = "ctx-per-slot"
# Switches whose "off" form is a separate flag rather than absence.
NEGATIONS = {"cont-batching": "--no-cont-batching", "kv-unified": "--no-kv-unified"}
# The order flags are rendered in, so argv is stable and readable; others follow sorted.
FLAG_ORDER = (
    "parallel",
    "ctx-size",
    "threads",
    "threads-batch",
    "batch-size",
    "ubatch-size",
    "flash-attn",
    "cache-type-k",
    "cache-type-v",
    "cont-batching",
    "n-gpu-layers",
    "split-mode",
    "tensor-split",
    "main-gpu",
)


def slot_context_choices(workload: Workload, limit: int | None = None) -> tuple[int, ...]:
    """Per-slot contexts worth trying: the request length rounded up to 256, x1, x2, x4, none
    past the model's context `limit` (no request is longer; the smallest is then the limit)."""
    base = int(math.ceil(workload.request_tokens / 256.0) * 256)
    choices = (base, base * 2, base * 4)
    if limit is None or limit < workload.request_tokens:
        return choices
    return tuple(v for v in choices if v <= limit) or (limit,)


def _number(v: Any) -> float | None:
    """A flag value as a number (study files may write "512"), or None."""
    try:
        return None if isinstance(v, bool) else float(v)
    except (TypeError, ValueError):
        return None


def render_flags(flags: dict[str, Any]) -> list[str]:
    """Flags dict -> argv tail, resolving ctx-per-slot into --ctx-size."""
    flags = dict(flags)
    per_slot = flags.pop(CTX_PER_SLOT, None)
    if per_slot is not None and "ctx-size" not in flags:
        flags["ctx-size"] = int(per_slot) * int(flags.get("parallel", 1))
    return render_flag_map(flags, FLAG_ORDER, NEGATIONS)


@dataclass
class LlamaServerLauncher(Launcher):
    """Launcher for llama.cpp's llama-server with one GGUF model."""

    binary: str
    model_path: str
    name: str = NAME
    health_path: str = "/health"
    extra_args: list[str] = field(default_factory=list)
    # For the KV pre-screen (None: skip it): the model's shape and the memory it may use.
    shape: ModelShape | None = None
    memory_bytes: int | None = None
    reserve_bytes: int = 0
    # The GPUs the binary can offload to (--list-devices; empty: a CPU build, no GPU flags).
    devices: tuple[Device, ...] = ()
    # The binary's own defaults (its --help): -ngl auto + --fit on offload what fits when unset.
    defaults: LlamaDefaults = FALLBACK
    # Speculative decoding (llama_speculative.py): off unless the study names a draft model or asks.
    draft_model: str | None = None
    draft_shape: ModelShape | None = None  # the draft's GGUF shape, for its KV in the pre-screen
    speculative: bool = False
    _version: str | None = None

    preferred: ClassVar[Mapping[str, Rule]] = {
        "parallel": at_least_users,
        CTX_PER_SLOT: smallest,
        "threads": highest_int,
        "flash-attn": prefer("on"),
        "cont-batching": prefer(True),
        "cache-type-k": prefer("f16"),
        "cache-type-v": prefer("f16"),
        "batch-size": prefer(2048),
        "ubatch-size": prefer(512),
        "n-gpu-layers": largest,
        "split-mode": prefer("layer"),
    }

    @property
    def speculation(self) -> LlamaSpeculation:
        """Which speculative flags this build takes (its --help)."""
        return LlamaSpeculation.of(self.defaults)

    @classmethod
    def from_spec(cls, spec: LaunchSpec) -> "LlamaServerLauncher":
        """The binary (cheap checks first: the model may be fetched), the GGUF model, and the
        shape and memory the KV pre-screen needs."""
        binary = find_llama_server(spec.llama_server)
        model = resolve_model(spec.model)
        draft = str(resolve_model(spec.draft_model, "draft_model")) if spec.draft_model else None
        memory = hardware.memory_bytes()
        return cls(
            binary=binary,
            model_path=str(model),
            shape=gguf_shape(model),
            memory_bytes=memory or None,
            reserve_bytes=int(memory * RESERVE_FRACTION),
            devices=list_devices(binary),
            defaults=installed_help(binary, named_as(spec.llama_server)),
            draft_model=draft,
            draft_shape=gguf_shape(Path(draft)) if draft else None,
            speculative=spec.speculative,
        )

    def informed_start(self, knobs: list[Knob], workload: Workload) -> dict[str, Any]:
        """With GPU devices, `kvtune plan`'s suggestion (n-gpu-layers: all, or what fits;
        parallel for the users; the KV cache type that fits) over the preferred rules; its
        --ctx-size becomes the per-slot context the study tunes."""
        guess = super().informed_start(knobs, workload)
        if not self.devices or self.shape is None:
            return guess
        gpus = [
            GpuInfo(i, d.description, d.total_bytes, d.free_bytes, bandwidth_for(d.description))
            for i, d in enumerate(self.devices)
        ]
        _, llama = suggest(
            self.shape,
            hardware_budget(gpus, CpuRam("", 0, 0)),
            workload.concurrency,
            workload.prompt_tokens + workload.output_tokens,
        )
        flags = dict(llama.flags)
        ctx, parallel = flags.pop("ctx-size", None), flags.get("parallel")
        if ctx and parallel:
            flags[CTX_PER_SLOT] = int(ctx) // int(parallel)
        return overlay_suggestion(guess, knobs, flags)

    def pin_gpus(self, indices: frozenset[int] | None) -> None:
        """Servers see only these CUDA devices (renumbered from 0, as CUDA_VISIBLE_DEVICES does)."""
        self.devices = pinned(self.devices, indices)

    def command(self, candidate: Candidate, port: int, host: str = "127.0.0.1") -> list[str]:
        return [
            self.binary,
            "--model",
            self.model_path,
            "--host",
            host,
            "--port",
            str(port),
            *render_flags(candidate.flags),
            *self.extra_args,
        ]

    @classmethod
    def flags_of(cls, spec: LaunchSpec) -> FlagTable | None:
        defaults = installed_help(find_llama_server(spec.llama_server), named_as(spec.llama_server))
        return FlagTable(NAME, defaults.source, defaults.flags) if defaults.flags else None

    def flag_table(self) -> FlagTable | None:
        """The flags this build's --help lists (None when no --help was read)."""
        if not self.defaults.flags:
            return None
        return FlagTable(NAME, self.defaults.source, self.defaults.flags)

    def server_defaults(self) -> dict[str, Any]:
        """llama-server's defaults as its --help states them, where they do not depend on the
        machine: threads, parallel and flash-attn ("auto") are decided at start-up, so not listed."""
        return self.defaults.server_defaults()

    def environment(self, candidate: Candidate) -> dict[str, str]:
        """With GPUs, llama.cpp's trace verbosity (env, so argv and the launch script stay the
        user's): only then does its log say how many layers it offloaded (`startup_facts`)."""
        env = dict(candidate.env)
        if self.devices:
            env.setdefault(LOG_VERBOSITY_ENV, TRACE_VERBOSITY)
        return env

    def startup_facts(self, log_text: str) -> dict[str, Any]:
        """What the server logged it set up: slots, per-slot context, unified KV, and on GPUs the
        layers offloaded (``gpu_layers_offloaded`` of ``gpu_layers_total``)."""
        return parse_load_facts(log_text)

    def default_knobs(self, workload: Workload, cpu_count: int) -> list[Knob]:
        speculation = self.speculation.knobs(self.draft_model, self.speculative)
        return self._cpu_knobs(workload, cpu_count) + self._gpu_knobs(workload) + speculation

    def _cpu_knobs(self, workload: Workload, cpu_count: int) -> list[Knob]:
        return [
            Knob("parallel", KnobKind.CHOICES, choices=(1, 2, 4, 8, 16)),
            Knob(CTX_PER_SLOT, KnobKind.CHOICES, choices=slot_context_choices(workload, self.model_context())),
            Knob("threads", KnobKind.INT, low=1, high=max(1, cpu_count)),
            Knob("batch-size", KnobKind.CHOICES, choices=(256, 512, 1024, 2048)),
            Knob("ubatch-size", KnobKind.CHOICES, choices=(64, 128, 256, 512)),
            Knob("flash-attn", KnobKind.CHOICES, choices=("on", "off")),
            Knob("cache-type-k", KnobKind.CHOICES, choices=CACHE_TYPES),
            Knob("cache-type-v", KnobKind.CHOICES, choices=CACHE_TYPES),
            Knob("cont-batching", KnobKind.CHOICES, choices=(True, False)),
            *reuse_knobs(workload, self.defaults.values),
        ]

    def _gpu_knobs(self, workload: Workload) -> list[Knob]:
        """With GPUs: -ngl (all layers, or partial offload when the model does not fit with the
        smallest context), and with several GPUs how to split (--split-mode, --tensor-split when
        their free memory differs, --main-gpu when the GPUs differ)."""
        if not self.devices:
            return []
        knobs = []
        if self.shape is not None:
            weights = self.weights_bytes() or self.shape.weights_bytes or 0
            layers = gpu_layer_choices(
                self.shape, weights, self.devices, min(slot_context_choices(workload, self.model_context()))
            )
            knobs.append(
                Knob("n-gpu-layers", KnobKind.CHOICES, choices=layers)
                if len(layers) > 1
                else Knob("n-gpu-layers", KnobKind.FIXED, value=layers[0])
            )
        if len(self.devices) > 1:
            knobs.append(Knob("split-mode", KnobKind.CHOICES, choices=SPLIT_MODES))
            splits = tensor_split_choices(self.devices)
            if len(splits) > 1:
                knobs.append(Knob("tensor-split", KnobKind.CHOICES, choices=splits))
            if len({(d.description, d.total_bytes) for d in self.devices}) > 1:
                knobs.append(Knob("main-gpu", KnobKind.CHOICES, choices=tuple(range(len(self.devices)))))
        return knobs

    def conditional(self, name: str, flags: dict[str, Any]) -> tuple[bool, Any]:
        """(tune it?, forced value). Quantized V cache needs flash attention: with it off, V is f16.
        --tensor-split means nothing with --split-mode none; --main-gpu only with none or row.
        The draft flags only beside drafting (llama_speculative.py)."""
        drafting = self.speculation.conditional(name, flags)
        if drafting is not None:
            return drafting
        if name == "cache-type-v" and flags.get("flash-attn") == "off":
            return False, "f16"
        if name == "tensor-split" and flags.get("split-mode") == "none":
            return False, None
        if name == "main-gpu" and flags.get("split-mode", "layer") == "layer":
            return False, None
        return True, None

    def offered_choices(self, knob: Knob, flags: dict[str, Any]) -> tuple:
        """llama-server clamps --ubatch-size to --batch-size (its default 2048 when unset), so a
        larger ubatch only repeats the config at ubatch = batch: only ubatch <= batch is offered."""
        batch = _number(flags.get("batch-size", self.defaults.int_value("batch-size", DEFAULT_BATCH)))
        if knob.name != "ubatch-size" or batch is None:
            return knob.choices
        return tuple(c for c in knob.choices if (_number(c) or 0) <= batch)

    def precheck(self, candidate: Candidate, workload: Workload) -> str | None:
        f = candidate.flags
        parallel = int(f.get("parallel", 1))
        per_slot: int | None
        if "ctx-size" in f and parallel > 0:
            per_slot = int(f["ctx-size"]) // parallel
        else:
            per_slot = f.get(CTX_PER_SLOT)
        if per_slot is not None and int(per_slot) < workload.request_tokens:
            return (
                f"per-slot context {per_slot} < request length {workload.request_tokens} ({workload.request_parts()})"
            )
        if f.get("cache-type-v", "f16") != "f16" and f.get("flash-attn") == "off":
            return "quantized V cache (--cache-type-v) requires --flash-attn on"
        if "ctx-size" in f:
            return memory_fits(self, f, int(f["ctx-size"]), parallel)
        return None if per_slot is None else memory_fits(self, f, int(per_slot) * parallel, parallel)

    def model_context(self) -> int | None:
        """The GGUF's trained context (``<arch>.context_length``)."""
        v = self.shape.max_positions if self.shape else None
        return int(v) if isinstance(v, (int, float)) and v > 0 else None

    def weights_bytes(self) -> int | None:
        """The target GGUF's size on disk (None: not here to read)."""
        return file_bytes(self.model_path)

    def numerics_changed(self, flags: Mapping[str, Any]) -> tuple[str, ...]:
        """A KV cache type other than f16 (quantised, or another float) and speculative decoding
        (drafted tokens are verified in a batch: not bit-exact) change the answers; slots,
        batch sizes, threads, contexts and offload change only speed (docs/fidelity.md)."""
        changed = [k for k in ("cache-type-k", "cache-type-v") if flags.get(k) not in (None, "f16")]
        spec_type = flags.get(SPEC_TYPE)
        if spec_type not in (None, SPEC_OFF):
            changed.append(SPEC_TYPE)
        draft = self.speculation.draft_model_flag
        if draft and flags.get(draft) is not None and spec_type in (None, DRAFT_TYPE):
            changed.append(draft)
        return tuple(changed)

    def request_extra_body(self) -> dict[str, Any]:
        # Defeat the prompt cache: every request must pay for its own prefill.
        return {"cache_prompt": False}

    def served_model_name(self) -> str:
        return Path(self.model_path).stem

    def version(self) -> str:
        if self._version is None:
            self._version = binary_version(self.binary)
        return self._version

    @classmethod
    def container_spec(cls, argv: list[str], gpus: int, version: str = "") -> ContainerSpec:
        """llama.cpp's server image (its CUDA build when the study had GPUs); the image's
        entrypoint is the server, so the args are everything after the binary."""
        index, prefix = option_index(argv, ("-m", "--model"))
        argv, model_dir = mount_model(argv, index, prefix)
        return ContainerSpec(
            image=IMAGE_GPU if gpus else IMAGE,
            args=tuple(argv[1:]),
            model_dir=model_dir,
            gpus=gpus,
            health_path=cls.health_path,
        )


def gguf_shape(model: Path) -> ModelShape | None:
    """The model's shape for the KV pre-screen, or None when it cannot be read (no pre-screen)."""
    try:
        return shape_from_gguf(model)
    except Exception:  # an unreadable shape only disables the pre-screen; the launch still works
        return None
