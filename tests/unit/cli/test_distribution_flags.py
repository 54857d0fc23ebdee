"""--think-spread, --prefix-groups and --rate with --workload multiturn (issue 30 item 4) reach the
workload by every road: `kvtune run`'s flags, `kvtune bench`'s flags, and the generated verify
script's `kvtune bench` line, which must drive the same load the study measured. No server."""

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
from kvtune.workload import Workload

URL = "http://127.0.0.1:8080"


def test_run_flags_set_the_new_fields_and_leave_them_unset_when_not_given():
    o = workload_overrides(with_defaults(RunFlags, think_spread=0.5, prefix_groups=3, rate=2.0))
    assert (o.think_spread, o.shared_prefix_groups, o.mode, o.rate) == (0.5, 3, "open", 2.0)
    given = workload_overrides(with_defaults(RunFlags)).given()
    assert "think_spread" not in given and "shared_prefix_groups" not in given  # the study file decides


def test_bench_flags_start_conversations_open_loop_with_drawn_think_times():
    f = with_defaults(BenchFlags, url=URL, workload_kind="multiturn", rate="2", think_time="1s", think_spread=0.5)
    w = bench_workload(f)
    assert (w.multiturn, w.mode, w.rate, w.think_time_s, w.think_spread) == (True, "open", 2.0, 1.0, 0.5)
    assert "conversations starting at 2/s (poisson)" in w.describe()
    plain = bench_workload(with_defaults(BenchFlags, url=URL, workload_kind="multiturn"))
    assert (plain.mode, plain.think_spread) == ("closed", 0.0)


def test_bench_flags_split_the_shared_prompt_into_groups():
    f = with_defaults(BenchFlags, url=URL, shared_prefix_fraction=0.5, shared_prefix_tokens=64, prefix_groups=4)
    assert bench_workload(f).shared_prefix_groups == 4


@pytest.mark.parametrize(
    ("flags", "phrase"),
    [
        ({"think_spread": 0.5}, "--think-spread applies to --workload multiturn only"),
        ({"workload_kind": "multiturn", "think_spread": 0.5}, "which is 0: set think_time_s (--think-time 2s)"),
        ({"workload_kind": "multiturn", "think_time": "1s", "think_spread": -1.0}, "think_spread must be a finite"),
        ({"prefix_groups": 0}, "workload.shared_prefix_groups must be an integer >= 1"),
        ({"prefix_groups": 2}, "set shared_prefix_fraction > 0 (--shared-prefix-fraction)"),
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
    assert args[args.index("--think-spread") + 1] == "0.4" and args[args.index("--seed") + 1] == "3"
    grouped = bench_args(Workload(shared_prefix_fraction=0.5, shared_prefix_tokens=64, shared_prefix_groups=4), [])
    assert grouped[grouped.index("--prefix-groups") + 1] == "4"
    assert "--prefix-groups" not in bench_args(Workload(shared_prefix_fraction=0.5, shared_prefix_tokens=64), [])
    assert "--think-spread" not in bench_args(Workload(multiturn=True, think_time_s=1.0), [])


def test_the_vllm_line_shares_k_prefixes_when_every_request_shares_one():
    model = ServedModel(name="m", path="/m.gguf", tokenizer="org/m")
    line = vllm_line(Workload(shared_prefix_fraction=1.0, shared_prefix_tokens=64, shared_prefix_groups=4), None, model)
    argv = line.argv
    assert argv[argv.index("--dataset-name") + 1] == "prefix_repetition"
    assert argv[argv.index("--prefix-repetition-num-prefixes") + 1] == "4" and argv.count("--num-prompts") == 1
    assert argv[argv.index("--num-prompts") + 1] == "32"
