"""A Plan as text for the terminal and as a dict for `--json`.

Kept apart from the arithmetic so the numbers can be tested without parsing prose and the prose
can change without touching the numbers (the suggested starting flags too). Text is plain fixed-width columns (no rich) so it reads
the same in a terminal, a log or a CI page; the dict carries raw bytes next to GiB so scripts
need not undo any rounding.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Iterable

from kvtune.planner.compose import PlanAndFlags
from kvtune.planner.kv import Plan
from kvtune.planner.suggest import Reserve, Suggestion

GIB = 2**30


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= scale * (0.1 if unit == "GiB" else 1):
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def _unit(values: Iterable[float | None]) -> tuple[str, int]:
    """One unit for a whole column, so rows compare at a glance."""
    top = max((abs(v) for v in values if v is not None), default=0)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if top >= scale:
            return unit, scale
    return "B", 1


def _in(n: float, unit: tuple[str, int]) -> str:
    return f"{n:.0f} B" if unit[1] == 1 else f"{n / unit[1]:.2f} {unit[0]}"


def fmt_rate(bw: float) -> str:
    return f"{bw / 1e12:.2f} TB/s" if bw >= 1e12 else f"{bw / 1e9:.1f} GB/s"


def fmt_count(n: int | None) -> str:
    if not n:
        return "?"
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)


def _columns(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
        for r in rows
    ]


def render(plan: Plan, reserve: Reserve | None = None, ceiling_basis: str = "") -> str:
    """The plan's text; `reserve` says what the reserve is per (and that the suggested flags
    hold back the same), `ceiling_basis` which GPUs the decode ceiling's bandwidth is."""
    s = plan.shape
    out = [
        f"model: {s.name or '(from flags)'}: {s.layers} KV layers, {s.attention_heads} heads, "
        f"{s.kv_heads} KV heads, head dim {s.head_dim}"
    ]
    if s.is_mla:
        out.append(f"  MLA: one latent of {s.kv_lora_rank} + {s.qk_rope_head_dim} (rope) per layer, no V")
    if s.sliding_window_layers:
        out.append(f"  sliding window: {s.sliding_window} tokens on {s.sliding_window_layers} of {s.layers} layers")
    if s.moe_experts_total:
        out.append(
            f"  MoE: {s.moe_experts_total} experts, {s.moe_experts_active or '?'} active per token; "
            f"params {fmt_count(s.params_total)} total, {fmt_count(s.params_active)} active"
        )
    w = f"weights {fmt_bytes(plan.weights_bytes)}"
    if plan.weights_active_bytes is not None and plan.weights_active_bytes != plan.weights_bytes:
        w += f" ({fmt_bytes(plan.weights_active_bytes)} read per token)"
    out.append(w)
    if plan.memory_bytes is not None:
        out.append(
            f"memory {fmt_bytes(plan.memory_bytes)} - weights {fmt_bytes(plan.weights_bytes or 0)} - "
            f"reserve {fmt_bytes(plan.reserve_bytes)} = {fmt_bytes(plan.free_for_kv_bytes)} for the KV cache"
        )
        if reserve is not None:
            out.append(f"  {reserve.describe()}")
    out.append(f"context {plan.context} tokens, {plan.users} user(s)")
    out.append("")
    rows = [["cache", "bytes/elem", "per token", "per sequence", f"x {plan.users} users", "seqs fit", "decode tok/s"]]
    u_tok, u_seq, u_all = (
        _unit([getattr(c, k) for c in plan.caches])
        for k in ("bytes_per_token", "bytes_per_sequence", "bytes_for_users")
    )
    for c in plan.caches:
        rows.append(
            [
                c.cache_type,
                f"{c.bytes_per_element:g}",
                _in(c.bytes_per_token, u_tok),
                _in(c.bytes_per_sequence, u_seq),
                _in(c.bytes_for_users, u_all),
                "?" if c.sequences_fit is None else str(c.sequences_fit),
                "?" if c.decode_ceiling_tok_s is None else f"{c.decode_ceiling_tok_s:.1f}",
            ]
        )
    out += _columns(rows)
    out += ["", "KV cache by tokens x users:"]
    rows = [["tokens", "users", *plan.cache_types]]
    u_tab = _unit([b for r in plan.table for b in r.bytes])
    rows += [[str(r.tokens), str(r.users), *(_in(b, u_tab) for b in r.bytes)] for r in plan.table]
    out += _columns(rows)
    out.append("")
    if plan.slots:
        sl = plan.slots
        pad = "" if sl.per_slot_llama == sl.per_slot else f" (llama.cpp pads it to {sl.per_slot_llama})"
        out.append(
            f"llama-server --ctx-size {sl.ctx_size} --parallel {sl.parallel}: {sl.per_slot} tokens per "
            f"slot{pad}; --ctx-size {sl.ctx_size_for_full_context} gives each slot {sl.ctx_size}"
        )
    if plan.bandwidth_bytes_s:
        bw = fmt_rate(plan.bandwidth_bytes_s) + (f" ({ceiling_basis})" if ceiling_basis else "")
        if plan.decode_ceiling_weights_only is not None:
            out.append(
                f"decode ceiling, one stream at {bw}: {plan.decode_ceiling_weights_only:.1f} tok/s "
                f"(weights only); the decode tok/s column also reads one full-context sequence of KV"
            )
        else:
            out.append(f"decode ceiling at {bw}: weights size unknown (pass --weights)")
    else:
        out.append("decode ceiling: bandwidth unknown (pass --bandwidth, e.g. 1TB/s)")
    out += [f"note: {n}" for n in plan.notes]
    return "\n".join(out)


def _gib(n: float | None) -> float | None:
    return None if n is None else round(n / GIB, 4)


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    """JSON-ready dict: raw bytes and GiB side by side."""
    return {
        "model": asdict(plan.shape),
        "context": plan.context,
        "users": plan.users,
        "memory_bytes": plan.memory_bytes,
        "memory_gib": _gib(plan.memory_bytes),
        "reserve_bytes": plan.reserve_bytes,
        "reserve_gib": _gib(plan.reserve_bytes),
        "weights_bytes": plan.weights_bytes,
        "weights_gib": _gib(plan.weights_bytes),
        "weights_active_bytes": plan.weights_active_bytes,
        "weights_active_gib": _gib(plan.weights_active_bytes),
        "free_for_kv_bytes": plan.free_for_kv_bytes,
        "free_for_kv_gib": _gib(plan.free_for_kv_bytes),
        "bandwidth_bytes_s": plan.bandwidth_bytes_s,
        "decode_ceiling_weights_only_tok_s": plan.decode_ceiling_weights_only,
        "caches": [
            {
                **asdict(c),
                "kib_per_token": c.bytes_per_token / 1024,
                "gib_per_sequence": _gib(c.bytes_per_sequence),
                "gib_for_users": _gib(c.bytes_for_users),
            }
            for c in plan.caches
        ],
        "table": [
            {
                "tokens": r.tokens,
                "users": r.users,
                "bytes": dict(zip(plan.cache_types, r.bytes)),
                "gib": {ct: _gib(b) for ct, b in zip(plan.cache_types, r.bytes)},
            }
            for r in plan.table
        ],
        "slots": None if plan.slots is None else asdict(plan.slots),
        "notes": list(plan.notes),
    }


def render_suggestions(suggestions: tuple[Suggestion, ...] | list[Suggestion]) -> str:
    """The suggested starting flags, one block per backend: the flags as a command line would
    carry them, the memory they were sized for, then the notes."""
    out = ["suggested starting flags (what `kvtune run` can measure first):"]
    for sg in suggestions:
        head = f"  {sg.backend}: {' '.join(sg.argv())}"
        out.append(head + ("" if sg.fits else "   (does not fit: see below)"))
        out += [f"    {n}" for n in ((sg.budget,) if sg.budget else ()) + sg.notes]
    return "\n".join(out)


def suggestions_to_dict(suggestions: tuple[Suggestion, ...] | list[Suggestion]) -> list[dict[str, Any]]:
    return [
        {
            "backend": sg.backend,
            "flags": dict(sg.flags),
            "argv": sg.argv(),
            "fits": sg.fits,
            "kv_room_bytes": sg.kv_room_bytes,
            "budget": sg.budget,
            "notes": list(sg.notes),
        }
        for sg in suggestions
    ]


def render_composed(pf: PlanAndFlags) -> str:
    """The table and the suggested flags, with the reserve and the ceiling's GPUs stated once."""
    return "\n".join([render(pf.plan, pf.reserve, pf.ceiling_basis()), "", render_suggestions(pf.suggestions)])


def composed_to_dict(pf: PlanAndFlags) -> dict[str, Any]:
    """`plan_to_dict` with the reserve's basis, the ceiling's GPUs and the suggestions."""
    r = pf.reserve
    return {
        **plan_to_dict(pf.plan),
        "reserve": {
            "per_device_bytes": r.per_device,
            "devices": r.devices,
            "on_gpu": r.on_gpu,
            "total_bytes": r.total,
            "given": r.given,
        },
        "decode_ceiling_gpus": pf.ceiling_gpus,
        "decode_ceiling_basis": pf.ceiling_basis(),
        "hardware": pf.hardware.description,
        "hardware_bandwidth_bytes_s": pf.hardware.bandwidth_bytes_s,  # all GPUs; the ceiling's is bandwidth_bytes_s
        "suggestions": suggestions_to_dict(pf.suggestions),
    }
