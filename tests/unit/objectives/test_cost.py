"""Cost per 1M tokens at hand-computed values, and the price's validation."""

from __future__ import annotations

import math

import pytest

from kvtune.errors import SpecError
from kvtune.kinds import Direction
from kvtune.objectives.cost import (
    COST_PER_MTOK,
    COST_PER_MTOK_TOTAL,
    USD_PER_HOUR,
    Price,
    cost_metrics,
    cost_per_mtok,
    format_usd,
    parse_price,
    price_of,
)
from kvtune.objectives.objective import objective
from kvtune.study.identity import fingerprint
from kvtune.study.spec import StudySpec


def test_cost_per_million_tokens_at_hand_computed_values() -> None:
    # $2.50/h at 100 tok/s: 1e6 tokens take 10,000 s = 2.777.. h -> $6.944..
    assert cost_per_mtok(2.5, 100.0) == pytest.approx(6.944444, rel=1e-6)
    # $3.60/h at 1000 tok/s: 1e6 tokens take 1000 s = 1/3.6 h -> exactly $1
    assert cost_per_mtok(3.6, 1000.0) == pytest.approx(1.0)
    assert cost_per_mtok(2.5, 0.0) is None and cost_per_mtok(2.5, None) is None
    assert cost_per_mtok(2.5, math.nan) is None


def test_cost_metrics_output_and_total_tokens() -> None:
    m = {"output_throughput": 50.0, "total_token_throughput": 200.0}
    out = cost_metrics(m, 1.8)
    # 1.8 / (50 * 3600) * 1e6 = 10.0 ; 1.8 / (200 * 3600) * 1e6 = 2.5
    assert out == {USD_PER_HOUR: 1.8, COST_PER_MTOK: pytest.approx(10.0), COST_PER_MTOK_TOTAL: pytest.approx(2.5)}
    assert cost_metrics({"output_throughput": 0.0}, 1.8) == {USD_PER_HOUR: 1.8}


def test_a_per_gpu_price_counts_the_trials_gpus() -> None:
    p = Price(1.2, per_gpu=True)
    assert p.hourly(4) == pytest.approx(4.8)
    # 4.8 $/h at 250 tok/s: 4.8 / 900,000 * 1e6 = 5.333..
    assert cost_per_mtok(p.hourly(4), 250.0) == pytest.approx(16 / 3)
    assert Price(2.5).hourly(0) == 2.5 and Price(2.5).describe() == "$2.5/hour"
    with pytest.raises(SpecError, match="needs GPUs"):
        p.hourly(0)


@pytest.mark.parametrize("raw", ["-1", "0", "abc", "nan", "inf", True, None])
def test_bad_prices_are_refused(raw) -> None:
    with pytest.raises(SpecError, match="--price-per-hour must be"):
        parse_price(raw, "--price-per-hour")


def test_one_price_at_most() -> None:
    assert price_of() is None
    assert price_of("2.50") == Price(2.5)
    assert price_of(per_gpu_hour=3) == Price(3.0, per_gpu=True)
    with pytest.raises(SpecError, match="give one price"):
        price_of(2.5, 1.0)


def test_the_cost_objective_is_minimized_and_needs_a_price() -> None:
    assert objective("cost_per_mtok") == (COST_PER_MTOK, COST_PER_MTOK, Direction.MINIMIZE)
    with pytest.raises(SpecError, match="needs a price"):
        StudySpec(objective="cost_per_mtok").validate()
    spec = StudySpec(objective="cost_per_mtok", price_per_hour=2.5).validate()
    assert spec.price == Price(2.5)
    with pytest.raises(SpecError, match="positive"):
        StudySpec(price_per_gpu_hour=-2).validate()


def test_a_price_changes_the_fingerprint_only_when_given() -> None:
    plain = fingerprint(StudySpec())
    assert fingerprint(StudySpec(price_per_hour=None)) == plain
    assert fingerprint(StudySpec(price_per_hour=2.5)) != plain


def test_usd_format() -> None:
    assert format_usd(6.944444) == "$6.944" and format_usd(None) == "n/a"


def test_the_study_file_takes_a_price(tmp_path) -> None:
    from kvtune.study.spec import build_spec
    from kvtune.study.study_file import load_study_file

    f = tmp_path / "s.yaml"
    f.write_text("price_per_hour: 2.5\nobjective: cost_per_mtok\n")
    assert build_spec(load_study_file(f)).price == Price(2.5)
    f.write_text("price_per_hour: cheap\n")
    with pytest.raises(SpecError, match="price_per_hour must be a price"):
        load_study_file(f)
