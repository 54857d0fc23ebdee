"""The study overview: best, baseline, Pareto set, failures by kind, and pick_trial.

Fixtures are real results.json files from small llama-server studies (data/), written before
the failure kind was recorded: results_small (4 trials, all feasible) and results_misses (12 trials
against ttft<700ms: 8 misses, 1 duplicate). A multi-objective study run with the fake launcher
checks that `kvtune show` names the very Pareto set the tuner does.

Here the tests that start processes; the rest are in tests/unit/artifacts/test_overview.py.
"""

import json

from kvtune import hardware
from kvtune.artifacts import overview as ov
from kvtune.jsonsafe import dumps
from kvtune.kinds import Direction
from kvtune.knobs import Knob
from kvtune.study.outcome import RUNS_KEY
from kvtune.study.ranking import pareto
from kvtune.study.results import build_payload
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from tests.conftest import TINY
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
LAUNCH = {"ttft_p95": 1e6, "error_rate": 1e6, RUNS_KEY: 1.0}


def test_show_names_the_pareto_set_of_a_multi_objective_run(make_tuner):
    """`kvtune show` reads results.json; `kvtune run` ranks the tuner's outcomes: same set."""
    launcher = FakeLauncher(knobs=(Knob("speed", "float", low=1.0, high=4.0),))
    spec = StudySpec(
        study="mo-show",
        trials=3,
        workload=TINY,
        confirm_top=1,
        confirm_pairs=2,
        objective=["ttft_p95", "output_throughput"],
    ).validate()
    tuner, _ = make_tuner(spec, launcher)
    tuner.run()
    tuner.confirm()  # the reported Pareto set is built from the fresh re-measurements
    outcomes = tuner.outcomes()
    payload = json.loads(
        dumps(
            build_payload(
                "mo-show",
                spec.to_dict(),
                hardware.fingerprint(),
                "fake 1.0",
                [t.describe() for t in tuner.targets],
                spec.objective_specs,
                outcomes,
            )
        )
    )
    shown = ov.overview(payload)
    tuner_front = [o.number for o in pareto(outcomes, [o.direction for o in spec.objective_specs])]
    assert tuner_front and not shown["pareto_is_trade_off"]
    assert [o.number for o in shown["pareto"]] == tuner_front == payload["pareto_trials"]
    assert [a.name for a in shown["pareto_axes"]] == ["ttft_p95", "output_throughput"]
    assert shown["direction"] is Direction.MINIMIZE
