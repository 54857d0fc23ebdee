"""`kvtune plan`: the KV-cache arithmetic for a model on this (or a named, or a given) machine,
with the suggested starting flags per backend."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import typer

from kvtune.cli.app import app, console

if TYPE_CHECKING:
    from kvtune.planner import ModelShape
    from kvtune.planner.compose import PlanAndFlags
    from kvtune.planner.gpus import HardwareBudget


HELP = {
    "model": "HF model folder (config.json) or GGUF file to read the shape from.",
    "layers": "Transformer layers (instead of --model).",
    "weights": "Weights size with a unit, e.g. 15GiB (default: the model files on disk).",
    "memory": "Memory to plan for, all GPUs together, with a unit: 24GiB, 24GB (default: the GPUs via NVML, else RAM).",
    "gpu": "Plan for this GPU model from the spec-sheet table instead of this machine, e.g. 'H100 SXM', 'RTX 4090'.",
    "gpus": "How many GPUs: of --gpu, else the first N of this machine's.",
    "reserve": "Kept back on each GPU (or once beside a CPU server) for activations, runtime, fragmentation, "
    "e.g. 2GiB; the table and the suggested flags hold back the same (default 2GiB per GPU, 1GiB on the CPU).",
    "context": "Tokens per sequence (default: the model's maximum).",
    "parallel": "llama-server --parallel: show the per-slot context of --ctx-size = context.",
    "bandwidth": "Memory bandwidth of all GPUs together, with a unit: 1TB/s, 900GB/s (default: known GPU models).",
    "cache_type": "Cache types to show (default f16, fp8, q8_0, q4_0).",
}


@app.command()
def plan(
    model: Optional[str] = typer.Option(None, help=HELP["model"]),
    layers: Optional[int] = typer.Option(None, help=HELP["layers"]),
    heads: Optional[int] = typer.Option(None, help="Attention (query) heads."),
    kv_heads: Optional[int] = typer.Option(None, "--kv-heads", help="KV heads (grouped-query attention)."),
    head_dim: Optional[int] = typer.Option(None, "--head-dim", help="Head dimension."),
    weights: Optional[str] = typer.Option(None, help=HELP["weights"]),
    memory: Optional[str] = typer.Option(None, help=HELP["memory"]),
    gpu: Optional[str] = typer.Option(None, help=HELP["gpu"]),
    gpus: Optional[int] = typer.Option(None, help=HELP["gpus"]),
    reserve: Optional[str] = typer.Option(None, help=HELP["reserve"]),
    context: Optional[int] = typer.Option(None, help=HELP["context"]),
    users: int = typer.Option(1, help="Concurrent sequences for the totals."),
    parallel: Optional[int] = typer.Option(None, help=HELP["parallel"]),
    bandwidth: Optional[str] = typer.Option(None, help=HELP["bandwidth"]),
    cache_type: list[str] = typer.Option([], "--cache-type", help=HELP["cache_type"]),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """KV-cache arithmetic: bytes per token, what fits, tokens x users, decode ceiling, starting flags."""
    from kvtune.planner import DEFAULT_CACHE_TYPES
    from kvtune.planner.compose import check_cache_types, compose
    from kvtune.planner.units import bandwidth_flag, size_flag

    # every flag is checked before the model is read or the host probed
    _check_counts(context=context, users=users, parallel=parallel, gpus=gpus)
    memory_bytes, weights_bytes = size_flag(memory, "--memory", positive=True), size_flag(weights, "--weights")
    reserve_bytes, bandwidth_bytes_s = size_flag(reserve, "--reserve"), bandwidth_flag(bandwidth, "--bandwidth")
    check_cache_types(cache_type)
    _check_gpu(gpu)
    shape = _shape(model, layers=layers, heads=heads, kv_heads=kv_heads, head_dim=head_dim)
    hw, facts = _hardware(gpu, gpus, memory_bytes, bandwidth_bytes_s)
    kinds = tuple(cache_type) or DEFAULT_CACHE_TYPES
    result = compose(
        shape,
        hw,
        users,
        context,
        reserve_bytes=reserve_bytes,
        cache_types=kinds,
        parallel=parallel,
        weights_bytes=weights_bytes,
    )
    _show(result, facts, as_json)


def _check_gpu(gpu: str | None) -> None:
    """--gpu names a GPU model of the spec-sheet table (an unknown one: the known ones listed)."""
    from kvtune.errors import SpecError
    from kvtune.planner.gpus import named_gpu

    if gpu is not None and not gpu.strip():
        raise SpecError("--gpu needs a GPU model, e.g. 'H100 SXM' (leave it out to plan for this machine)")
    if gpu is not None:
        named_gpu(gpu)


def _hardware(
    gpu: str | None, gpus: int | None, memory_bytes: int | None, bandwidth_bytes_s: float | None
) -> "tuple[HardwareBudget, list[str]]":
    """The budget the plan is for (a named GPU from the spec sheet, else this machine: the one
    place `kvtune plan` reads the host) and the host's facts to print beside it."""
    from kvtune import hardware as host
    from kvtune.planner.gpus import first_gpus, named_budget

    if gpu:
        return named_budget(gpu, gpus or 1, memory_bytes, bandwidth_bytes_s), []
    fp = host.fingerprint()
    facts = [host.describe(fp), *host.gpu_lines(fp)] if fp.get("gpu_count") else []
    chosen = first_gpus(host.gpu_infos(), gpus) if gpus is not None else None
    return host.detect_hardware(memory_bytes, bandwidth_bytes_s, gpus=chosen), facts


def _show(result: "PlanAndFlags", facts: list[str], as_json: bool) -> None:
    """The plan as JSON, or as text: the hardware, its facts, the table and the suggested flags."""
    import json

    from kvtune.planner.plan_text import composed_to_dict, render_composed

    if as_json:
        print(json.dumps({**composed_to_dict(result), "hardware_facts": facts}, indent=2))
        return
    console.print(f"memory: {result.hardware.description}", markup=False)
    for line in facts:
        console.print(f"  {line}", markup=False)
    console.print(render_composed(result), markup=False)


def _check_counts(*, context: int | None, users: int, parallel: int | None, gpus: int | None) -> None:
    """The counts, before anything is read: each refusal names the value and the fix."""
    from kvtune.errors import SpecError

    if context is not None and context < 1:
        raise SpecError(f"--context must be at least 1 token (leave it out for the model's maximum), got {context}")
    for flag, value in (("--users", users), ("--parallel", parallel), ("--gpus", gpus)):
        if value is not None and value < 1:
            raise SpecError(f"{flag} must be at least 1, got {value}")
    for flag, value in (("--context", context), ("--users", users), ("--parallel", parallel), ("--gpus", gpus)):
        _at_most(flag, value)


#: The most each count of `kvtune plan` may be: past these no model or machine is meant (a
#: context of 10**30 tokens was planned, table and flags, as if it meant something).
MOST = {
    "--context": 100_000_000,  # tokens: 10x the longest context a model states
    "--users": 100_000,  # as kvtune run's --concurrency
    "--parallel": 100_000,
    "--gpus": 4096,
    "--layers": 100_000,
    "--heads": 100_000,
    "--kv-heads": 100_000,
    "--head-dim": 100_000,
}


def _at_most(flag: str, value: int | None) -> None:
    """A count past `MOST`: one line naming the flag, its most and the value."""
    from kvtune.errors import SpecError

    if value is not None and value > MOST[flag]:
        shown = str(value) if value < 10**18 else f"{value:.3g}"
        raise SpecError(f"{flag} must be at most {MOST[flag]}, got {shown}")


def _shape(
    model: str | None, *, layers: int | None, heads: int | None, kv_heads: int | None, head_dim: int | None
) -> "ModelShape":
    """The model's shape: read from --model, or given as --layers/--kv-heads/--head-dim
    (--heads optional), never both (the file states its own shape)."""
    from kvtune.cli.flag_names import refused_as_typed
    from kvtune.errors import ModelError, SpecError
    from kvtune.planner import ModelShape
    from kvtune.planner.shape import shape_from_path

    given = {"--layers": layers, "--heads": heads, "--kv-heads": kv_heads, "--head-dim": head_dim}
    if model is not None:
        extra = [flag for flag, v in given.items() if v is not None]
        if extra:
            raise SpecError(f"--model with {', '.join(extra)}: give one (the model file states its shape)")
        if not model.strip():
            raise SpecError("--model needs a path: an HF model folder or a GGUF file")
        with refused_as_typed({"model": "--model"}, ModelError):  # the path's refusal names the flag typed
            return shape_from_path(model)
    missing = [flag for flag, v in given.items() if v is None and flag != "--heads"]
    if missing:
        raise SpecError(f"pass --model PATH, or the shape: missing {', '.join(missing)}")
    for flag, v in given.items():
        if v is not None and v <= 0:
            raise SpecError(f"{flag} must be positive, got {v}")
        _at_most(flag, v)
    assert layers is not None and kv_heads is not None and head_dim is not None  # `missing` above
    return ModelShape(layers=layers, attention_heads=heads or kv_heads, kv_heads=kv_heads, head_dim=head_dim)
