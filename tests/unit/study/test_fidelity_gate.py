"""What the fidelity gate did, read from trial outcomes (study/fidelity_gate.py): the gate's state
(on, off, not needed), the refusals with their gain and figures, the floor from the defaults'
fresh runs, and the gate read back from the constraints of a results.json."""

from __future__ import annotations

from kvtune.knobs import Candidate
from kvtune.objectives.targets import parse_targets
from kvtune.study.fidelity_gate import NOT_NEEDED, OFF, ON, gate_report, recorded_gate
from kvtune.study.outcome import TrialOutcome

GATE = "kld<0.01"


def trial(n: int, flags: dict, tput: float, kld: float | None, role: str, baseline: bool = False) -> TrialOutcome:
    o = TrialOutcome(n, Candidate(flags=flags), [], {}, baseline=baseline)
    o.metrics = {"output_throughput": tput}
    if kld is not None:
        o.fidelity = {"role": role, "kld": kld, "kld_upper": kld * 1.5, "agreement": 1 - kld * 5, "identical": 0.5,
                      "prompts": 8, "changed": [k for k in flags if k.startswith("cache")]}  # fmt: skip
        o.metrics["kld_upper"] = kld * 1.5
    o.constraints = {GATE: (kld or 0) * 1.5 / 0.01 - 1, "server_ran": -1.0}
    return o


def study() -> list[TrialOutcome]:
    base = trial(0, {}, 100.0, 0.0, "reference", baseline=True)
    base.confirmation = {"runs": [{"fidelity": {"role": "floor", "kld": 0.0, "kld_upper": 0.0, "agreement": 1.0}}]}
    return [
        base,
        trial(1, {"cache-type-k": "q4_0", "cache-type-v": "q4_0"}, 109.0, 0.06, "probed"),
        trial(2, {"cache-type-k": "q8_0"}, 104.0, 0.004, "probed"),
        trial(3, {"parallel": 4}, 120.0, 0.0, "not probed"),
    ]


def test_the_report_names_the_refused_config_with_its_gain_and_its_agreement():
    r = gate_report(study(), parse_targets([GATE]), {}, "output_throughput")
    assert (r.state, r.probed, [x.outcome.number for x in r.refused]) == (ON, 2, [1])
    assert r.floor is not None and r.floor.agreement == 1.0
    lines = r.lines()
    assert lines[0].startswith("fidelity gate: kld<0.01") and "2 config(s) probed, 1 refused" in lines[0]
    assert "trial 1 (cache-type-k=q4_0, cache-type-v=q4_0): +9% output throughput, 70% of tokens agree" in lines[1]
    assert "(floor 100%; KLD 0.06, 95% upper bound 0.09): refused" in lines[1]
    d = r.to_dict()
    assert d["refused"][0]["trial"] == 1 and abs(d["refused"][0]["gain"] - 0.09) < 1e-9


def test_the_gate_is_read_back_from_the_constraints_of_a_stored_study():
    outcomes = study()
    assert recorded_gate(outcomes).text == GATE
    assert gate_report(outcomes, None, {}, "output_throughput").state == ON


def test_off_and_not_needed_are_told_apart():
    plain = [trial(0, {}, 100.0, None, "", baseline=True)]
    plain[0].constraints = {"server_ran": -1.0}
    assert gate_report(plain, [], {"fidelity_gate": False}, "output_throughput").state == OFF
    assert gate_report(plain, [], {}, "output_throughput").state == NOT_NEEDED
    assert "judged on speed alone" in gate_report(plain, [], {"fidelity_gate": False}, "x").lines()[0]
