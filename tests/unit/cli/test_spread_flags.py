"""The length spreads (workload.prompt_spread / output_spread) reach the workload by every road:
`kvtune run --set` (over the study file), the study file's `workload:` keys, `kvtune bench --set`,
and the generated verify script's `kvtune bench` line, which must draw the same lengths as the
study measured. No server: the flags and the spec alone."""

from __future__ import annotations

import pytest

from kvtune.artifacts.bench_script import bench_args
from kvtune.artifacts.vllm_bench import ServedModel, vllm_line
from kvtune.cli.bench import bench_workload
from kvtune.cli.bench_flags import BenchFlags
from kvtune.cli.flag_record import with_defaults
from kvtune.cli.run import run_options
from kvtune.cli.run_flags import RunFlags
from kvtune.errors import SpecError
from kvtune.study.study_file import parse_workload
from kvtune.tuner.multi_backend import parse_backends
from kvtune.tuner.session import study_spec
from kvtune.workload import Workload


def test_run_sets_the_spreads_and_leaves_them_unset_when_not_given(tmp_path):
    sets = ["workload.prompt_spread=0.5", "workload.output_spread=0.25"]
    opts = run_options(with_defaults(RunFlags, set=sets, runs_dir=str(tmp_path)), parse_backends([]))
    w = study_spec(opts).workload
    assert (w.prompt_spread, w.output_spread) == (0.5, 0.25)
    plain = run_options(with_defaults(RunFlags, runs_dir=str(tmp_path)), parse_backends([]))
    assert "workload" not in plain.given  # the study file decides


def test_the_study_file_takes_the_spreads_as_numbers():
    w = parse_workload({"prompt_tokens": 300, "prompt_spread": 0.5, "output_spread": 1})
    assert (w.prompt_spread, w.output_spread) == (0.5, 1)
    with pytest.raises(SpecError, match="workload.prompt_spread must be a number"):
        parse_workload({"prompt_spread": "0.5x"})


def test_bench_flags_draw_the_lengths_and_default_to_constants():
    sets = ["workload.prompt_spread=0.5", "output_spread=0.3"]  # the workload. prefix may be left out
    f = with_defaults(BenchFlags, url="http://127.0.0.1:8080", set=sets)
    w = bench_workload(f)
    assert (w.prompt_spread, w.output_spread) == (0.5, 0.3)
    plain = bench_workload(with_defaults(BenchFlags, url="http://127.0.0.1:8080"))
    assert (plain.prompt_spread, plain.output_spread) == (0.0, 0.0)


def test_the_verify_scripts_bench_line_draws_the_same_lengths():
    args = bench_args(Workload(prompt_spread=0.5, output_spread=0.3, seed=4), [])
    assert "workload.prompt_spread=0.5" in args and "workload.output_spread=0.3" in args
    assert args[args.index("--seed") + 1] == "4"  # the seed of the draws travels with them
    assert not any("spread" in a for a in bench_args(Workload(), []))
    assert bench_workload(with_defaults(BenchFlags, **_flags(args))) == Workload(
        prompt_spread=0.5, output_spread=0.3, seed=4
    )  # the line reads back as the workload it was written from


def test_the_vllm_bench_line_says_it_cannot_draw_lognormal_lengths():
    model = ServedModel(name="m", path="/m.gguf", tokenizer="org/m")
    drawn = vllm_line(Workload(prompt_spread=0.5), None, model)
    assert any("draws no lognormal lengths" in n for n in drawn.notes)
    assert not any("lognormal" in n for n in vllm_line(Workload(), None, model).notes)


def _flags(args: list[str]) -> dict:
    """`kvtune bench` arguments as BenchFlags fields (the URL apart), as click would fill them."""
    from typer.main import get_command

    from kvtune.cli.app import app

    command = get_command(app).commands["bench"]  # type: ignore[attr-defined]
    ctx = command.make_context("bench", ["http://127.0.0.1:8080", *args])
    return ctx.params
