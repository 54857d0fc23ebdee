"""`kvtune plan` as one computation: the table and the suggested flags from the same figures.

Built apart, the two disagreed: the table held back no reserve while the suggestion held back
2 GiB per GPU, and the decode ceiling read every GPU's bandwidth while the suggestion ran the
model on one. Here one `Reserve` feeds both, the suggestion is made first, and the ceiling is
computed for the tensor-parallel size it suggests (a stream decodes on the GPUs that hold the
model, not on every GPU of the machine; llama-server's layer split reads one GPU at a time, as
tensor-parallel size 1 does). Pure: the hardware comes in as a `HardwareBudget`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from kvtune.errors import SpecError
from kvtune.planner.gpus import HardwareBudget
from kvtune.planner.kv import DEFAULT_CACHE_TYPES, ModelShape, Plan, bytes_per_element, make_plan
from kvtune.planner.suggest import VLLM_UTILIZATION, Reserve, Suggestion, suggest


@dataclass(frozen=True)
class PlanAndFlags:
    """The table (`plan`), the suggested flags, and the two figures they share: the reserve and
    the GPUs the decode ceiling is for (`ceiling_gpus` of `gpus`; None without GPUs)."""

    plan: Plan
    suggestions: tuple[Suggestion, ...]
    reserve: Reserve
    hardware: HardwareBudget
    ceiling_gpus: int | None = None
    gpus: int = 0

    def ceiling_basis(self) -> str:
        """What the decode ceiling's bandwidth is: which GPUs, and why those."""
        if not self.ceiling_gpus:
            return ""
        if self.gpus == 1:
            return "1 GPU"
        return f"{self.ceiling_gpus} of {self.gpus} GPUs: the suggested --tensor-parallel-size {self.ceiling_gpus}"


def check_cache_types(kinds: Iterable[str]) -> None:
    """Each cache type ("q8_0", or "K/V" such as "q8_0/f16") is one the planner knows, else a
    `SpecError` naming the known ones: checked before anything is read or computed."""
    for kind in kinds:
        for part in str(kind).split("/"):
            bytes_per_element(part)


def compose(
    shape: ModelShape,
    hw: HardwareBudget,
    users: int = 1,
    context: int | None = None,
    *,
    reserve_bytes: int | None = None,
    cache_types: Iterable[str] = DEFAULT_CACHE_TYPES,
    parallel: int | None = None,
    weights_bytes: int | None = None,
    vllm_utilization: float = VLLM_UTILIZATION,
) -> PlanAndFlags:
    """The plan and the suggestions for `users` x `context` tokens of `shape` on `hw`.
    `reserve_bytes` is kept back on each GPU (None: the default); `weights_bytes` overrides the
    shape's (--weights); `context` None is the model's maximum."""
    if weights_bytes is not None:
        shape = replace(shape, weights_bytes=weights_bytes)
    kinds = tuple(cache_types) or DEFAULT_CACHE_TYPES
    check_cache_types(kinds)
    context = context or shape.max_positions
    if not context or context <= 0:
        raise SpecError("no context length: pass --context N (the model does not state its maximum)")
    reserve = Reserve.for_hardware(hw, reserve_bytes)
    suggestions = suggest(shape, hw, users, context, reserve.per_device, vllm_utilization)
    gpus = reserve.devices if reserve.on_gpu else 0
    vllm = next(s for s in suggestions if s.backend == "vllm")
    tp = int(vllm.flags.get("tensor-parallel-size", 1)) if gpus else None
    bandwidth = hw.bandwidth_bytes_s
    if bandwidth and tp and gpus:  # the budget's bandwidth is all GPUs'; a stream reads tp of them
        bandwidth = bandwidth * tp / gpus
    plan = make_plan(shape, hw.memory_bytes, reserve.total, context, users, kinds, bandwidth, parallel)
    return PlanAndFlags(plan, suggestions, reserve, hw, tp, gpus)
