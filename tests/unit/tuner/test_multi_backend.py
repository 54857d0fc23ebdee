"""Planning a multi-backend run: the backend list, the budget split, the model each backend
serves, and the backends left out with their reason (launchers injected: nothing is started)."""

from __future__ import annotations

import pytest

from kvtune.errors import BackendError, ModelError, ServerNotFoundError, SpecError
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.multi_backend import (
    BackendChoice,
    model_for,
    parse_backends,
    plan_backends,
    single_backend_model,
    split_budget,
)
from kvtune.tuner.session import RunOptions, study_spec


def test_one_backend_is_todays_run():
    assert parse_backends([]) == BackendChoice(())
    assert not parse_backends(["vllm"]).several
    assert parse_backends(["tgi"]).backends == ("tgi",)  # the spec refuses it, as before


def test_several_and_auto():
    assert parse_backends(["vllm", "llama-server"]) == BackendChoice(("vllm", "llama-server"))
    auto = parse_backends(["auto"])
    assert auto.several and auto.auto and auto.backends == ("llama-server", "vllm")


@pytest.mark.parametrize(
    "values,fragment",
    [
        (["vllm", "vllm"], "--backend vllm is given twice"),
        (["auto", "vllm"], "give it alone"),
        (["llama-server", "tgi"], "unknown backend 'tgi'"),
    ],
)
def test_bad_backend_lists(values, fragment):
    with pytest.raises(SpecError, match=fragment):
        parse_backends(values)


@pytest.mark.parametrize(
    "total,n,shares", [(12, 2, [6, 6]), (5, 2, [3, 2]), (3, 2, [2, 1]), (2, 2, [1, 1]), (7, 1, [7]), (8, 3, [3, 3, 2])]
)
def test_split_budget_half_each_remainder_to_the_first(total, n, shares):
    assert split_budget(total, n) == shares
    assert sum(shares) == total


def test_too_few_trials_to_split():
    with pytest.raises(SpecError, match="--trials 1 cannot be split among 2 backends"):
        split_budget(1, 2)


# ---- the model each backend serves ----------------------------------------------------------
@pytest.fixture
def hf_dir(tmp_path):
    d = tmp_path / "hf"
    d.mkdir()
    (d / "config.json").write_text("{}")
    return d


def test_the_demo_model_in_both_forms():
    assert model_for("llama-server", None, None) == "demo"
    assert model_for("vllm", None, None) == "demo"
    assert model_for("vllm", "demo", None) == "demo"


def test_gguf_for_llama_server_hf_folder_for_vllm(tmp_path, hf_dir):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert model_for("llama-server", str(gguf), str(hf_dir)) == str(gguf)
    assert model_for("vllm", str(gguf), str(hf_dir)) == str(hf_dir)
    assert model_for("vllm", "org/model", None) == "org/model"  # a hub id


@pytest.mark.parametrize(
    "backend,which,fragment",
    [
        ("vllm", "gguf", "not the GGUF file"),
        ("llama-server", "hf", "needs a GGUF file"),
        ("vllm", "bare", "has no config.json"),
    ],
)
def test_a_backend_that_cannot_serve_says_why(tmp_path, hf_dir, backend, which, fragment):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    bare = tmp_path / "bare"
    bare.mkdir()
    model = {"gguf": str(gguf), "hf": str(hf_dir), "bare": str(bare)}[which]
    with pytest.raises(ModelError, match=fragment):
        model_for(backend, model, None)


def test_hf_model_alone_leaves_llama_server_without_its_gguf(hf_dir):
    with pytest.raises(ModelError, match="GGUF file of the hf_model"):
        model_for("llama-server", None, str(hf_dir))


def test_hf_model_in_a_one_backend_run(hf_dir):
    assert single_backend_model("vllm", str(hf_dir)) == str(hf_dir)
    assert single_backend_model("llama-server", None) is None
    with pytest.raises(SpecError, match="hf_model is the model vLLM serves"):
        single_backend_model("llama-server", str(hf_dir))


# ---- the plan ---------------------------------------------------------------------------------
def opts(tmp_path, **spec) -> RunOptions:
    given = {"study": "S", "trials": 5, **spec, "workload": {"concurrency": 3}}
    return RunOptions(given=given, runs_dir=str(tmp_path / "runs"))


def fakes(refuse: dict[str, Exception] | None = None):
    built = []

    def factory(spec):
        if refuse and spec.backend in refuse:
            raise refuse[spec.backend]
        built.append(spec)
        return FakeLauncher(model_path=f"fake-{spec.backend}")

    return factory, built


def test_each_backend_its_own_study_same_spec_split_budget(tmp_path):
    factory, built = fakes()
    plan = plan_backends(opts(tmp_path, targets=["ttft<2s"]), parse_backends(["llama-server", "vllm"]), factory=factory)
    assert [leg.backend for leg in plan.legs] == ["llama-server", "vllm"]
    assert [leg.study for leg in plan.legs] == ["S-llama-server", "S-vllm"]
    specs = [study_spec(leg.options) for leg in plan.legs]
    assert [s.trials for s in specs] == [3, 2]
    assert [s.model for s in specs] == ["demo", "demo"]
    assert {s.workload.concurrency for s in specs} == {3}
    assert all(s.target_texts == ["ttft<2s"] for s in specs)
    assert plan.split_note() == "5 trials: llama-server 3, vllm 2"
    assert not (tmp_path / "runs").exists()  # planning writes nothing


def test_a_backend_that_cannot_serve_is_skipped_and_the_other_gets_the_whole_budget(tmp_path):
    factory, _ = fakes({"vllm": ServerNotFoundError("no vLLM found: pip install vllm")})
    plan = plan_backends(opts(tmp_path), parse_backends(["auto"]), factory=factory)
    assert [leg.backend for leg in plan.legs] == ["llama-server"]
    assert study_spec(plan.legs[0].options).trials == 5
    assert [(s.backend, s.reason) for s in plan.skipped] == [("vllm", "no vLLM found: pip install vllm")]


def test_no_backend_can_serve_is_one_error_naming_each(tmp_path):
    factory, _ = fakes({"vllm": ServerNotFoundError("no vLLM found"), "llama-server": ModelError("not a GGUF file")})
    with pytest.raises(BackendError, match=r"no backend can serve.*llama-server: not a GGUF file; vllm: no vLLM found"):
        plan_backends(opts(tmp_path), parse_backends(["llama-server", "vllm"]), factory=factory)


def test_bad_input_stops_before_any_backend_is_asked(tmp_path):
    factory, built = fakes()
    with pytest.raises(SpecError, match="trials must be at least 1"):
        plan_backends(opts(tmp_path, trials=0), parse_backends(["llama-server", "vllm"]), factory=factory)
    with pytest.raises(SpecError, match="warm_start continues one backend"):
        plan_backends(RunOptions(warm_start="other"), parse_backends(["auto"]), factory=factory)
    with pytest.raises(SpecError, match="--trials 1 cannot be split among 2 backends"):
        plan_backends(opts(tmp_path, trials=1), parse_backends(["llama-server", "vllm"]), factory=factory)
    assert built == []


def test_the_time_budget_is_split_too(tmp_path):
    factory, _ = fakes()
    plan = plan_backends(opts(tmp_path, time_budget_s=600.0), parse_backends(["auto"]), factory=factory)
    assert [study_spec(leg.options).time_budget_s for leg in plan.legs] == [300.0, 300.0]


def test_default_name_is_stable_and_differs_with_the_workload(tmp_path):
    factory, _ = fakes()
    a = plan_backends(opts(tmp_path, study=None), parse_backends(["auto"]), factory=factory)
    b = plan_backends(opts(tmp_path, study=None), parse_backends(["auto"]), factory=factory)
    c = plan_backends(
        RunOptions(given={"trials": 4, "workload": {"concurrency": 5}}),
        parse_backends(["auto"]),
        factory=factory,
    )
    assert a.name == b.name != c.name and a.name.startswith("backends-")
    assert a.legs[1].study == f"{a.name}-vllm"


def test_relative_targets_are_refused_when_backends_are_compared(tmp_path):
    """ttft<1.5x means each backend's own defaults: the backends would meet different bars."""
    factory, built = fakes()
    with pytest.raises(SpecError, match="relative to each backend's own defaults.*absolute targets"):
        plan_backends(
            opts(tmp_path, targets=["ttft_p95<1.5x"]), parse_backends(["llama-server", "vllm"]), factory=factory
        )
    assert built == []
    one = plan_backends(opts(tmp_path, targets=["ttft_p95<1.5x"]), parse_backends(["vllm"]), factory=factory)
    assert [leg.backend for leg in one.legs] == ["vllm"]  # one backend: its own baseline is the bar
