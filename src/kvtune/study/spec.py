"""StudySpec: everything a study needs, from a YAML study file and/or command-line flags.

A study file is validated strictly (unknown keys, wrong types, empty search spaces and ranges
with min > max are one-line `SpecError`s) because a typo in an unattended hours-long run must
fail before anything launches, not after.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from kvtune.workload import Workload
from kvtune.errors import SpecError
from kvtune.objectives.targets import parse_targets
from kvtune.launchers.base import Knob
from kvtune.objectives.cost import Price, price_of
from kvtune.objectives.objective import OBJECTIVES, Objective, objective
from kvtune.durations import parse_duration
from kvtune.study.sampler_choice import parse_sampler

BACKENDS = ("llama-server", "vllm")
TOP_KEYS = {"study", "backend", "model", "targets", "objective", "trials", "seed", "workload",
            "space", "llama_server", "startup_timeout_s", "repeats", "confirm_top", "vllm_python",
            "informed_start", "time_budget", "sampler", "price_per_hour", "price_per_gpu_hour"}


def objective_names(raw: str | list[str]) -> list[str]:
    """The objective field as YAML/JSON hold it (one name or a list) -> a list of names."""
    return list(raw) if isinstance(raw, (list, tuple)) else [raw]


def parse_objectives(raw: str | list[str]) -> tuple[Objective, ...]:
    """The typed objectives of an objective field (names already validated)."""
    return tuple(objective(n) for n in objective_names(raw))


# `repeats: auto`: measure again on the same server until the objective's 95% confidence
# half-width is within AUTO_REL_HALF_WIDTH of its mean, or AUTO_MAX_REPEATS runs (AIPerf-style).
AUTO = "auto"
AUTO_REL_HALF_WIDTH = 0.03
AUTO_MAX_REPEATS = 5


@dataclass
class StudySpec:
    study: str | None = None
    backend: str = "llama-server"
    model: str | None = None  # None: the demo model
    targets: list[str] = field(default_factory=list)
    # One objective, or several (a list) for a multi-objective study of the trade-off. The
    # YAML/JSON form; code reads the typed `objective_specs`.
    objective: str | list[str] = "output_throughput"
    trials: int = 12
    seed: int = 0
    workload: Workload = field(default_factory=Workload)
    space: dict[str, Any] = field(default_factory=dict)
    llama_server: str | None = None
    # The Python whose vLLM serves (default: this one; KVTUNE_VLLM_PYTHON overrides).
    vllm_python: str | None = None
    startup_timeout_s: float = 180.0
    # Measurements per trial on the same running server (their spread is reported).
    repeats: int | str = 1  # or "auto": repeat until the objective's 95% CI is within 3%
    # Re-measure this many top configs (and the baseline) at the end before naming the best.
    confirm_top: int = 2
    # Measure the seeds' advice (slots = users, all cores, flash attention...) right after the
    # baseline, before the sampler explores.
    informed_start: bool = True
    # Stop asking new trials after this much wall time (--time-budget; None: no limit).
    time_budget_s: float | None = None
    # Stop a measurement once a target can no longer hold (--no-early-stop turns it off).
    early_stop: bool = True
    # The search: auto (the default, TPE), tpe, gp, random, grid or qmc (tuner/samplers.py).
    sampler: str = "auto"
    # USD per hour for the whole machine, or per GPU a trial uses (at most one): every trial
    # then carries its cost per 1M tokens (objectives/cost.py).
    price_per_hour: float | None = None
    price_per_gpu_hour: float | None = None

    @property
    def price(self) -> Price | None:
        return price_of(self.price_per_hour, self.price_per_gpu_hour)

    @property
    def repeat_plan(self) -> tuple[int, bool]:
        """(most runs per measurement, whether to stop once the objective converged)."""
        return (AUTO_MAX_REPEATS, True) if self.repeats == AUTO else (int(self.repeats), False)

    @property
    def objective_specs(self) -> tuple[Objective, ...]:
        """What the study optimizes: (name, metrics key, direction) per objective, in order."""
        return parse_objectives(self.objective)

    @property
    def primary(self) -> Objective:
        """The first objective: the one confirmation and the launch script rank by."""
        return self.objective_specs[0]

    def validate(self) -> "StudySpec":
        if self.backend not in BACKENDS:
            raise SpecError(f"unknown backend {self.backend!r}: use one of {', '.join(BACKENDS)}")
        names = objective_names(self.objective)
        price = self.price  # a bad price (or two) is a SpecError here
        if not names:
            raise SpecError("objective is empty: name at least one, e.g. output_throughput")
        for o in names:
            if not isinstance(o, str) or o not in OBJECTIVES:
                raise SpecError(f"unknown objective {o!r}: use output_throughput, "
                                f"request_throughput, capacity, cost_per_mtok or a latency such as ttft_p95")
        if len(set(names)) != len(names):
            raise SpecError(f"objective lists {names} twice: name each once")
        if "capacity" in names and not self.targets:
            raise SpecError("the capacity objective needs a target to hold, e.g. --target 'ttft_p95<1s'")
        if "capacity" in names and any(t.relative for t in parse_targets(self.targets)):
            raise SpecError("the capacity objective needs absolute targets (e.g. 'ttft_p95<1s'), not "
                            "ones relative to the baseline")
        if "cost_per_mtok" in names and price is None:
            raise SpecError("the cost_per_mtok objective needs a price: --price-per-hour USD (the "
                            "whole machine) or --price-per-gpu-hour USD (per GPU a trial uses)")
        if self.repeats != AUTO and (isinstance(self.repeats, bool) or not isinstance(self.repeats, int)
                                     or self.repeats < 1):
            raise SpecError(f"repeats must be a whole number of at least 1 or 'auto', got {self.repeats!r}")
        if self.confirm_top < 0:
            raise SpecError(f"confirm_top must be 0 or more, got {self.confirm_top}")
        if self.trials < 1:
            raise SpecError(f"trials must be at least 1 (the baseline is trial 0), got {self.trials}")
        if not (self.startup_timeout_s > 0 and math.isfinite(self.startup_timeout_s)):
            raise SpecError(f"startup_timeout_s must be a positive number, got {self.startup_timeout_s}")
        if not 0 <= self.seed < 2**32:
            raise SpecError(f"seed must be between 0 and 2**32-1, got {self.seed}")
        if self.time_budget_s is not None:
            parse_duration(self.time_budget_s)
        parse_sampler(self.sampler)
        self.workload.validate()
        parse_space(self.space)
        return self

    def fingerprint(self) -> str:
        """A short hash of what defines the study's results (not the trial budget)."""
        key = {"backend": self.backend, "model": self.model, "targets": sorted(self.targets),
               "objective": self.objective, "workload": asdict(self.workload), "space": self.space}
        if self.price is not None:  # costs are stored per trial: another price, another study
            key["price"] = [self.price.usd, self.price.per_gpu]
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:8]

    def to_dict(self) -> dict:
        d = asdict(self)
        d["workload"] = asdict(self.workload)
        return d


def _check_type(where: str, value: Any, types: tuple, what: str) -> None:
    if isinstance(value, bool) and bool not in types:
        raise SpecError(f"{where} must be {what}, got {value!r}")
    if not isinstance(value, types):
        raise SpecError(f"{where} must be {what}, got {value!r}")


def parse_knob(name: str, raw: Any) -> Knob | None:
    """One `space:` entry -> Knob. list = choices, {low, high} = range, scalar = fixed,
    null = not tuned (the server's default)."""
    where = f"space.{name}"
    if raw is None:
        return None
    if isinstance(raw, list):
        if not raw:
            raise SpecError(f"{where} is an empty list: give at least one value")
        for v in raw:
            _check_type(f"{where} choice", v, (str, int, float, bool), "a string, number or bool")
        return Knob(name, "choices", choices=tuple(raw))
    if isinstance(raw, dict):
        unknown = set(raw) - {"low", "high", "step", "log"}
        if unknown:
            raise SpecError(f"{where} has unknown key(s) {sorted(unknown)}: use low, high, step, log")
        if "low" not in raw or "high" not in raw:
            raise SpecError(f"{where} needs both low and high")
        low, high = raw["low"], raw["high"]
        _check_type(f"{where}.low", low, (int, float), "a number")
        _check_type(f"{where}.high", high, (int, float), "a number")
        if not (math.isfinite(low) and math.isfinite(high)):
            raise SpecError(f"{where}: low and high must be finite numbers")
        if low > high:
            raise SpecError(f"{where}: low ({low}) is greater than high ({high})")
        log = raw.get("log", False)
        _check_type(f"{where}.log", log, (bool,), "true or false")
        if log and low <= 0:
            raise SpecError(f"{where}: a log range needs low > 0")
        is_int = isinstance(low, int) and isinstance(high, int)
        step = raw.get("step")
        if step is not None:
            _check_type(f"{where}.step", step, (int,), "an integer")
            if step < 1 or not is_int:
                raise SpecError(f"{where}.step must be a positive integer on an integer range")
        return Knob(name, "int" if is_int else "float", low=low, high=high, step=step, log=log)
    _check_type(where, raw, (str, int, float, bool), "a list, a {low, high} range or a value")
    return Knob(name, "fixed", value=raw)


def parse_space(space: Any) -> dict[str, Knob | None]:
    if not isinstance(space, dict):
        raise SpecError(f"space must be a mapping of flag name -> values, got {space!r}")
    out: dict[str, Knob | None] = {}
    for name, raw in space.items():
        if not isinstance(name, str) or not name.strip("-"):
            raise SpecError(f"space has an invalid flag name {name!r}")
        clean = name.lstrip("-")
        out[clean] = parse_knob(clean, raw)
    return out


def merge_knobs(defaults: list[Knob], space: dict[str, Any]) -> list[Knob]:
    """The study's knobs: the backend's defaults with the study file's entries fixed, narrowed,
    removed (null) or added."""
    overrides = parse_space(space)
    knobs = []
    for k in defaults:
        if k.name in overrides:
            if overrides[k.name] is not None:
                knobs.append(overrides[k.name])
        else:
            knobs.append(k)
    default_names = {k.name for k in defaults}
    knobs += [k for n, k in overrides.items() if n not in default_names and k is not None]
    if not any(k.kind != "fixed" for k in knobs):
        raise SpecError("the search space is empty: every flag is fixed, nothing left to tune")
    return knobs


def load_study_file(path: str | Path) -> dict[str, Any]:
    """Read and type-check a YAML study file; returns the keys it sets."""
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise SpecError(f"study file {str(path)!r} does not exist") from None
    except OSError as e:
        raise SpecError(f"cannot read study file {str(path)!r}: {e.strerror}") from e
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        at = f" at line {line + 1}" if line is not None else ""
        raise SpecError(f"study file {str(path)!r} is not valid YAML{at}") from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(f"study file {str(path)!r} must be a mapping of keys, not {type(data).__name__}")
    unknown = set(data) - TOP_KEYS
    if unknown:
        raise SpecError(f"study file {str(path)!r} has unknown key(s) {sorted(map(str, unknown))}; "
                        f"allowed: {', '.join(sorted(TOP_KEYS))}")
    data = {k: v for k, v in data.items() if v is not None}  # `key:` with no value = not set
    checks = {"study": ((str,), "a string"), "backend": ((str,), "a string"),
              "model": ((str,), "a string"), "objective": ((str, list), "a name or a list of names"),
              "trials": ((int,), "an integer"), "seed": ((int,), "an integer"),
              "repeats": ((int, str), "an integer or 'auto'"), "confirm_top": ((int,), "an integer"),
              "informed_start": ((bool,), "true or false"), "sampler": ((str,), "a sampler name"),
              "llama_server": ((str,), "a string"), "vllm_python": ((str,), "a string"),
              "startup_timeout_s": ((int, float), "a number"),
              "price_per_hour": ((int, float), "a price in USD per hour, e.g. 2.5"),
              "price_per_gpu_hour": ((int, float), "a price in USD per GPU-hour, e.g. 2.5")}
    for key, (types, what) in checks.items():
        if key in data and data[key] is not None:
            _check_type(key, data[key], types, what)
    if "targets" in data:
        t = data["targets"]
        if isinstance(t, str):
            data["targets"] = [t]
        elif not (isinstance(t, list) and all(isinstance(x, str) for x in t)):
            raise SpecError("targets must be a list of strings such as 'ttft<1s'")
    if "time_budget" in data:  # "2h", "90m", or seconds
        data["time_budget_s"] = parse_duration(data.pop("time_budget"), what="time_budget")
    if "workload" in data:
        data["workload"] = parse_workload(data["workload"])
    if "space" in data:
        if data["space"] is None:
            data["space"] = {}
        parse_space(data["space"])
    # Relative model paths are relative to the study file, so studies can travel with models.
    if data.get("model") and data["model"] != "demo" and not Path(data["model"]).is_absolute():
        data["model"] = str((p.parent / data["model"]).resolve())
    return data


def parse_workload(raw: Any) -> Workload:
    if not isinstance(raw, dict):
        raise SpecError("workload must be a mapping (concurrency, prompt_tokens, output_tokens, ...)")
    known = {f.name: f for f in fields(Workload)}
    unknown = set(raw) - set(known)
    if unknown:
        raise SpecError(f"workload has unknown key(s) {sorted(map(str, unknown))}; "
                        f"allowed: {', '.join(known)}")
    numbers = {"request_timeout_s", "burstiness", "shared_prefix_fraction"}
    optional_numbers = {"rate", "duration_s"}
    strings = {"mode", "arrival", "endpoint"}
    for k, v in raw.items():
        where = f"workload.{k}"
        if k in numbers:
            _check_type(where, v, (int, float), "a number")
        elif k in optional_numbers:
            if v is not None:
                _check_type(where, v, (int, float), "a number")
        elif k in strings:
            _check_type(where, v, (str,), "a string")
        elif k == "dataset":
            if v is not None:
                _check_type(where, v, (str,), "a file path")
        elif k == "dataset_max_tokens":
            if v is not None:
                _check_type(where, v, (int,), "an integer")
        else:
            _check_type(where, v, (int,), "an integer")
    return Workload(**raw).validate()


def build_spec(file_data: dict[str, Any], overrides: dict[str, Any]) -> StudySpec:
    """Study-file values, then command-line flags that were given (not None), over defaults."""
    spec = StudySpec()
    values = {**file_data, **{k: v for k, v in overrides.items() if v is not None}}
    wl_over = values.pop("workload_overrides", {}) or {}
    spec = replace(spec, **values)
    if wl_over:
        spec = replace(spec, workload=replace(spec.workload, **wl_over))
    return spec.validate()
