"""What a benchmark run is given and gives back (bench/options.py): the API key from the flag or
the environment, the per-request goodput SLO check, and a
`BenchRun`'s own counts. Request samples built in the test: no server."""

from __future__ import annotations

import json

import pytest

from kvtune.bench.options import BenchRun, resolve_api_key, slo_goodput
from kvtune.errors import SpecError
from kvtune.objectives.metrics import RequestSample


def test_resolve_api_key_prefers_the_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """(moved from tests/unit/bench/test_client.py)"""
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    assert resolve_api_key("flag") == "flag" and resolve_api_key(None) == "from-env"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert resolve_api_key(None) is None
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert resolve_api_key(None) is None  # an empty variable is no key


def answer(ttft_s: float, e2el_s: float, tokens: int, ok: bool = True) -> RequestSample:
    return RequestSample(send_time=0.0, ok=ok, ttft_s=ttft_s, e2el_s=e2el_s, output_tokens=tokens)


def test_goodput_needs_every_slo_met_in_milliseconds():
    met = slo_goodput({"ttft": 100, "tpot": 10})
    assert met(answer(0.1, 0.13, 4))  # TTFT 100 ms, TPOT (130 - 100) / 3 = 10 ms: both at the limit
    assert not met(answer(0.101, 0.13, 4))
    assert not met(answer(0.05, 0.2, 4))  # TPOT 50 ms


def test_a_failed_request_never_meets_the_goodput_and_a_one_token_answer_has_no_tpot():
    met = slo_goodput({"tpot": 1, "e2el": 500})
    assert not met(answer(0.01, 0.02, 4, ok=False))
    assert met(answer(0.3, 0.4, 1))  # TPOT of one token counts as 0
    assert not met(answer(0.3, 0.6, 1))  # E2EL 600 ms


def test_an_unknown_slo_is_refused():
    with pytest.raises(SpecError, match=r"unknown goodput SLO\(s\) \['latency'\]"):
        slo_goodput({"latency": 1})


def test_a_run_counts_what_it_observed_and_its_plain_data_keeps_the_early_stop():
    samples = [answer(0.1, 0.2, 4), answer(0.1, 0.3, 4)]
    run = BenchRun(samples, [answer(0.5, 0.6, 4)], 2.0, {"num_requests": 2.0}, stopped="why", planned=8, sent=3)
    assert run.observed == 2
    d = run.to_dict()
    assert (d["stopped"], d["planned"], d["sent"], d["duration_s"]) == ("why", 8, 3, 2.0)
    assert len(d["samples"]) == 2 and len(d["warmup_samples"]) == 1
    assert json.loads(json.dumps(d))["samples"][0]["tpot_s"] == pytest.approx(0.1 / 3)  # JSON-ready
