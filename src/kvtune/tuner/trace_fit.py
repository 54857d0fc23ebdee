"""A trace study's replay sized to this host before its first trial (bench/trace_demand.py says
why): measure the defaults' speed, scale the trace's lengths when its replay asks more than a
trial can answer, and keep that scale for the study's whole life.

Only when the user left the lengths to kvtune: a `trace_length_scale` they gave (flag or study
file) is theirs, even 1. A resumed study keeps the scale it was started with (read from the
study's stored spec): a second probe could pick another, and one study would mix two workloads.
A probe that fails (the defaults do not start, nothing answered) leaves the trace as sized and
says so: the study then shows what the defaults do with it. `prepare` calls the fitter before it
builds the search space, so the slot sizes it offers are the fitted trace's.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import optuna

from kvtune.bench.trace_demand import HostFit, HostSpeed, fit_demand
from kvtune.bench.trace_sizing import TraceSizing
from kvtune.launchers.base import Launcher
from kvtune.study.spec import StudySpec
from kvtune.tuner.assemble import Fitted, sized_spec
from kvtune.tuner.host_speed import ProbeFailed, measure_host_speed
from kvtune.tuner.store import storage, storage_url
from kvtune.workload import Workload

SpeedProbe = Callable[[Launcher, StudySpec, Path], HostSpeed]


def length_scale_given(file_data: Mapping[str, Any] | None, flag_scale: float | None) -> bool:
    """Whether the user chose the trace's length scale (the flag, or the study file's workload)."""
    workload = (file_data or {}).get("workload") or {}
    return flag_scale is not None or (isinstance(workload, Mapping) and "trace_length_scale" in workload)


@dataclass(frozen=True)
class HostFitter:
    """Sizes a trace's replay to this host: `storage_url` holds the study (a resumed one keeps
    its scale), `cpus` the CPUs its servers get, `on_phase` hears the probe's progress, `probe`
    measures the speed (default: the real server's defaults; tests pass a fake)."""

    storage_url: Callable[[Path], str]
    cpus: set[int] | None = None
    on_phase: Callable[[str], None] = lambda line: None
    probe: SpeedProbe | None = None

    def __call__(self, spec: StudySpec, sizing: TraceSizing, launcher: Launcher, name: str, run_dir: Path) -> Fitted:
        stored = _stored_scale(name, self.storage_url(run_dir))
        if stored is not None:
            if stored == spec.workload.trace_length_scale:
                return spec, sizing, None
            note = f"resumed: lengths scaled by {stored:g} as the study was started"
            return (*rescaled(spec, sizing, launcher, stored), HostFit(note=note))
        folder = run_dir / "host-speed"
        try:
            speed = (self.probe or self._real_probe)(launcher, spec, folder)
        except ProbeFailed as e:
            return spec, sizing, HostFit(note=f"this host's speed was not measured ({e}): the trace replays as sized")
        w = spec.workload

        def replayed_at(scale: float) -> tuple:
            return rescaled(spec, sizing, launcher, scale)[1].replayed.requests

        fit = fit_demand(replayed_at, speed, w.request_timeout_s, w.trace_length_scale)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "fit.json").write_text(json.dumps(fit.to_dict(), indent=1))
        if not fit.scaled:
            return spec, sizing, HostFit(fit=fit)
        return (*rescaled(spec, sizing, launcher, fit.scale), HostFit(fit=fit))

    def _real_probe(self, launcher: Launcher, spec: StudySpec, folder: Path) -> HostSpeed:
        return measure_host_speed(launcher, spec, folder, cpus=self.cpus, on_phase=self.on_phase)


def rescaled(spec: StudySpec, sizing: TraceSizing, launcher: Launcher, scale: float) -> tuple[StudySpec, TraceSizing]:
    """`spec` with the trace's lengths at `scale`, its clip and slot sized again from them (a
    clip the user gave is kept)."""
    asked = copy.copy(spec)
    asked.workload = _unsized(spec.workload, sizing, scale)
    fitted, new_sizing = sized_spec(asked, launcher)
    assert new_sizing is not None
    return fitted, new_sizing


def _unsized(w: Workload, sizing: TraceSizing, scale: float) -> Workload:
    """The workload as asked (before the sizing set the clip), at length scale `scale`."""
    clip = sizing.max_tokens if sizing.explicit else None
    return dataclasses.replace(w, trace_length_scale=scale, trace_max_tokens=clip)


def _stored_scale(name: str, url: str) -> float | None:
    """The length scale of a study already stored under `name` (None: no such study yet)."""
    path = storage_url.sqlite_file(url)
    if path is not None and not path.is_file():
        return None
    try:
        study = optuna.load_study(study_name=name, storage=storage.make_storage(url, read_only=True))
    except KeyError:
        return None
    spec = study.user_attrs.get("spec") or {}
    return float((spec.get("workload") or {}).get("trace_length_scale", 1.0))
