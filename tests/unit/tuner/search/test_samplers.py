"""Choosing the search (tuner/samplers.py): names, the grid's finite space, per-worker seeds.

The tests here start no process; those that do are in tests/integration/tuner/search/test_samplers.py."""

import itertools

import optuna
import pytest

from kvtune.errors import SpecError
from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.assemble import open_tuner, prepare, study_sampler
from kvtune.tuner.search import samplers
from kvtune.tuner.search.samplers import SamplerKind, grid_space, worker_seed
from kvtune.workload import Workload

KNOBS = [
    Knob("parallel", "choices", choices=(1, 2, 4, 8)),
    Knob("threads", "int", low=1, high=4),
    Knob("flash-attn", "choices", choices=("on", "off")),
    Knob("ctx", "fixed", value=512),
]


def has_scipy() -> bool:
    try:
        import scipy  # noqa: F401
    except ImportError:
        return False
    return True


def test_auto_is_the_default_tpe():
    assert samplers.DEFAULT is SamplerKind.TPE
    s = samplers.make_sampler("auto", KNOBS, seed=0, trials=12)
    assert isinstance(s, optuna.samplers.TPESampler)


def test_each_name_builds_its_sampler():
    assert isinstance(samplers.make_sampler("random", KNOBS, seed=1, trials=12), optuna.samplers.RandomSampler)
    assert isinstance(samplers.make_sampler("grid", KNOBS, seed=1, trials=12), optuna.samplers.GridSampler)
    for name, cls in (("gp", optuna.samplers.GPSampler), ("qmc", optuna.samplers.QMCSampler)):
        if has_scipy():
            assert isinstance(samplers.make_sampler(name, KNOBS, seed=1, trials=12), cls)
        else:
            with pytest.raises(SpecError, match="needs scipy"):
                samplers.make_sampler(name, KNOBS, seed=1, trials=12)


def test_grid_expands_a_small_int_range_and_skips_fixed_knobs():
    assert grid_space(KNOBS) == {"parallel": [1, 2, 4, 8], "threads": [1, 2, 3, 4], "flash-attn": ["on", "off"]}
    assert len(list(itertools.product(*grid_space(KNOBS).values()))) == 32
    assert grid_space([Knob("b", "int", low=64, high=512, step=64)]) == {"b": [64, 128, 192, 256, 320, 384, 448, 512]}


@pytest.mark.parametrize(
    "knob,fragment",
    [
        (Knob("gpu-memory-utilization", "float", low=0.8, high=0.95), "gpu-memory-utilization is a continuous range"),
        (Knob("threads", "int", low=1, high=64), "threads is a range of 64 values"),
    ],
)
def test_grid_refuses_a_continuous_or_wide_range_naming_the_knob(knob, fragment):
    with pytest.raises(SpecError) as e:
        grid_space([KNOBS[0], knob])
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_worker_seeds_differ_and_move_with_stored_trials():
    assert worker_seed(7, 2, 0) == 9  # slot 0: seed + stored trials, as before
    seeds = {worker_seed(7, n, slot) for n in range(50) for slot in range(8)}
    assert len(seeds) == 50 * 8
    assert worker_seed(2**32 - 1, 5, 3) < 2**32


def first_proposals(sampler: optuna.samplers.BaseSampler, n: int = 4) -> list[dict]:
    study = optuna.create_study(sampler=sampler)
    out = []
    for _ in range(n):
        t = study.ask()
        out.append(
            {
                "parallel": t.suggest_categorical("parallel", [1, 2, 4, 8, 16]),
                "threads": t.suggest_int("threads", 1, 64),
            }
        )
        study.tell(t, 1.0)
    return out


def test_workers_started_together_propose_different_start_up_points():
    spec = StudySpec(seed=3, trials=30).validate()
    slot0 = first_proposals(study_sampler(spec, KNOBS, n_existing=1, slot=0))
    slot1 = first_proposals(study_sampler(spec, KNOBS, n_existing=1, slot=1))
    again = first_proposals(study_sampler(spec, KNOBS, n_existing=1, slot=0))
    assert slot0 == again  # deterministic for a seed
    assert slot0 != slot1


def test_grid_and_qmc_keep_the_study_seed_in_every_worker():
    a = samplers.make_sampler("grid", KNOBS, seed=5, trials=33, n_stored=0, slot=0)
    b = samplers.make_sampler("grid", KNOBS, seed=5, trials=33, n_stored=9, slot=2)
    assert a._all_grids == b._all_grids  # grid ids mean the same configs everywhere


def test_a_grid_study_measures_every_config_once_after_the_baseline(tmp_path):
    launcher = FakeLauncher(knobs=(Knob("parallel", "choices", choices=(1, 2, 4)), Knob("speed", "int", low=1, high=2)))
    spec = StudySpec(
        study="g", trials=7, sampler="grid", workload=Workload(concurrency=2), startup_timeout_s=10
    ).validate()
    tuner = open_tuner(prepare(spec, launcher=launcher, runs_dir=str(tmp_path)))
    assert [t.user_attrs for t in tuner.study.trials] == [{"baseline": True}]  # no informed start
    seen = []
    for _ in range(7):
        trial = tuner.study.ask()
        if not trial.user_attrs.get("baseline"):
            seen.append(tuple(sorted(tuner.space.suggest(trial).flags.items())))
        tuner.study.tell(trial, 1.0)
    assert len(seen) == 6 and len(set(seen)) == 6


def test_grid_with_a_continuous_knob_fails_before_the_study_exists(tmp_path):
    launcher = FakeLauncher(knobs=(Knob("speed", "float", low=1.0, high=4.0),))
    spec = StudySpec(study="g", sampler="grid", workload=Workload(concurrency=2)).validate()
    with pytest.raises(SpecError, match="speed is a continuous range"):
        prepare(spec, launcher=launcher, runs_dir=str(tmp_path / "runs"))
    assert not (tmp_path / "runs").exists()


def study_with_a_baseline() -> optuna.Study:
    """A study as kvtune makes it: trial 0 (the server's defaults) has no parameters."""
    study = optuna.create_study(direction="maximize")
    study.enqueue_trial({})
    study.tell(study.ask(), 1.0)
    for p in (1, 2, 4):
        t = study.ask()
        t.suggest_categorical("parallel", [1, 2, 4, 8])
        t.suggest_int("threads", 1, 4)
        study.tell(t, float(p))
    return study


@pytest.mark.parametrize("name", ["gp", "qmc"])
def test_gp_and_qmc_model_the_space_despite_the_parameterless_baseline(name):
    pytest.importorskip("scipy")
    study = study_with_a_baseline()
    sampler = samplers.make_sampler(name, KNOBS, seed=0, trials=12)
    space = sampler.infer_relative_search_space(study, study.trials[-1])
    assert "threads" in space  # Optuna's own would give {} here: random search for the whole study
    plain = (optuna.samplers.GPSampler if name == "gp" else optuna.samplers.QMCSampler)(seed=0)
    assert "threads" not in plain.infer_relative_search_space(study, study.trials[-1])


def test_gp_proposes_from_its_model_after_a_baseline():
    pytest.importorskip("scipy")
    pytest.importorskip("torch")  # Optuna's GP runs on torch, which kvtune does not install (`--sampler gp` says so)
    study = study_with_a_baseline()
    study.sampler = samplers.make_sampler("gp", KNOBS, seed=0, trials=9)  # 3 start-up trials: done
    t = study.ask()
    t.suggest_categorical("parallel", [1, 2, 4, 8])
    t.suggest_int("threads", 1, 4)
    # the GP sampler records the proposal it made from its model (none when it falls back)
    assert any(k.startswith("gp:relative_params") for k in study.trials[-1].system_attrs)


def test_a_study_file_names_its_sampler(tmp_path):
    from kvtune.study.spec import build_spec
    from kvtune.study.study_file import load_study_file

    f = tmp_path / "s.yaml"
    f.write_text("sampler: grid\n")
    assert build_spec(load_study_file(f)).sampler == "grid"
    assert build_spec(load_study_file(f), {"sampler": "random"}).sampler == "random"  # the flag wins
    f.write_text("sampler: 3\n")
    with pytest.raises(SpecError, match="sampler must be a sampler name"):
        load_study_file(f)
