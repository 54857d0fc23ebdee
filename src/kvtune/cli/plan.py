"""`kvtune plan`: the KV-cache arithmetic for a model on this (or a named, or a given) machine,
with the suggested starting flags per backend."""

from __future__ import annotations

from typing import Optional

import typer

from kvtune.cli.app import app, console


@app.command()
def plan(
    model: Optional[str] = typer.Option(
        None, help="HF model folder (config.json) or GGUF file to read the shape from."
    ),
    layers: Optional[int] = typer.Option(None, help="Transformer layers (instead of --model)."),
    heads: Optional[int] = typer.Option(None, help="Attention (query) heads."),
    kv_heads: Optional[int] = typer.Option(None, "--kv-heads", help="KV heads (grouped-query attention)."),
    head_dim: Optional[int] = typer.Option(None, "--head-dim", help="Head dimension."),
    weights: Optional[str] = typer.Option(None, help="Weights size, e.g. 15GiB (default: the model files on disk)."),
    memory: Optional[str] = typer.Option(
        None, help="Memory to plan for, e.g. 24GiB (default: all GPUs via NVML, else RAM)."
    ),
    gpu: Optional[str] = typer.Option(
        None,
        help="Plan for this GPU model from the spec-sheet table instead of this machine, e.g. 'H100 SXM', 'RTX 4090'.",
    ),
    gpus: Optional[int] = typer.Option(None, help="How many GPUs: of --gpu, else the first N of this machine's."),
    reserve: str = typer.Option(
        "0",
        help="Memory kept back for activations, runtime, fragmentation, e.g. 2GiB (suggested flags: per GPU, default 2GiB).",
    ),
    context: Optional[int] = typer.Option(None, help="Tokens per sequence (default: the model's maximum)."),
    users: int = typer.Option(1, help="Concurrent sequences for the totals."),
    parallel: Optional[int] = typer.Option(
        None, help="llama-server --parallel: show the per-slot context of --ctx-size = context."
    ),
    bandwidth: Optional[str] = typer.Option(None, help="Memory bandwidth, e.g. 1TB/s (default: known GPU models)."),
    cache_type: list[str] = typer.Option(
        [], "--cache-type", help="Cache types to show (default f16, fp8, q8_0, q4_0)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """KV-cache arithmetic: bytes per token, what fits, tokens x users, decode ceiling, starting flags."""
    import json

    from kvtune import hardware as host
    from kvtune.errors import SpecError
    from kvtune.hardware import detect_hardware
    from kvtune.planner import DEFAULT_CACHE_TYPES, ModelShape, make_plan, parse_bandwidth, parse_size
    from kvtune.planner.gpus import first_gpus, named_budget, named_gpu
    from kvtune.planner.render import plan_to_dict, render, render_suggestions, suggestions_to_dict
    from kvtune.planner.shape import shape_from_path
    from kvtune.planner.suggest import suggest

    if context is not None and context < 1:
        raise SpecError(f"--context must be at least 1 token (leave it out for the model's maximum), got {context}")
    if users < 1:
        raise SpecError(f"--users must be at least 1, got {users}")
    if parallel is not None and parallel < 1:
        raise SpecError(f"--parallel must be at least 1, got {parallel}")
    for flag, text in (("--memory", memory), ("--weights", weights), ("--reserve", reserve)):
        _refuse_bare_number(flag, text)
    if gpu is not None and not gpu.strip():
        raise SpecError("--gpu needs a GPU model, e.g. 'H100 SXM' (leave it out to plan for this machine)")
    if gpu:
        named_gpu(gpu)  # an unknown name fails first, naming the known ones
    if gpus is not None and gpus < 1:
        raise SpecError(f"--gpus must be at least 1, got {gpus}")
    if model:
        shape = shape_from_path(model)
    else:
        missing = [
            n for n, v in (("--layers", layers), ("--kv-heads", kv_heads), ("--head-dim", head_dim)) if v is None
        ]
        if missing:
            raise SpecError(f"pass --model PATH, or the shape: missing {', '.join(missing)}")
        for name, v in (("--layers", layers), ("--kv-heads", kv_heads), ("--head-dim", head_dim), ("--heads", heads)):
            if v is not None and v <= 0:
                raise SpecError(f"{name} must be positive, got {v}")
        assert layers is not None and kv_heads is not None and head_dim is not None  # `missing` above
        shape = ModelShape(layers=layers, attention_heads=heads or kv_heads, kv_heads=kv_heads, head_dim=head_dim)
    memory_bytes = parse_size(memory, "--memory") if memory else None
    bandwidth_bytes_s = parse_bandwidth(bandwidth, "--bandwidth") if bandwidth else None
    facts: list[str] = []
    if gpu:
        hw = named_budget(gpu, gpus or 1, memory_bytes, bandwidth_bytes_s)
    else:
        fp = host.fingerprint()
        facts = [host.describe(fp), *host.gpu_lines(fp)] if fp.get("gpu_count") else []
        hw = detect_hardware(
            memory_bytes, bandwidth_bytes_s, gpus=first_gpus(host.gpu_infos(), gpus) if gpus is not None else None
        )
    reserve_bytes = parse_size(reserve, "--reserve")
    result = make_plan(
        shape,
        hw.memory_bytes,
        reserve_bytes,
        context,
        users,
        tuple(cache_type) or DEFAULT_CACHE_TYPES,
        hw.bandwidth_bytes_s,
        parallel,
        weights_bytes=parse_size(weights, "--weights") if weights else None,
    )
    suggestions = suggest(result.shape, hw, users, result.context, reserve_bytes or None)
    if as_json:
        print(
            json.dumps(
                {
                    **plan_to_dict(result),
                    "hardware": hw.description,
                    "hardware_facts": facts,
                    "suggestions": suggestions_to_dict(suggestions),
                },
                indent=2,
            )
        )
    else:
        console.print(f"memory: {hw.description}", markup=False)
        for line in facts:
            console.print(f"  {line}", markup=False)
        console.print(render(result), markup=False)
        console.print("", markup=False)
        console.print(render_suggestions(suggestions), markup=False)


def _refuse_bare_number(flag: str, text: str | None) -> None:
    """A size without a unit is refused (`--memory 24` read as 24 bytes planned nothing): the
    user writes 24GiB or 24GB. Zero needs no unit."""
    import re

    from kvtune.errors import SpecError

    if text is None or not re.fullmatch(r"\s*[0-9]*\.?[0-9]+\s*", text):
        return
    if float(text) == 0:
        return
    raise SpecError(
        f"{flag} {text.strip()!r} has no unit: write {text.strip()}GiB (or {text.strip()}GB, {text.strip()}MiB)"
    )
