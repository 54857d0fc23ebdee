"""What `kvtune run`'s flags set (study/overrides.py): one field per StudySpec and Workload field
(moved from test_spec.py: the module's docstring names this file as the guard), and `given()`
returning only what was set, so the study file or the default decides the rest."""

from __future__ import annotations

from dataclasses import fields

from kvtune.study.overrides import SpecOverrides, WorkloadOverrides
from kvtune.study.spec import StudySpec
from kvtune.workload import Workload


def test_the_overrides_mirror_the_spec_and_the_workload():
    assert [f.name for f in fields(SpecOverrides)] == [f.name for f in fields(StudySpec)]
    assert [f.name for f in fields(WorkloadOverrides)] == [f.name for f in fields(Workload)]


def test_nothing_given_is_nothing_set():
    assert SpecOverrides().given() == {} and WorkloadOverrides().given() == {}


def test_given_keeps_every_value_set_falsy_ones_included_and_leaves_the_workload_apart():
    o = SpecOverrides(trials=0, early_stop=False, targets=("ttft<1s",), workload=WorkloadOverrides(seed=0))
    assert o.given() == {"trials": 0, "early_stop": False, "targets": ("ttft<1s",)}  # no "workload"
    assert o.workload.given() == {"seed": 0}


def test_with_workload_adds_to_the_workload_given_and_leaves_the_original_alone():
    base = SpecOverrides(trials=3, workload=WorkloadOverrides(concurrency=4))
    more = base.with_workload(seed=2, rate=1.5)
    assert more.workload.given() == {"concurrency": 4, "seed": 2, "rate": 1.5}
    assert more.given() == {"trials": 3}
    assert base.workload.given() == {"concurrency": 4}  # frozen: a new object
