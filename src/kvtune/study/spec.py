"""StudySpec: everything a study needs, from a YAML study file and/or command-line flags.

A study file is validated strictly (unknown keys, wrong types, empty search spaces and ranges
with min > max are one-line `SpecError`s) because a typo in an unattended hours-long run must
fail before anything launches, not after.

The spec is typed: its objectives, targets and sampler are parsed once, when the spec is built
(from the study file and flags by `build_spec`, from a stored study or results.json by
`StudySpec.from_dict`), and every reader gets `Objective`s, `Target`s and a `SamplerKind`.
`to_dict` writes the words users typed, under the keys earlier versions wrote, so a study or a
results.json of an earlier version still loads.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable

from kvtune.durations import parse_duration
from kvtune.errors import SpecError, TargetError
from kvtune.knobs import Knob
from kvtune.launchers.startup import DEFAULT_CAP_S, DEFAULT_STALL_S
from kvtune.objectives.cost import Price, price_of
from kvtune.objectives.objective import OBJECTIVES, Objective, objective
from kvtune.objectives.slo import Slo, slo_field
from kvtune.objectives.targets import Target, parse_target, parse_targets
from kvtune.study.overrides import SpecOverrides
from kvtune.study.sampler_choice import SamplerKind, sampler_kind
from kvtune.study.space import parse_space
from kvtune.workload import Workload

BACKENDS = ("llama-server", "vllm")
TOP_KEYS = {
    "study",
    "backend",
    "model",
    "targets",
    "objective",
    "trials",
    "seed",
    "workload",
    "space",
    "llama_server",
    "startup_timeout_s",
    "startup_stall_s",
    "repeats",
    "confirm_top",
    "confirm_pairs",
    "vllm_python",
    "informed_start",
    "time_budget",
    "sampler",
    "price_per_hour",
    "price_per_gpu_hour",
    "slo",
    "draft_model",
    "speculative",
    "fidelity_gate",
    "fidelity_prompts",
}


def objective_names(raw: str | Iterable[str]) -> list[str]:
    """The objective field as YAML/JSON hold it (one name or a list) -> a list of names."""
    return [raw] if isinstance(raw, str) else list(raw)


def parse_objectives(raw: str | Iterable[str | Objective] | Objective) -> tuple[Objective, ...]:
    """An objective field (one name, a list of names, or Objectives already parsed) -> the typed
    objectives, in order. Unknown, missing or repeated names are a one-line SpecError."""
    if isinstance(raw, Objective):
        return (raw,)
    items = objective_names(raw)  # type: ignore[arg-type]
    if not items:
        raise SpecError("objective is empty: name at least one, e.g. output_throughput")
    out = []
    for o in items:
        if isinstance(o, Objective):
            out.append(o)
        elif isinstance(o, str) and o in OBJECTIVES:
            out.append(objective(o))
        else:
            raise SpecError(
                f"unknown objective {o!r}: use output_throughput, "
                f"request_throughput, capacity, cost_per_mtok or a latency such as ttft_p95"
            )
    names = [o.name for o in out]
    if len(set(names)) != len(names):
        raise SpecError(f"objective lists {names} twice: name each once")
    return tuple(out)


def _typed_targets(raw: Iterable[str | Target]) -> tuple[Target, ...]:
    """Target texts (or Targets already parsed) -> Targets, checked together (no target twice,
    no contradiction)."""
    items = [raw] if isinstance(raw, str) else list(raw)
    texts = [t.text if isinstance(t, Target) else t for t in items]
    return tuple(parse_targets(texts))


# `repeats: auto`: measure again on the same server until the objective's 95% confidence
# half-width is within AUTO_REL_HALF_WIDTH of its mean, or AUTO_MAX_REPEATS runs (AIPerf-style).
AUTO = "auto"
AUTO_REL_HALF_WIDTH = 0.03
AUTO_MAX_REPEATS = 5


@dataclass
class StudySpec:
    """The study's settings, typed. `objective`, `targets` and `sampler` accept the words users
    write (a name or a list of names, target texts, a sampler name) and hold them parsed."""

    study: str | None = None
    backend: str = "llama-server"
    model: str | None = None  # None: the demo model
    targets: tuple[Target, ...] = ()
    # One objective, or several for a multi-objective study of the trade-off; the first is the
    # primary one (confirmation and the launch script rank by it).
    objective: tuple[Objective, ...] = ("output_throughput",)  # type: ignore[assignment]
    trials: int = 12
    seed: int = 0
    workload: Workload = field(default_factory=Workload)
    space: dict[str, Any] = field(default_factory=dict)
    llama_server: str | None = None
    # The Python whose vLLM serves (None: kvtune/vllm_python.py's order).
    vllm_python: str | None = None
    startup_timeout_s: float = DEFAULT_CAP_S  # a start's cap; it fails sooner when its log shows no
    startup_stall_s: float = DEFAULT_STALL_S  # progress for this long (launchers/startup.py)
    # Measurements per trial on the same running server (their spread is reported).
    repeats: int | str = 1  # or "auto": repeat until the objective's 95% CI is within 3%
    # Confirmation (the verdict, src/kvtune/verdict/): this many leaders of the search get one
    # fresh run each before one is tested against the defaults (0: no confirmation; several
    # objectives: up to this many of the Pareto set plus 3 are re-measured).
    confirm_top: int = 3
    # The verdict's cap: at most this many (candidate, defaults) pairs, D W W D on fresh servers,
    # judged every 3 pairs; at the cap it says "not enough evidence" or "tied". 9 gives 80% power
    # for a true +20% at 10% run-to-run noise (docs/verdicts.md).
    confirm_pairs: int = 9
    # Measure the seeds' advice (slots = users, all cores, flash attention...) right after the
    # baseline, before the sampler explores.
    informed_start: bool = True
    # Stop asking new trials after this much wall time (--time-budget; None: no limit).
    time_budget_s: float | None = None
    # Stop a measurement once a target can no longer hold (--no-early-stop turns it off).
    early_stop: bool = True
    # The search as asked: auto (TPE), tpe, gp, random, grid or qmc (tuner/search/samplers.py
    # resolves auto and builds the Optuna sampler).
    sampler: SamplerKind = SamplerKind.AUTO
    # USD per hour for the whole machine, or per GPU a trial uses (at most one): every trial
    # then carries its cost per 1M tokens (objectives/cost.py).
    price_per_hour: float | None = None
    price_per_gpu_hour: float | None = None
    slo: Slo | None = None  # per-request SLOs ("ttft<2s,tpot<100ms", --slo): trials get slo_attainment
    # Speculative decoding (off by default: its gain depends on the traffic): a draft model the
    # search may draft with (and its draft length), and/or the backend's n-gram modes.
    draft_model: str | None = None
    speculative: bool = False
    # The fidelity gate (objectives/fidelity.py): a config whose flags change the model's
    # numerics must answer the reference prompts like the defaults (`kld<0.01` unless a `kld`
    # target is given). False turns the default gate off; the summary then says so.
    fidelity_gate: bool = True
    # The reference prompts: a text file of one prompt a line or a JSON list (None: kvtune's own).
    fidelity_prompts: str | None = None

    def __post_init__(self) -> None:
        """Parse the words once: everything after construction reads typed values."""
        self.objective = parse_objectives(self.objective)
        self.targets = _typed_targets(self.targets)
        self.slo = slo_field(self.slo, [*(o.name for o in self.objective), *(t.metric for t in self.targets)])
        self.sampler = sampler_kind(self.sampler)

    @property
    def price(self) -> Price | None:
        return price_of(self.price_per_hour, self.price_per_gpu_hour)

    @property
    def repeat_plan(self) -> tuple[int, bool]:
        """(most runs per measurement, whether to stop once the objective converged)."""
        return (AUTO_MAX_REPEATS, True) if self.repeats == AUTO else (int(self.repeats), False)

    @property
    def objective_specs(self) -> tuple[Objective, ...]:
        """What the study optimizes, in order (the name the tuner reads `objective` by)."""
        return self.objective

    @property
    def primary(self) -> Objective:
        """The first objective: the one confirmation and the launch script rank by."""
        return self.objective[0]

    @property
    def objective_field(self) -> str | list[str]:
        """The objective as study files and results.json write it: a name, or a list of names."""
        names = [o.name for o in self.objective]
        return names[0] if len(names) == 1 else names

    @property
    def target_texts(self) -> list[str]:
        """The targets as the user wrote them (results.json's "targets")."""
        return [t.text for t in self.targets]

    @property
    def is_capacity(self) -> bool:
        """The primary objective is capacity: exports check the load the trial held."""
        return self.primary.name == "capacity"

    def validate(self) -> "StudySpec":
        if self.study is not None:
            check_study_name(self.study)
        if self.backend not in BACKENDS:
            raise SpecError(f"unknown backend {self.backend!r}: use one of {', '.join(BACKENDS)}")
        names = [o.name for o in self.objective]
        price = self.price  # a bad price (or two) is a SpecError here
        if "capacity" in names and not self.targets:
            raise SpecError("the capacity objective needs a target to hold, e.g. --target 'ttft_p95<1s'")
        if "capacity" in names and any(t.relative for t in self.targets):
            raise SpecError(
                "the capacity objective needs absolute targets (e.g. 'ttft_p95<1s'), not ones relative to the baseline"
            )
        if "capacity" in names and self.workload.trace is not None and self.workload.trace_speed != 1.0:
            raise SpecError(  # the speed is what capacity on a trace searches (tuner/trial/trace_capacity.py)
                f"the capacity objective on a trace searches the replay speed itself (from 1x, reported as a "
                f"multiple of the recorded rate): drop --trace-speed {self.workload.trace_speed:g} (workload.trace_speed)"
            )
        if "cost_per_mtok" in names and price is None:
            raise SpecError(
                "the cost_per_mtok objective needs a price: --price-per-hour USD (the "
                "whole machine) or --price-per-gpu-hour USD (per GPU a trial uses)"
            )
        if self.repeats != AUTO and (
            isinstance(self.repeats, bool) or not isinstance(self.repeats, int) or self.repeats < 1
        ):
            raise SpecError(f"repeats must be a whole number of at least 1 or 'auto', got {self.repeats!r}")
        if self.confirm_top < 0:
            raise SpecError(f"confirm_top must be 0 or more, got {self.confirm_top}")
        if isinstance(self.confirm_pairs, bool) or not isinstance(self.confirm_pairs, int) or self.confirm_pairs < 2:
            raise SpecError(
                f"confirm_pairs must be a whole number of at least 2 (one pair gives no noise estimate), "
                f"got {self.confirm_pairs!r}"
            )
        if self.trials < 1:
            raise SpecError(f"trials must be at least 1 (the baseline is trial 0), got {self.trials}")
        parse_duration(self.startup_timeout_s, what="startup_timeout_s")  # a positive number of seconds
        parse_duration(self.startup_stall_s, what="startup_stall_s")
        if not 0 <= self.seed < 2**32:
            raise SpecError(f"seed must be between 0 and 2**32-1, got {self.seed}")
        if self.time_budget_s is not None:
            parse_duration(self.time_budget_s)
        self.workload.validate()
        parse_space(self.space)
        if not self.fidelity_gate and any(t.fidelity for t in self.targets):
            raise SpecError(
                "a kld target and fidelity_gate: false (--no-fidelity-gate) contradict each other: drop one"
            )
        return self

    def fingerprint(self) -> str:
        """A short hash of what the user asked for (not the trial budget): the default study name.
        Computed from the words given, before any launcher exists; `identity` is what a resumed
        study is checked against. Kept byte-for-byte as earlier versions computed it, so the same
        flags find the same study."""
        key: dict[str, Any] = {
            "backend": self.backend,
            "model": self.model,
            "targets": sorted(self.target_texts),
            "objective": self.objective_field,
            "workload": self.workload.to_dict(),
            "space": self.space,
        }
        if self.price is not None:  # costs are stored per trial: another price, another study
            key["price"] = [self.price.usd, self.price.per_gpu]
        key.update({} if self.slo is None else {"slo": self.slo.text})  # another SLO, another study
        key.update({"draft_model": self.draft_model} if self.draft_model else {})  # only when set:
        key.update({"speculative": True} if self.speculative else {})  # older names stay the same
        return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:8]

    def identity(self, model: str | None, knobs: Iterable[Knob]) -> dict[str, Any]:
        """What a resumed study must share with the one stored (storage.open_study compares it):
        the model as the launcher resolved it and the merged search space. The same keys and
        values as earlier versions stored (absolute targets by their threshold), so their studies
        resume; what that form cannot tell apart (relative factors, the price) `resume_conflict`
        checks against the stored spec."""
        return {
            "backend": self.backend,
            "model": Path(model).name if model and Path(str(model)).exists() else model,
            "targets": sorted(t.name + t.op + repr(t.threshold) for t in self.targets),
            "objective": self.objective_field,
            "workload": self.workload.to_dict(),
            "space": [k.describe() for k in knobs],
        }

    def resume_conflict(self, stored: dict[str, Any]) -> str | None:
        """The setting this spec changes from a stored study's spec (its `to_dict`) that would mix
        incomparable trials, as a phrase for the refusal; None when there is none."""
        for key, flag in (("price_per_hour", "--price-per-hour"), ("price_per_gpu_hour", "--price-per-gpu-hour")):
            was, now = stored.get(key), getattr(self, key)
            if was != now:
                return f"{flag} (stored: {_setting(was)}, now: {_setting(now)})"
        was_rel = _relative_keys(stored.get("targets") or [])
        now_rel = sorted(t.constraint_key for t in self.targets if t.relative)
        if was_rel != now_rel:
            return f"relative target (stored: {', '.join(was_rel) or 'none'}, now: {', '.join(now_rel) or 'none'})"
        return None

    def to_dict(self) -> dict[str, Any]:
        """The spec as JSON/YAML hold it (the Optuna study's "spec", results.json's "spec")."""
        unset = {
            "slo",
            *(() if self.draft_model else ("draft_model",)),
            *(() if self.speculative else ("speculative",)),
            *(() if not self.fidelity_gate else ("fidelity_gate",)),
            *(() if self.fidelity_prompts else ("fidelity_prompts",)),
        }
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in unset}  # those only when set
        d.update(
            objective=self.objective_field,
            targets=self.target_texts,
            sampler=self.sampler.value,
            workload=self.workload.to_dict(),
            space=dict(self.space),
            **({} if self.slo is None else {"slo": self.slo.text}),
        )
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StudySpec":
        """A spec stored by this or an earlier version (unknown keys are ignored, missing ones
        take their defaults), parsed; `validate()` checks how the settings combine."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in (d or {}).items() if k in known and v is not None}
        wl = values.pop("workload", None) or {}
        wl_known = {f.name for f in fields(Workload)}
        values["workload"] = Workload(**{k: v for k, v in wl.items() if k in wl_known})
        return cls(**values)


def _setting(value: Any) -> str:
    return "not set" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _relative_keys(texts: Iterable[str]) -> list[str]:
    """The relative targets among stored target texts, by what they mean (constraint key, e.g.
    ``ttft_p95<0.8x``), so a respelling is not a change."""
    out = []
    for text in texts:
        try:
            t = parse_target(text)
        except TargetError:  # a target this version no longer reads is no factor to compare
            continue
        if t.relative:
            out.append(t.constraint_key)
    return sorted(out)


def build_spec(file_data: dict[str, Any], overrides: SpecOverrides | None = None) -> StudySpec:
    """Study-file values (`study_file.load_study_file`), then the flags given, over the defaults.
    `--seed` seeds the prompts too (the workload's seed) unless the workload's seed is given."""
    given = overrides or SpecOverrides()
    values = {**file_data, **given.given()}
    workload = {**(values.pop("workload", None) or {}), **given.workload.given()}
    if given.seed is not None and "seed" not in workload:
        workload["seed"] = given.seed
    return StudySpec(**values, workload=Workload(**workload)).validate()


_STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@-]*")


def check_study_name(name: str) -> str:
    """A study name is a folder under the runs folder and a key in shared storage: letters,
    digits and . _ + = @ - (starting with a letter or digit), so it can never be empty, climb out
    of the runs folder (/, ..) or read as a flag."""
    if not _STUDY_NAME.fullmatch(name or ""):
        raise SpecError(
            f"--study {name!r} is not a study name: use letters, digits and . _ - "
            f"(starting with a letter or digit), e.g. my-box-ttft"
        )
    return name


def study_name_part(text: str) -> str:
    """`text` (a model path or hub id) as part of a default study name: a local path's last
    component, a hub id's org/name as org--name, anything else outside the name's characters
    as '-'."""
    last = text.rstrip("/")
    if last.startswith(("/", "./", "../", "~")):
        last = last.rsplit("/", 1)[-1]
    slug = re.sub(r"[^A-Za-z0-9._+=@-]", "-", last.replace("/", "--")).strip("-.")
    return slug or "model"
