"""`kvtune plan`: the KV-cache arithmetic for a model on this (or a given) machine."""

from __future__ import annotations

from typing import Optional

import typer

from kvtune.cli import app, console


@app.command()
def plan(
    model: Optional[str] = typer.Option(None, help="HF model folder (config.json) or GGUF file to read the shape from."),
    layers: Optional[int] = typer.Option(None, help="Transformer layers (instead of --model)."),
    heads: Optional[int] = typer.Option(None, help="Attention (query) heads."),
    kv_heads: Optional[int] = typer.Option(None, "--kv-heads", help="KV heads (grouped-query attention)."),
    head_dim: Optional[int] = typer.Option(None, "--head-dim", help="Head dimension."),
    weights: Optional[str] = typer.Option(None, help="Weights size, e.g. 15GiB (default: the model files on disk)."),
    memory: Optional[str] = typer.Option(None, help="Memory to plan for, e.g. 24GiB (default: all GPUs via NVML, else RAM)."),
    reserve: str = typer.Option("0", help="Memory kept back for activations, runtime, fragmentation, e.g. 2GiB."),
    context: Optional[int] = typer.Option(None, help="Tokens per sequence (default: the model's maximum)."),
    users: int = typer.Option(1, help="Concurrent sequences for the totals."),
    parallel: Optional[int] = typer.Option(None, help="llama-server --parallel: show the per-slot context of --ctx-size = context."),
    bandwidth: Optional[str] = typer.Option(None, help="Memory bandwidth, e.g. 1TB/s (default: known GPU models)."),
    cache_type: list[str] = typer.Option([], "--cache-type", help="Cache types to show (default f16, fp8, q8_0, q4_0)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """KV-cache arithmetic: bytes per token, what fits, tokens x users, decode ceiling."""
    import json

    from kvtune.errors import SpecError
    from kvtune.planner import DEFAULT_CACHE_TYPES, ModelShape, make_plan, parse_bandwidth, parse_size
    from kvtune.planner.gpus import detect_hardware
    from kvtune.planner.render import plan_to_dict, render
    from kvtune.planner.shape import shape_from_path

    if model:
        shape = shape_from_path(model)
    else:
        missing = [n for n, v in (("--layers", layers), ("--kv-heads", kv_heads), ("--head-dim", head_dim)) if v is None]
        if missing:
            raise SpecError(f"pass --model PATH, or the shape: missing {', '.join(missing)}")
        for name, v in (("--layers", layers), ("--kv-heads", kv_heads), ("--head-dim", head_dim), ("--heads", heads)):
            if v is not None and v <= 0:
                raise SpecError(f"{name} must be positive, got {v}")
        shape = ModelShape(layers=layers, attention_heads=heads or kv_heads, kv_heads=kv_heads, head_dim=head_dim)
    hw = detect_hardware(parse_size(memory, "--memory") if memory else None,
                         parse_bandwidth(bandwidth, "--bandwidth") if bandwidth else None)
    result = make_plan(shape, hw.memory_bytes, parse_size(reserve, "--reserve"), context, users,
                       tuple(cache_type) or DEFAULT_CACHE_TYPES, hw.bandwidth_bytes_s, parallel,
                       weights_bytes=parse_size(weights, "--weights") if weights else None)
    if as_json:
        print(json.dumps({**plan_to_dict(result), "hardware": hw.description}, indent=2))
    else:
        console.print(f"memory: {hw.description}", markup=False)
        console.print(render(result), markup=False)
