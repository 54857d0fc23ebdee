"""What a million tokens cost: a price per hour turned into USD per 1M tokens, per trial. Pure.

Every operator's question ends in money, and the answer is arithmetic on what kvtune measures:
at ``P`` USD per hour and a sustained ``T`` output tokens per second, one million output tokens
take ``1e6 / T`` seconds, so they cost ``P / (T * 3600) * 1e6`` USD. The same with the total
token throughput (prompt + output) gives the cost per 1M total tokens. The price is for the
whole machine (``--price-per-hour``) or per GPU (``--price-per-gpu-hour``, times the GPUs a trial
uses). A trial that produced no tokens has no cost figure (never a made-up infinity).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvtune.errors import SpecError

SECONDS_PER_HOUR = 3600.0
MILLION = 1e6
# The metrics keys a priced trial carries.
USD_PER_HOUR = "usd_per_hour"
COST_PER_MTOK = "cost_per_mtok"  # USD per 1M output tokens (the objective)
COST_PER_MTOK_TOTAL = "cost_per_mtok_total"  # USD per 1M prompt + output tokens


@dataclass(frozen=True)
class Price:
    """USD per hour, for the whole machine or (``per_gpu``) for each GPU a trial uses."""

    usd: float
    per_gpu: bool = False

    def hourly(self, gpus: int) -> float:
        """USD per hour of one trial's server. A per-GPU price needs at least one GPU."""
        if not self.per_gpu:
            return self.usd
        if gpus < 1:
            raise SpecError(
                "price_per_gpu_hour needs GPUs, and this trial uses none: "
                "give price_per_hour (the whole machine) instead"
            )
        return self.usd * gpus

    def describe(self) -> str:
        return f"${self.usd:g}/GPU-hour" if self.per_gpu else f"${self.usd:g}/hour"


def parse_price(raw: object, flag: str) -> float:
    """A positive, finite price from a flag or a study file (a string or a number)."""
    if isinstance(raw, bool):
        raise SpecError(f"{flag} must be a price in USD per hour, e.g. 2.50, got {raw!r}")
    try:
        value = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise SpecError(f"{flag} must be a price in USD per hour, e.g. 2.50, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise SpecError(f"{flag} must be a positive price in USD per hour, got {raw!r}")
    return value


def price_of(per_hour: object = None, per_gpu_hour: object = None) -> Price | None:
    """The study's price from its two settings (at most one may be given); None: no price."""
    if per_hour is not None and per_gpu_hour is not None:
        raise SpecError(
            "give one price: price_per_hour (the whole machine) or price_per_gpu_hour (per GPU a trial uses), not both"
        )
    if per_hour is not None:
        return Price(parse_price(per_hour, "price_per_hour"))
    if per_gpu_hour is not None:
        return Price(parse_price(per_gpu_hour, "price_per_gpu_hour"), per_gpu=True)
    return None


def cost_per_mtok(usd_per_hour: float, tokens_per_s: float | None) -> float | None:
    """USD per 1M tokens at `tokens_per_s`; None when nothing was produced."""
    if tokens_per_s is None or not math.isfinite(tokens_per_s) or tokens_per_s <= 0:
        return None
    return usd_per_hour / (tokens_per_s * SECONDS_PER_HOUR) * MILLION


def cost_metrics(metrics: dict[str, float], usd_per_hour: float) -> dict[str, float]:
    """The cost keys for one trial's metrics (those with no figure are left out)."""
    out = {USD_PER_HOUR: usd_per_hour}
    for key, throughput in ((COST_PER_MTOK, "output_throughput"), (COST_PER_MTOK_TOTAL, "total_token_throughput")):
        value = cost_per_mtok(usd_per_hour, metrics.get(throughput))
        if value is not None:
            out[key] = value
    return out


def format_usd(value: float | None) -> str:
    """``$0.1234`` with four significant figures (costs per 1M tokens span 1e-3 .. 1e3)."""
    return "n/a" if value is None or not math.isfinite(value) else f"${value:.4g}"
