"""llama-server's prefix-reuse knobs (launchers/llama_reuse.py): offered for workloads whose
requests share prefixes, and only the flags the build's --help lists. (Through the launcher, with
a parsed --help: tests/unit/launchers/test_llama_server.py.)"""

from __future__ import annotations

from kvtune.launchers.llama_reuse import reuse_knobs
from kvtune.workload import Workload

BOTH = {"cache-reuse", "slot-prompt-similarity", "parallel"}


def test_synthetic_prompts_get_no_reuse_knob():
    assert reuse_knobs(Workload(), BOTH) == []


def test_shared_prefixes_get_the_knobs_the_build_has():
    for workload in (Workload(multiturn=True), Workload(shared_prefix_fraction=0.5)):
        knobs = {k.name: k for k in reuse_knobs(workload, BOTH)}
        assert knobs["cache-reuse"].choices == (0, 64, 256)
        assert knobs["slot-prompt-similarity"].choices == (0.0, 0.1, 0.5)
    older = reuse_knobs(Workload(multiturn=True), {"slot-prompt-similarity"})
    assert [k.name for k in older] == ["slot-prompt-similarity"]
