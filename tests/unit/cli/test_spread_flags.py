"""--prompt-spread / --output-spread (issue 30 item 4) reach the workload by every road: `kvtune
run`'s flags (over the study file), the study file's `workload:` keys, `kvtune bench`'s flags,
and the generated verify script's `kvtune bench` line, which must draw the same lengths as the
study measured. No server: the flags and the spec alone."""

from __future__ import annotations

import pytest

from kvtune.artifacts.bench_script import bench_args
from kvtune.artifacts.vllm_bench import ServedModel, vllm_line
from kvtune.cli.bench import bench_workload
from kvtune.cli.bench_flags import BenchFlags
from kvtune.cli.flag_record import with_defaults
from kvtune.cli.run import workload_overrides
from kvtune.cli.run_flags import RunFlags
from kvtune.errors import SpecError
from kvtune.study.study_file import parse_workload
from kvtune.workload import Workload


def test_run_flags_set_the_spreads_and_leave_them_unset_when_not_given():
    o = workload_overrides(with_defaults(RunFlags, prompt_spread=0.5, output_spread=0.25))
    assert (o.prompt_spread, o.output_spread) == (0.5, 0.25)
    assert "prompt_spread" not in workload_overrides(with_defaults(RunFlags)).given()  # the study file decides


def test_the_study_file_takes_the_spreads_as_numbers():
    w = parse_workload({"prompt_tokens": 300, "prompt_spread": 0.5, "output_spread": 1})
    assert (w.prompt_spread, w.output_spread) == (0.5, 1)
    with pytest.raises(SpecError, match="workload.prompt_spread must be a number"):
        parse_workload({"prompt_spread": "0.5x"})


def test_bench_flags_draw_the_lengths_and_default_to_constants():
    f = with_defaults(BenchFlags, url="http://127.0.0.1:8080", prompt_spread=0.5, output_spread=0.3)
    w = bench_workload(f)
    assert (w.prompt_spread, w.output_spread) == (0.5, 0.3)
    plain = bench_workload(with_defaults(BenchFlags, url="http://127.0.0.1:8080"))
    assert (plain.prompt_spread, plain.output_spread) == (0.0, 0.0)


def test_the_verify_scripts_bench_line_draws_the_same_lengths():
    args = bench_args(Workload(prompt_spread=0.5, output_spread=0.3, seed=4), [])
    assert args[args.index("--prompt-spread") + 1] == "0.5" and args[args.index("--output-spread") + 1] == "0.3"
    assert args[args.index("--seed") + 1] == "4"  # the seed of the draws travels with them
    assert "--prompt-spread" not in bench_args(Workload(), []) and "--output-spread" not in bench_args(Workload(), [])


def test_the_vllm_bench_line_says_it_cannot_draw_lognormal_lengths():
    model = ServedModel(name="m", path="/m.gguf", tokenizer="org/m")
    drawn = vllm_line(Workload(prompt_spread=0.5), None, model)
    assert any("draws no lognormal lengths" in n for n in drawn.notes)
    assert not any("lognormal" in n for n in vllm_line(Workload(), None, model).notes)
