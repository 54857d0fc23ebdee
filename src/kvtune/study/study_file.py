"""The study file: a YAML mapping of StudySpec keys, read and type-checked at the edge.

Its values go to `study.spec.build_spec`, which lays the command-line flags over them. Kept apart
from the spec so the spec module is the typed record and this one the YAML boundary.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

from kvtune.durations import parse_duration
from kvtune.errors import SpecError, TargetError
from kvtune.objectives.targets import parse_target
from kvtune.study.space import check_type as _check_type
from kvtune.study.space import parse_space
from kvtune.study.spec import TOP_KEYS
from kvtune.study.study_yaml import parse_study_yaml, read_study_bytes
from kvtune.workload import Workload


def load_study_file(path: str | Path) -> dict[str, Any]:
    """Read and type-check a YAML study file; returns the keys it sets (`workload`: the workload
    keys it sets)."""
    p = Path(path)
    if not str(path).strip():
        raise SpecError("--study-file is empty: give a YAML study file's path, or leave the flag out")
    try:
        raw = read_study_bytes(p)
    except FileNotFoundError:
        raise SpecError(f"study file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise SpecError(f"study file {str(path)!r} is a folder: give a YAML file in it") from None
    except OSError as e:
        raise SpecError(f"cannot read study file {str(path)!r}: {e.strerror}") from e
    data = parse_study_yaml(raw, f"study file {str(path)!r}")  # bytes, size, aliases, keys given twice
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(f"study file {str(path)!r} must be a mapping of keys, not {type(data).__name__}")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise SpecError(
            f"study file {str(path)!r} has unknown key(s) {sorted(map(str, unknown))}; "
            f"allowed: {', '.join(sorted(TOP_KEYS))}"
        )
    data = {k: v for k, v in data.items() if v is not None}  # `key:` with no value = not set
    checks = {
        "study": ((str,), "a string"),
        "backend": ((str,), "a string"),
        "model": ((str,), "a string"),
        "objective": ((str, list), "a name or a list of names"),
        "trials": ((int,), "an integer"),
        "seed": ((int,), "an integer"),
        "repeats": ((int, str), "an integer or 'auto'"),
        "confirm_top": ((int,), "an integer"),
        "confirm_pairs": ((int,), "an integer"),
        "informed_start": ((bool,), "true or false"),
        "sampler": ((str,), "a sampler name"),
        "llama_server": ((str,), "a string"),
        "vllm_python": ((str,), "a string"),
        "startup_timeout_s": ((int, float), "a number of seconds"),
        "startup_stall_s": ((int, float), "a number of seconds"),
        "price_per_hour": ((int, float), "a price in USD per hour, e.g. 2.5"),
        "price_per_gpu_hour": ((int, float), "a price in USD per GPU-hour, e.g. 2.5"),
        "slo": ((str,), "per-request SLOs such as 'ttft<2s,tpot<100ms'"),
        "draft_model": ((str,), "a draft model's path (a GGUF file for llama-server)"),
        "speculative": ((bool,), "true or false"),
        "fidelity_gate": ((bool,), "true or false"),
        "fidelity_prompts": ((str,), "a file of reference prompts (one a line, or a JSON list)"),
    }
    for key, (types, what) in checks.items():
        if key in data and data[key] is not None:
            _check_type(key, data[key], types, what)
    if "targets" in data:
        t = data["targets"]
        if isinstance(t, str):
            data["targets"] = [t]
        elif not (isinstance(t, list) and all(isinstance(x, str) for x in t)):
            raise SpecError("targets must be a list of strings such as 'ttft<1s'")
        try:  # parsed once, here: the spec keeps these Targets (study/spec.py _typed_targets)
            data["targets"] = [parse_target(text) for text in data["targets"]]
        except TargetError as e:  # the file's error, said as one: where, then what
            raise SpecError(f"targets: {e}") from e
    if "time_budget" in data:  # "2h", "90m", or seconds
        data["time_budget_s"] = parse_duration(data.pop("time_budget"), what="time_budget")
    if "workload" in data:  # checked here; kept as the keys given (build_spec needs to know which)
        parse_workload(data["workload"])
        data["workload"] = dict(data["workload"])
    if "space" in data:
        if data["space"] is None:
            data["space"] = {}
        parse_space(data["space"])
    # Relative model paths are relative to the study file, so studies can travel with models.
    for key in ("model", "draft_model", "fidelity_prompts"):
        if data.get(key) and data[key] != "demo" and not Path(data[key]).is_absolute():
            data[key] = str((p.parent / data[key]).resolve())
    return data


def parse_workload(raw: Any) -> Workload:
    if not isinstance(raw, dict):
        raise SpecError("workload must be a mapping (concurrency, prompt_tokens, output_tokens, ...)")
    known = {f.name: f for f in fields(Workload)}
    unknown = set(raw) - set(known)
    if unknown:
        raise SpecError(f"workload has unknown key(s) {sorted(map(str, unknown))}; allowed: {', '.join(known)}")
    numbers = {"request_timeout_s", "burstiness", "shared_prefix_fraction", "trace_speed", "trace_length_scale"}
    numbers |= {"think_time_s", "prompt_spread", "output_spread", "think_spread"}
    optional_numbers = {"rate", "duration_s", "trace_window_s"}
    strings = {"mode", "arrival", "endpoint", "trace_time_unit"}
    for k, v in raw.items():
        where = f"workload.{k}"
        if k in numbers:
            _check_type(where, v, (int, float), "a number")
        elif k in optional_numbers:
            if v is not None:
                _check_type(where, v, (int, float), "a number")
        elif k in strings:
            _check_type(where, v, (str,), "a string")
        elif k in ("dataset", "trace"):
            if v is not None:
                _check_type(where, v, (str,), "a file path")
        elif k in ("trace_model", "trace_log_type"):
            if v is not None:
                _check_type(where, v, (str,), "a string (a value of the trace's column)")
        elif k == "multiturn":
            _check_type(where, v, (bool,), "true or false")
        elif k in ("dataset_max_tokens", "trace_requests", "trace_max_tokens", "conversation_max_tokens"):
            if v is not None:
                _check_type(where, v, (int,), "an integer")
        else:
            _check_type(where, v, (int,), "an integer")
    return Workload(**raw).validate()
