"""What `kvtune run`'s flags set in a study: typed, one field per StudySpec (and Workload) field,
None = not given (the study file or the default decides).

The CLI fills a `SpecOverrides` from its flags; `study.spec.build_spec` lays it over the study
file. A field here that the spec lacks (or the reverse) is a test failure
(tests/unit/study/test_overrides.py), so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any


@dataclass(frozen=True)
class WorkloadOverrides:
    """Workload fields given on the command line (None: not given)."""

    concurrency: int | None = None
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    num_requests: int | None = None
    warmup_requests: int | None = None
    request_timeout_s: float | None = None
    seed: int | None = None
    mode: str | None = None
    rate: float | None = None
    arrival: str | None = None
    burstiness: float | None = None
    duration_s: float | None = None
    endpoint: str | None = None
    dataset: str | None = None
    dataset_min_tokens: int | None = None
    dataset_max_tokens: int | None = None
    shared_prefix_fraction: float | None = None
    shared_prefix_tokens: int | None = None
    shared_prefix_groups: int | None = None  # --prefix-groups: distinct shared system prompts
    prompt_spread: float | None = None  # --prompt-spread: sigma of log of drawn prompt lengths
    output_spread: float | None = None
    # trace replay (--workload trace:FILE, --trace-*)
    trace: str | None = None
    trace_requests: int | None = None
    trace_window_s: float | None = None
    trace_speed: float | None = None
    trace_length_scale: float | None = None
    trace_max_tokens: int | None = None
    trace_time_unit: str | None = None
    trace_model: str | None = None
    trace_log_type: str | None = None
    # multi-turn conversations (--workload multiturn, --turns, --think-time)
    multiturn: bool | None = None
    turns: int | None = None
    think_time_s: float | None = None
    conversation_max_tokens: int | None = None
    think_spread: float | None = None  # --think-spread: sigma of log of drawn think times

    def given(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}


@dataclass(frozen=True)
class SpecOverrides:
    """StudySpec fields given on the command line (None: not given). Objectives and targets are
    the words typed (the spec parses them)."""

    study: str | None = None
    backend: str | None = None
    model: str | None = None
    targets: tuple[str, ...] | None = None
    objective: tuple[str, ...] | None = None
    trials: int | None = None
    seed: int | None = None
    workload: WorkloadOverrides = field(default_factory=WorkloadOverrides)
    space: dict[str, Any] | None = None
    llama_server: str | None = None
    vllm_python: str | None = None
    startup_timeout_s: float | None = None
    startup_stall_s: float | None = None
    repeats: int | str | None = None
    confirm_top: int | None = None
    confirm_pairs: int | None = None
    informed_start: bool | None = None
    time_budget_s: float | None = None
    early_stop: bool | None = None
    sampler: str | None = None
    price_per_hour: float | None = None
    price_per_gpu_hour: float | None = None
    slo: str | None = None  # --slo "ttft<2s,tpot<100ms" (the spec parses it)
    draft_model: str | None = None  # --draft-model PATH
    speculative: bool | None = None  # --speculative
    fidelity_gate: bool | None = None  # --no-fidelity-gate
    fidelity_prompts: str | None = None  # a study-file key only

    def given(self) -> dict[str, Any]:
        """The spec fields set here, the workload apart (`workload.given()`)."""
        return {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name != "workload" and getattr(self, f.name) is not None
        }

    def with_workload(self, **values: Any) -> "SpecOverrides":
        return replace(self, workload=replace(self.workload, **values))
