"""How many GPUs one vLLM server uses: its world of tensor x pipeline x data parallel ranks.

vLLM runs one rank per GPU and takes the first ``tp * pp * dp`` GPUs it sees, so a trial with
``--tensor-parallel-size 1`` on an 8-GPU host uses one of them, and that one is what its price
per GPU-hour bills and its energy meter reads. A size may be a tuned knob (the candidate's
flags) or fixed in the study's extra arguments; the CPU build runs one rank on no GPU at all.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

PARALLEL_FLAGS = ("tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size")
_SHORT = {"-tp": "tensor-parallel-size", "-pp": "pipeline-parallel-size", "-dp": "data-parallel-size"}


def _given(extra_args: Sequence[str]) -> dict[str, str]:
    """The parallel sizes an argv gives (``--name N``, ``--name=N``, vLLM's ``-tp N``)."""
    out: dict[str, str] = {}
    for i, arg in enumerate(extra_args):
        name, eq, value = arg.partition("=")
        key = _SHORT.get(name) or (name[2:] if name.startswith("--") else None)
        if key in PARALLEL_FLAGS:
            if eq:
                out[key] = value
            elif i + 1 < len(extra_args):
                out[key] = extra_args[i + 1]
    return out


def world_size(flags: Mapping[str, Any], extra_args: Sequence[str] = ()) -> int:
    """The GPUs a vLLM GPU server with these flags uses: the product of its parallel sizes (each
    1 unless given; a tuned knob wins over a fixed extra argument). A size that is not a whole
    number counts as 1 (precheck refuses it before anything is billed)."""
    sizes = {**_given(extra_args), **{k: flags[k] for k in PARALLEL_FLAGS if k in flags}}
    total = 1
    for name in PARALLEL_FLAGS:
        try:
            total *= max(int(sizes.get(name, 1)), 1)
        except (TypeError, ValueError):
            pass
    return total
