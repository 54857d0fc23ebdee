"""workload.think_spread, workload.shared_prefix_groups and --rate with --workload multiturn reach
the workload by every road: `kvtune run`'s flags and `--set`, `kvtune bench`'s, and the generated
verify script's `kvtune bench` line, which must drive the same load the study measured. No server."""

from __future__ import annotations

import pytest

from kvtune.artifacts.bench_script import bench_args
from kvtune.artifacts.vllm_bench import ServedModel, vllm_line
from kvtune.cli.bench import bench_workload
from kvtune.cli.bench_flags import BenchFlags
from kvtune.cli.flag_record import with_defaults
from kvtune.cli.run import given_by_flags, run_options
from kvtune.cli.run_flags import RunFlags
from kvtune.errors import SpecError
from kvtune.tuner.multi_backend import parse_backends
from kvtune.workload import Workload

URL = "http://127.0.0.1:8080"


def test_run_flags_and_sets_give_the_fields_and_leave_them_unset_when_not_given(tmp_path):
    sets = ["workload.think_time_s=1", "workload.think_spread=0.5", "workload.shared_prefix_groups=3"]
    sets += ["workload.shared_prefix_fraction=0.5", "workload.shared_prefix_tokens=16"]
    f = with_defaults(RunFlags, rate=2.0, workload_kind="multiturn", set=sets, runs_dir=str(tmp_path))
    w = run_options(f, parse_backends([])).given["workload"]
    assert (w["think_spread"], w["shared_prefix_groups"], w["mode"], w["rate"]) == (0.5, 3, "open", 2.0)
    assert given_by_flags(with_defaults(RunFlags), parse_backends([])) == {}  # the study file decides


def test_bench_flags_start_conversations_open_loop_with_drawn_think_times():
    sets = ["think_time_s=1s", "think_spread=0.5"]
    f = with_defaults(BenchFlags, url=URL, workload_kind="multiturn", rate="2", set=sets)
    w = bench_workload(f)
    assert (w.multiturn, w.mode, w.rate, w.think_time_s, w.think_spread) == (True, "open", 2.0, 1.0, 0.5)
    assert "conversations starting at 2/s (poisson)" in w.describe()
    plain = bench_workload(with_defaults(BenchFlags, url=URL, workload_kind="multiturn"))
    assert (plain.mode, plain.think_spread) == ("closed", 0.0)


def test_bench_flags_split_the_shared_prompt_into_groups():
    sets = ["shared_prefix_fraction=0.5", "shared_prefix_tokens=64", "shared_prefix_groups=4"]
    f = with_defaults(BenchFlags, url=URL, set=sets)
    assert bench_workload(f).shared_prefix_groups == 4


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        ({"set": ["think_spread=0.5"]}, "workload.think_spread applies to --workload multiturn only"),
        ({"workload_kind": "multiturn", "set": ["think_spread=0.5"]}, "which is 0: set workload.think_time_s"),
        ({"workload_kind": "multiturn", "set": ["think_time_s=1", "think_spread=-1"]}, "think_spread must be a finite"),
        ({"set": ["shared_prefix_groups=0"]}, "workload.shared_prefix_groups must be an integer >= 1"),
        ({"set": ["shared_prefix_groups=2"]}, "set workload.shared_prefix_fraction > 0"),
    ],
)
def test_bad_bench_flags_are_one_line_naming_the_fix(flags, phrase):
    with pytest.raises(SpecError) as e:
        bench_workload(with_defaults(BenchFlags, url=URL, **flags))
    assert phrase in str(e.value) and "\n" not in str(e.value)


def test_the_verify_scripts_bench_line_drives_the_same_conversations_and_groups():
    w = Workload(multiturn=True, mode="open", rate=2.0, think_time_s=1.5, think_spread=0.4, seed=3)
    args = bench_args(w, [])
    assert args[args.index("--rate") + 1] == "2.0" and args[args.index("--workload") + 1] == "multiturn"
    assert "workload.think_spread=0.4" in args and args[args.index("--seed") + 1] == "3"
    grouped = bench_args(Workload(shared_prefix_fraction=0.5, shared_prefix_tokens=64, shared_prefix_groups=4), [])
    assert "workload.shared_prefix_groups=4" in grouped
    ungrouped = bench_args(Workload(shared_prefix_fraction=0.5, shared_prefix_tokens=64), [])
    assert not any("shared_prefix_groups" in a for a in ungrouped)
    assert "--think-spread" not in bench_args(Workload(multiturn=True, think_time_s=1.0), [])


def test_the_vllm_line_shares_k_prefixes_when_every_request_shares_one():
    model = ServedModel(name="m", path="/m.gguf", tokenizer="org/m")
    line = vllm_line(Workload(shared_prefix_fraction=1.0, shared_prefix_tokens=64, shared_prefix_groups=4), None, model)
    argv = line.argv
    assert argv[argv.index("--dataset-name") + 1] == "prefix_repetition"
    assert argv[argv.index("--prefix-repetition-num-prefixes") + 1] == "4" and argv.count("--num-prompts") == 1
    assert argv[argv.index("--num-prompts") + 1] == "32"
