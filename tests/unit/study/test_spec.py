"""The typed study spec (study/spec.py): words parsed once into Objectives, Targets and a
SamplerKind; to_dict/from_dict keep the keys earlier versions stored; the flags laid over the
study file; --seed seeds the prompts unless the workload's seed is given (the overrides' own
fields: test_overrides.py)."""

import re

import pytest

from kvtune.errors import KvtuneError, SpecError
from kvtune.objectives.objective import Objective
from kvtune.objectives.targets import Target
from kvtune.study.identity import fingerprint, resume_conflict
from kvtune.study.sampler_choice import SamplerKind
from kvtune.study.spec import StudySpec, build_spec
from kvtune.study.study_file import load_study_file
from kvtune.workload import Workload

# results.json's "spec" as the previous version wrote it (StudySpec.to_dict of then), plus a key a
# later version might add: it must still load.
EARLIER = {
    "study": "old",
    "backend": "llama-server",
    "model": None,
    "targets": ["ttft<1s", "tpot_p99<50ms"],
    "objective": ["output_throughput", "ttft_p95"],
    "trials": 7,
    "seed": 3,
    "workload": {
        "concurrency": 4,
        "prompt_tokens": 100,
        "output_tokens": 16,
        "num_requests": 8,
        "warmup_requests": 2,
        "request_timeout_s": 60.0,
        "seed": 3,
        "mode": "closed",
        "rate": None,
        "arrival": "poisson",
        "burstiness": 1.0,
        "duration_s": None,
        "endpoint": "chat",
        "dataset": None,
        "dataset_min_tokens": 0,
        "dataset_max_tokens": None,
        "shared_prefix_fraction": 0.0,
        "shared_prefix_tokens": 0,
    },
    "space": {"threads": [1, 2]},
    "llama_server": None,
    "vllm_python": None,
    "startup_timeout_s": 90.0,
    "repeats": "auto",
    "confirm_top": 1,
    "informed_start": False,
    "time_budget_s": None,
    "early_stop": True,
    "sampler": "auto",
    "price_per_hour": 2.5,
    "price_per_gpu_hour": None,
    "a_later_key": 1,
}


def test_the_words_are_parsed_once_into_typed_values():
    spec = StudySpec(objective=["output_throughput", "ttft_p95"], targets=["ttft<1s"], sampler="Random")
    assert all(isinstance(o, Objective) for o in spec.objective)
    assert [o.name for o in spec.objective] == ["output_throughput", "ttft_p95"]
    assert spec.primary.name == "output_throughput" and spec.objective_specs is spec.objective
    [t] = spec.targets
    assert isinstance(t, Target) and t.threshold == 1000.0 and t.text == "ttft<1s"
    assert spec.sampler is SamplerKind.RANDOM


@pytest.mark.parametrize(
    "settings,fragment",
    [
        ({"objective": "speed"}, "unknown objective 'speed'"),
        ({"objective": []}, "objective is empty"),
        ({"objective": ["ttft_p95", "ttft_p95"]}, "twice"),
        ({"sampler": "nosuch"}, "unknown sampler 'nosuch'"),
        ({"targets": ["ttft<1"]}, "needs a time unit"),
    ],
)
def test_bad_words_are_one_line_errors_when_the_spec_is_built(settings, fragment):
    with pytest.raises(KvtuneError) as e:  # SpecError, or TargetError for a target
        StudySpec(**settings)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_a_spec_an_earlier_version_stored_loads_and_writes_back_the_same_words():
    spec = StudySpec.from_dict(EARLIER).validate()
    assert spec.workload == Workload(**EARLIER["workload"]) and spec.repeats == "auto"
    assert [t.constraint_key for t in spec.targets] == ["ttft_p95<1000ms", "tpot_p99<50ms"]
    d = spec.to_dict()
    assert d.pop("confirm_pairs") == 9  # newer than that version: its default (earlier ones ignore it)
    assert d.pop("startup_stall_s") == 300.0  # newer too; its stored cap (90 s) is kept
    assert d.pop("screen_fraction") == 0.5  # newer too: its default
    assert d.pop("confirm_rounds") == 3  # newer too: its default
    assert d == {k: v for k, v in EARLIER.items() if k != "a_later_key"}
    assert StudySpec.from_dict(d) == spec


def test_one_objective_is_written_as_a_name():
    d = StudySpec(objective="ttft_p95").to_dict()
    assert d["objective"] == "ttft_p95" and d["sampler"] == "auto" and d["targets"] == []


def test_the_default_study_name_is_what_earlier_versions_derived():
    # Pinned: another hash would leave every default-named study behind on upgrade.
    assert fingerprint(StudySpec()) == fingerprint(StudySpec.from_dict(StudySpec().to_dict()))
    assert fingerprint(StudySpec(targets=["ttft<1s"])) != fingerprint(StudySpec())
    assert fingerprint(StudySpec(price_per_hour=1.0)) != fingerprint(StudySpec())


def test_flags_given_win_over_the_study_file(tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("trials: 5\nobjective: ttft_p95\nworkload: {concurrency: 3, prompt_tokens: 50}\n")
    spec = build_spec(load_study_file(f), {"trials": 9, "workload": {"concurrency": 6}})
    assert spec.trials == 9 and spec.primary.name == "ttft_p95"
    assert (spec.workload.concurrency, spec.workload.prompt_tokens) == (6, 50)
    assert build_spec(load_study_file(f)).trials == 5


def test_seed_seeds_the_prompts_unless_the_workload_seed_is_given(tmp_path):
    assert build_spec({}, {"seed": 7}).workload.seed == 7
    assert build_spec({}, {"seed": 7}).seed == 7
    assert build_spec({}, {"seed": 7, "workload": {"seed": 2}}).workload.seed == 2
    f = tmp_path / "s.yaml"
    f.write_text("workload: {seed: 4}\n")
    assert build_spec(load_study_file(f), {"seed": 7}).workload.seed == 4
    f.write_text("seed: 5\n")  # the study file's own seed keeps its meaning: the sampler's
    assert build_spec(load_study_file(f)).workload.seed == 0
    assert build_spec({}).workload.seed == 0


def test_resume_conflict_names_the_setting():
    stored = StudySpec(price_per_hour=2.5, targets=["ttft<0.8x", "tpot<50ms"]).to_dict()
    assert resume_conflict(StudySpec(price_per_hour=2.5, targets=["ttft_p95<0.8x", "tpot<50ms"]), stored) is None
    assert "price_per_hour (stored: 2.5, now: not set)" in resume_conflict(StudySpec(targets=["ttft<0.8x"]), stored)
    assert "relative target" in resume_conflict(StudySpec(price_per_hour=2.5, targets=["ttft<0.9x"]), stored)


def test_the_start_up_limits_come_from_the_study_file_and_the_flags(tmp_path):
    assert (StudySpec().startup_timeout_s, StudySpec().startup_stall_s) == (1800.0, 300.0)  # sized for GPUs
    f = tmp_path / "s.yaml"
    f.write_text("startup_timeout_s: 3600\nstartup_stall_s: 600\n")
    spec = build_spec(load_study_file(f))
    assert (spec.startup_timeout_s, spec.startup_stall_s) == (3600, 600)
    spec = build_spec(load_study_file(f), {"startup_stall_s": 90.0})
    assert (spec.startup_timeout_s, spec.startup_stall_s) == (3600, 90.0)


@pytest.mark.parametrize(
    "text,fragment",
    [
        ("startup_stall_s: soon\n", "startup_stall_s 'soon' is not a duration"),
        (
            "startup_stall_s: true\n",
            "startup_stall_s must be a duration such as 90s, 30m or 2h, or a number of seconds, got True",
        ),
        ("startup_stall_s: 0\n", "startup_stall_s 0 must be more than zero"),
        ("startup_timeout_s: -5\n", "startup_timeout_s -5 must be more than zero"),
        ("startup_timeout_s: .inf\n", "startup_timeout_s inf must be more than zero"),
    ],
)
def test_bad_start_up_limits_in_a_study_file_are_one_line_errors(tmp_path, text, fragment):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    with pytest.raises(KvtuneError) as e:
        build_spec(load_study_file(f))
    assert fragment in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize(
    "stored,phrase",
    [
        ("garbage", "the study's stored spec is str, not a mapping"),
        ({"workload": [1]}, "the study's stored spec has workload [1], not a mapping"),
        ({"trials": "x"}, "'trials' is a string 'x', not a whole number"),
        ({"workload": {"concurrency": "many"}}, "'concurrency' is a string 'many', not a whole number"),
    ],
)
def test_a_stored_spec_kvtune_did_not_write_is_one_line(stored, phrase):
    """A study's "spec" attr set by another program was an AttributeError or a TypeError in
    every reader (worker, show --storage, confirm, export-workers)."""
    with pytest.raises(SpecError, match=re.escape(phrase)):
        StudySpec.from_dict(stored)
    assert StudySpec.from_dict(StudySpec().to_dict()) == StudySpec()  # what kvtune writes reads back
