"""Per-request SLOs and slo_attainment: parsing at the edge, the share of requests meeting every
limit (failed requests are misses), the target and objective, and the spec's checks."""

from __future__ import annotations

import pytest

from kvtune.errors import SpecError, TargetError
from kvtune.objectives.metrics import RequestSample, summarize_requests
from kvtune.objectives.objective import objective
from kvtune.objectives.slo import parse_slo
from kvtune.objectives.targets import parse_target
from kvtune.study.identity import fingerprint
from kvtune.study.spec import StudySpec


def _req(ttft_s: float, tpot_s: float, tokens: int = 11, ok: bool = True) -> RequestSample:
    e2el = ttft_s + tpot_s * (tokens - 1)
    return RequestSample(send_time=0.0, ok=ok, ttft_s=ttft_s, e2el_s=e2el, output_tokens=tokens)


def test_parse_slo_units_and_ops() -> None:
    slo = parse_slo(" ttft<2s, tpot<=100ms ,e2el<1500ms")
    assert [(lim.metric, lim.op, lim.seconds) for lim in slo.limits] == [
        ("ttft", "<", 2.0),
        ("tpot", "<=", 0.1),
        ("e2el", "<", 1.5),
    ]
    assert slo.describe() == "TTFT < 2 s, TPOT <= 100 ms, E2EL < 1.5 s"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ("ttft<2", "time unit"),
        ("ttft_p95<2s", "no per-request metric"),
        ("ttft>2s", "cannot parse"),
        ("ttft<2s,ttft<1s", "twice"),
        ("itl<1s", "no per-request metric"),
    ],
)
def test_bad_slo_names_what_to_fix(text: str, needle: str) -> None:
    with pytest.raises(TargetError, match=needle):
        parse_slo(text)


def test_attainment_counts_failed_requests_as_misses() -> None:
    slo = parse_slo("ttft<1s,tpot<50ms")
    samples = [
        _req(0.5, 0.02),  # met
        _req(0.9, 0.049),  # met
        _req(1.0, 0.02),  # TTFT at the strict bound: missed
        _req(0.2, 0.08),  # TPOT missed
        _req(0.1, 0.01, ok=False),  # failed: a miss however fast
    ]
    m = summarize_requests(samples, 10.0, slo=slo)
    assert m["slo_attainment"] == pytest.approx(2 / 5)
    assert "slo_attainment" not in summarize_requests(samples, 10.0)
    assert parse_slo("ttft<=1s").attainment(samples) == pytest.approx(4 / 5)
    assert slo.attainment([]) == 0.0


def test_slo_attainment_target_and_objective() -> None:
    t = parse_target("slo_attainment>99%")
    assert (t.metric, t.op, t.threshold, t.key) == ("slo_attainment", ">", 0.99, "slo_attainment")
    assert t.constraint_key == "slo_attainment>99%"
    assert t.describe() == "SLO attainment > 99%"
    assert t.met({"slo_attainment": 1.0}) and not t.met({"slo_attainment": 0.98})
    assert not t.met({})  # no SLO measured is no SLO met
    assert parse_target("slo_attainment>=0.9").threshold == 0.9
    with pytest.raises(TargetError, match="cannot exceed 100%"):
        parse_target("slo_attainment>120%")
    o = objective("slo_attainment")
    assert o.maximize and o.key == "slo_attainment"


def test_spec_parses_slo_once_and_requires_it_for_the_metric() -> None:
    spec = StudySpec(slo="ttft<2s,tpot<100ms", targets=["slo_attainment>99%"]).validate()
    assert spec.slo is not None and spec.slo.limits[0].seconds == 2.0
    assert spec.to_dict()["slo"] == "ttft<2s,tpot<100ms"
    assert StudySpec.from_dict(spec.to_dict()).slo == spec.slo
    assert fingerprint(spec) != fingerprint(StudySpec(slo="ttft<1s", targets=["slo_attainment>99%"]))
    assert fingerprint(StudySpec()) == fingerprint(StudySpec(slo=None))
    with pytest.raises(SpecError, match="--slo"):
        StudySpec(targets=["slo_attainment>99%"]).validate()
    with pytest.raises(SpecError, match="--slo"):
        StudySpec(objective="slo_attainment").validate()
    with pytest.raises(SpecError, match="time unit"):
        StudySpec(slo="ttft<2")
