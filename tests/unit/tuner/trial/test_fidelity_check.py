"""The fidelity gate on a trial (tuner/trial/fidelity_check.py) against the fake server's model
over its httpx transport: the baseline records the reference, a lossless config is not probed,
a config whose numerics drift is compared, a failed probe refuses."""

from __future__ import annotations

import math
from typing import Any, Mapping

import pytest

from kvtune.bench.fidelity_probe import ProbeFailed, ProbePlan, ask_answers
from kvtune.knobs import Candidate
from kvtune.launchers.llama_server import LlamaServerLauncher
from kvtune.objectives.targets import parse_targets
from kvtune.study.outcome import TrialOutcome
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.testing.mock_openai import MockOpenAI
from kvtune.testing.virtual_time import VirtualClock
from kvtune.tuner.trial.fidelity_check import (
    FLOOR,
    NOT_PROBED,
    PROBED,
    REFERENCE,
    FidelityCheck,
    fidelity_line,
    fidelity_metrics,
    gated,
    probe_body,
)

PLAN = ProbePlan(prompts=tuple(f"question {i}" for i in range(6)), max_tokens=16)


def asker(drift_of: Mapping[str, float]):
    """The probe on a fake server whose model drifts as the config asks (by the port's URL)."""

    def ask(base_url: str, model: str, plan: ProbePlan, extra: Mapping[str, Any]):
        fake = MockOpenAI(answer_drift=drift_of.get(base_url, 0.0), ttft_s=0.0, itl_s=0.0)
        return ask_answers(base_url, model, plan, extra, transport=fake.transport())

    return ask


def outcome(number: int, flags: dict[str, Any], baseline: bool = False) -> TrialOutcome:
    return TrialOutcome(number=number, candidate=Candidate(flags=flags), argv=[], env={}, baseline=baseline)


def check(drift_of: Mapping[str, float]) -> FidelityCheck:
    return FidelityCheck(FakeLauncher(), PLAN, asker(drift_of), VirtualClock())


def test_the_baseline_records_the_reference_answers_and_sits_at_zero():
    base = outcome(0, {}, baseline=True)
    base.fidelity = check({}).probe("http://base", base, None)
    assert base.fidelity["role"] == REFERENCE and len(base.fidelity["reference"]) == len(PLAN.prompts)
    assert fidelity_metrics(base.fidelity)["kld_upper"] == 0.0
    assert "recorded the defaults' answers" in fidelity_line(base.fidelity)


def reference() -> TrialOutcome:
    base = outcome(0, {}, baseline=True)
    base.fidelity = check({}).probe("http://base", base, None)
    return base


def test_a_config_that_changes_nothing_numeric_is_not_probed():
    calls = []

    def ask(*args):
        calls.append(args)
        raise AssertionError("no probe for a lossless config")

    rec = FidelityCheck(FakeLauncher(), PLAN, ask, VirtualClock()).probe(
        "http://x", outcome(1, {"speed": 4}), reference()
    )
    assert rec["role"] == NOT_PROBED and not calls and fidelity_metrics(rec)["kld_upper"] == 0.0


def test_identical_numerics_pass_a_drifting_config_is_refused_by_the_default_gate():
    base = reference()
    gate = [t for t in parse_targets(["kld<0.01"])]
    same = check({}).probe("http://a", outcome(1, {"answer-drift": 0.0001}), base)
    assert same["role"] == PROBED and same["changed"] == ["answer-drift"]
    assert all(t.met(fidelity_metrics(same)) for t in gate)
    drifted = check({"http://b": 5.0}).probe("http://b", outcome(2, {"answer-drift": 5}), base)
    assert drifted["kld"] > 0.1 and drifted["agreement"] < 0.6
    assert not all(t.met(fidelity_metrics(drifted)) for t in gate)
    assert "answer-drift" in fidelity_line(drifted)


def test_the_defaults_on_a_fresh_server_are_the_floor():
    base = reference()
    again = check({}).probe("http://fresh", outcome(0, {}, baseline=True), base)
    assert again["role"] == FLOOR and again["agreement"] == 1.0
    assert again["kld_upper"] == pytest.approx(0.0, abs=1e-9)  # the reference is stored to 5 decimals
    assert fidelity_line(again).startswith("fidelity floor")


def test_a_failed_probe_or_a_missing_reference_refuses_the_config():
    def broken(*args):
        raise ProbeFailed("the server answered without log-probabilities")

    rec = FidelityCheck(FakeLauncher(), PLAN, broken, VirtualClock()).probe(
        "http://x", outcome(1, {"answer-drift": 1}), reference()
    )
    assert math.isinf(fidelity_metrics(rec)["kld_upper"]) and "without log-probabilities" in rec["failed"]
    no_ref = outcome(0, {}, baseline=True)  # a baseline whose probe failed
    no_ref.fidelity = {"role": REFERENCE, "failed": "x"}
    rec = check({}).probe("http://x", outcome(1, {"answer-drift": 1}), no_ref)
    assert math.isinf(fidelity_metrics(rec)["kld_upper"]) and "no reference" in rec["failed"]
    assert fidelity_line(rec).startswith("fidelity not measured")


def test_only_a_kld_target_turns_the_probe_on():
    assert gated(parse_targets(["ttft<1s", "kld<0.1"])) and not gated(parse_targets(["ttft<1s"]))


def test_the_probe_asks_greedily_with_top_k_one_prompt_at_a_time():
    fake = MockOpenAI(ttft_s=0.0, itl_s=0.0)
    body = probe_body(LlamaServerLauncher(binary="/x/llama-server", model_path="m.gguf"))
    assert body == {"cache_prompt": True}  # the chat template's opening is computed once
    answers = ask_answers("http://fake", "m", PLAN, body, transport=fake.transport())
    assert len(answers) == len(PLAN.prompts) and all(len(a.tokens) == PLAN.max_tokens for a in answers)
    sent = fake.received[0]
    assert (sent["temperature"], sent["logprobs"], sent["top_logprobs"], sent["cache_prompt"]) == (0.0, True, 5, True)
    assert PLAN.concurrency == 1 and [r["messages"][0]["content"] for r in fake.received] == list(PLAN.prompts)
