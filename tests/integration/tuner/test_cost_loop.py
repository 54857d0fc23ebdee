"""A study priced per hour, metered for energy, minimizing the cost per 1M output tokens: on the
fake launcher (real processes, real client), with an injected meter."""

from __future__ import annotations

import pytest

from kvtune.energy import EnergyReading, EnergySource
from kvtune.kinds import Direction
from kvtune.knobs import Knob
from kvtune.study.ranking import rank
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from tests.conftest import TINY


class SteadyMeter:
    """Every benchmark window reads 100 W."""

    source = EnergySource.NVML_COUNTER

    def start(self) -> None:
        pass

    def stop(self) -> EnergyReading:
        return EnergyReading(200.0, 2.0, self.source)


def test_cost_objective_ranks_by_usd_per_million_tokens_with_energy(make_tuner):
    launcher = FakeLauncher(knobs=(Knob("speed", "choices", choices=(1, 4)),))
    spec = StudySpec(study="c", trials=3, workload=TINY, objective="cost_per_mtok", price_per_hour=3.6).validate()
    tuner, _ = make_tuner(spec, launcher)
    tuner.runner.meter_for = lambda gpus: SteadyMeter()
    tuner.study.enqueue_trial({"speed": 4})
    outcomes = [o for o in tuner.run() if o.duplicate_of is None]
    for o in outcomes:
        m = o.metrics
        assert m["usd_per_hour"] == 3.6
        assert m["cost_per_mtok"] == pytest.approx(3.6 / (m["output_throughput"] * 3600) * 1e6)
        assert o.objective == m["cost_per_mtok"]
        assert m["avg_watts"] == 100.0
        assert m["joules_per_output_token"] == pytest.approx(100.0 / m["output_throughput"])
    best = rank(outcomes, Direction.MINIMIZE)[0]
    assert best.metrics["output_throughput"] == max(o.metrics["output_throughput"] for o in outcomes)
