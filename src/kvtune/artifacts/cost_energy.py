"""Cost and energy of the best config and the baseline, as the summary, results.json and the
report show them. Pure: reads the figures the tuner stored in each trial's metrics
(objectives/cost.py, energy.py) and says them in words and rows.

Cost is shown only when the study has a price. Energy is always spoken of: as measured figures,
or as "energy: not measurable on this machine" when no trial carries a reading, never estimated.
"""

from __future__ import annotations

from kvtune.energy import AVG_WATTS, JOULES_PER_OUTPUT_TOKEN, NOT_MEASURABLE, describe
from kvtune.objectives.cost import COST_PER_MTOK, COST_PER_MTOK_TOTAL, USD_PER_HOUR, format_usd, price_of
from kvtune.study.outcome import TrialOutcome

# (metrics key, label) in the order the report's table shows them.
ROWS = (
    (COST_PER_MTOK, "USD per 1M output tokens"),
    (COST_PER_MTOK_TOTAL, "USD per 1M total tokens"),
    (JOULES_PER_OUTPUT_TOKEN, "joules per output token"),
    (AVG_WATTS, "average watts"),
)


def price_text(spec: dict) -> str | None:
    """``$2.5/hour`` or ``$1.2/GPU-hour`` from results.json's spec; None without a price."""
    try:
        price = price_of(spec.get("price_per_hour"), spec.get("price_per_gpu_hour"))
    except Exception:  # a hand-edited results.json: no price shown rather than a traceback
        return None
    return price.describe() if price else None


def _cost(m: dict) -> str:
    return (
        f"{format_usd(m.get(COST_PER_MTOK))} per 1M output tokens "
        f"({format_usd(m.get(COST_PER_MTOK_TOTAL))} per 1M total)"
    )


def lines(best: TrialOutcome | None, baseline: TrialOutcome | None, spec: dict) -> list[str]:
    """The summary's cost and energy lines for the best trial and the baseline."""
    out: list[str] = []
    pair = [(label, o.metrics) for label, o in (("best", best), ("baseline", baseline)) if o is not None and o.metrics]
    price = price_text(spec)
    if price and pair:
        at = next((m.get(USD_PER_HOUR) for _, m in pair if m.get(USD_PER_HOUR)), None)
        server = f", ${at:g}/hour for a trial's server" if at and "GPU" in price else ""
        out.append(f"cost at {price}{server}: " + "; ".join(f"{label} {_cost(m)}" for label, m in pair))
    metered = [(label, m) for label, m in pair if m.get(AVG_WATTS) is not None]
    if not metered:
        out.append(NOT_MEASURABLE)
    else:
        out.append("energy: " + "; ".join(f"{label} {describe(m).removeprefix('energy: ')}" for label, m in metered))
    return out


def payload(best: TrialOutcome | None, baseline: TrialOutcome | None, spec: dict) -> dict:
    """results.json's "cost_energy": the price and each side's figures (None: not measured)."""

    def figures(o: TrialOutcome | None) -> dict | None:
        if o is None or not o.metrics:
            return None
        return {key: o.metrics.get(key) for key, _ in ROWS}

    return {
        "price": price_text(spec),
        "best": figures(best),
        "baseline": figures(baseline),
        "summary": lines(best, baseline, spec),
    }
