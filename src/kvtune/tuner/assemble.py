"""Assemble a ready-to-run Tuner from a StudySpec: resolve the model and the server binary,
build the search space, open (or resume) the study. Kept apart from the loop so tests can build
a Tuner from fakes and the CLI stays thin.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import optuna

from kvtune import hardware
from kvtune.bench.fidelity_probe import read_prompts
from kvtune.bench.inputs import check_workload_files
from kvtune.bench.trace_demand import HostFit
from kvtune.bench.trace_sizing import TraceSizing, sized_workload
from kvtune.errors import SpecError
from kvtune.kinds import KnobKind
from kvtune.knobs import Knob
from kvtune.launchers.base import Launcher
from kvtune.launchers.process import free_port
from kvtune.launchers.registry import build_flags, create_launcher
from kvtune.objectives.targets import Target, with_fidelity_target
from kvtune.readable import NAME_MAX
from kvtune.study.identity import fingerprint, identity, resume_conflict, study_name_part
from kvtune.study.sampler_choice import check_sampler_installed
from kvtune.study.space import merge_knobs, parse_space
from kvtune.study.spec import StudySpec
from kvtune.tuner.coordinator import Alone, CoordinatorFactory
from kvtune.tuner.loop import Callbacks, Tuner, TunerContext
from kvtune.tuner.search import samplers
from kvtune.tuner.search.search_space import SearchSpace
from kvtune.tuner.store import storage
from kvtune.tuner.trial.context import Placement, Subject
from kvtune.tuner.trial.disturbance import MonitorFactory
from kvtune.tuner.trial.measure import Bench
from kvtune.tuner.trial.runner import study_tokenizer

# A trace's spec and sizing fitted to this host, and what the fit did (None: nothing to say).
Fitted = tuple[StudySpec, TraceSizing, HostFit | None]
TraceFitter = Callable[[StudySpec, TraceSizing, Launcher, str, Path], Fitted]


@dataclass
class Prepared:
    spec: StudySpec
    targets: list[Target]
    launcher: Launcher
    space: SearchSpace
    study_name: str
    run_dir: Path
    hardware: dict
    # How a trace's slots were sized (bench/trace_sizing.py); None: the workload has no trace.
    trace_sizing: TraceSizing | None = None
    # The trace's replay sized to this host's measured speed (tuner/trace_fit.py); None: not fitted.
    host_fit: HostFit | None = None


def check_input_files(spec: StudySpec) -> None:
    """The files the study reads, read and checked before anything is written: the workload's
    trace and dataset, the user's reference prompts."""
    check_workload_files(spec.workload)
    if spec.fidelity_prompts:
        read_prompts(spec.fidelity_prompts)


def numerics_in_space(launcher: Launcher, knobs: list[Knob]) -> list[str]:
    """The knobs of the space with a value that changes the model's numerics (a quantised KV
    cache, speculation): what makes a study need the fidelity gate."""
    out = []
    for k in knobs:
        values = k.choices if k.kind is KnobKind.CHOICES else (k.value,) if k.kind is KnobKind.FIXED else ()
        if any(launcher.numerics_changed({k.name: v}) for v in values):
            out.append(k.name)
    return out


def gated_targets(spec: StudySpec, targets: list[Target], launcher: Launcher, knobs: list[Knob]) -> list[Target]:
    """The targets with the default fidelity gate added when the space can change the model's
    numerics, the gate is on and no `kld` target was given."""
    if not spec.fidelity_gate or not numerics_in_space(launcher, knobs):
        return targets
    return with_fidelity_target(targets)


def default_study_name(spec: StudySpec, launcher: Launcher) -> str:
    """model-backend-fingerprint, the model as a name part (vLLM serves a folder by its path or a
    hub id: `study_name_part` keeps the study's folder inside the runs folder). The model's part is
    cut to fit a folder's name (NAME_MAX bytes): a model file of a long name made a name whose
    folder could not be made, after the runs folder was; a name that fits is as it was."""
    suffix = f"-{spec.backend}-{fingerprint(spec)}"
    part = study_name_part(launcher.served_model_name())
    return part[: NAME_MAX - len(suffix.encode())].rstrip("-.") + suffix


def study_sampler(spec: StudySpec, knobs: list[Knob], n_existing: int, slot: int = 0) -> optuna.samplers.BaseSampler:
    """The study's search (`spec.sampler`, default TPE with constraints set per trial by
    `trial.set_constraint`) for the worker on `slot`. The seed moves with the number of stored
    trials so a resumed study does not re-propose its first random points, and with the slot so
    workers started together do not propose the same ones (see tuner/samplers.py)."""
    return samplers.make_sampler(
        spec.sampler, knobs, seed=spec.seed, trials=spec.trials, n_stored=n_existing, slot=slot
    )


def prepare(
    spec: StudySpec,
    launcher: Launcher | None = None,
    runs_dir: str | None = None,
    device_env: dict[str, str] | None = None,
    cpus_per_trial: int | None = None,
    fit_trace: TraceFitter | None = None,
) -> Prepared:
    """The parts of a study. `device_env` is this worker's GPU slot (CUDA_VISIBLE_DEVICES): the
    launcher keeps only those GPUs before it offers knobs, so its pre-screen and its choices
    (gpu-memory-utilization, n-gpu-layers) are about the memory this worker's trials get.
    `cpus_per_trial` is the CPUs each trial's server gets where the study runs (a study set up
    for a scheduler's workers: not this host's count): the space (threads up to it) and the
    hardware class (its "cpus") are the study's, so every worker that joins builds the same.
    `fit_trace` sizes a trace's replay to this host (tuner/trace_fit.py; it starts the defaults
    once, so it runs after every check, after the GPU pin) and the space's slot sizes follow the
    fitted workload: `kvtune run` passes one; a study set up for other hosts does not."""
    check_sampler_installed(spec.sampler)  # before the baseline, not at the first sampled trial
    check_input_files(spec)  # a missing or malformed trace, dataset or prompt file: before any launch
    targets = spec.judged_targets
    injected = launcher is not None
    if not injected:
        early = build_flags(spec)  # the study file's flags, checked before the model is read
        if early is not None:
            early.check_space(spec.space, [k for k in parse_space(spec.space).values() if k is not None])
    launcher = launcher or create_launcher(spec)  # bad backend, model, binary: fails here
    asked = spec  # the study's default name is of the words given, before a trace is sized
    spec, sizing = sized_spec(spec, launcher)
    name = spec.study or default_study_name(asked, launcher)
    if device_env:
        launcher.pin_gpus(hardware.visible_gpus(device_env))
    hw = hardware.fingerprint()
    if cpus_per_trial is not None:
        hw = {**hw, "cpus": cpus_per_trial, "host_cpus": hw["cpus"]}
    offered = launcher.default_knobs(spec.workload, hw["cpus"])
    knobs = merge_knobs(offered, spec.space)
    table = launcher.flag_table() if injected else None  # else checked above, before the model
    if table is not None:  # a flag the build lacks, or a value it cannot take: before any launch
        table.check_space(spec.space, knobs, [k.name for k in offered])
    if spec.sampler is samplers.SamplerKind.GRID:
        samplers.grid_space(knobs)  # a continuous range fails here, before the study exists
    study_tokenizer(launcher)  # a broken tokenizer.json: refused before the runs folder and the study exist (cached)
    directory = storage.run_dir(storage.runs_root(runs_dir), name)  # made once everything is checked
    host_fit = None
    if fit_trace is not None and sizing is not None:  # after every check: a typo never costs a launch
        fitted, sizing, host_fit = fit_trace(spec, sizing, launcher, name, directory)
        if fitted is not spec:  # the slot sizes offered follow the fitted lengths
            spec, offered = fitted, launcher.default_knobs(fitted.workload, hw["cpus"])
            knobs = merge_knobs(offered, spec.space)
    return Prepared(
        spec=spec,
        targets=gated_targets(spec, targets, launcher, knobs),
        launcher=launcher,
        space=SearchSpace(knobs, launcher),
        study_name=name,
        run_dir=directory,
        hardware=hw,
        trace_sizing=sizing,
        host_fit=host_fit,
    )


def sized_spec(spec: StudySpec, launcher: Launcher) -> tuple[StudySpec, TraceSizing | None]:
    """The spec with its trace's clip set from the trace and the model's context, so every
    slot size derived from the workload (llama-server's per-slot context, vLLM's max-model-len)
    holds the trace's requests; an unfittable trace is refused here, before any launch."""
    workload, sizing = sized_workload(spec.workload, launcher.model_context())
    if sizing is None:
        return spec, None
    sized = copy.copy(spec)
    sized.workload = workload
    return sized, sizing


HARDWARE_KEYS = ("cpu", "cpus", "memory_gib", "accelerator")


def refuse_changed_settings(p: Prepared, stored_spec: dict) -> None:
    """A resumed study keeps its price and its relative targets: another price would mix costs,
    another factor thresholds, in one ranking. (The stored identity cannot tell relative targets
    apart, and earlier versions kept no price in it: the stored spec holds both.)"""
    changed = resume_conflict(p.spec, stored_spec)
    if changed:
        raise SpecError(
            f"study {p.study_name!r} was run with another {changed}: resume it with the "
            f"same settings, or use a new --study"
        )


def open_tuner(
    p: Prepared,
    callbacks: Callbacks | None = None,
    storage_url: str | None = None,
    allow_mixed_hardware: bool = False,
    slot: int = 0,
    *,
    cpus: set[int] | None = None,
    device_env: dict[str, str] | None = None,
    coordinate: CoordinatorFactory = Alone,
    bench: Bench | None = None,
    monitor: MonitorFactory | None = None,
    record_hardware: bool = True,
    ports: Callable[[str], int] = free_port,
) -> Tuner:
    """Create or join the study. The creator stores the spec (so `kvtune worker` needs only the
    storage URL and study name) and queues the baseline as the first trial. `slot` is this
    worker's place (0 = the process that created the study): its sampler seed and CPU set;
    `cpus` and `device_env` its CPUs and GPUs; `bench` replaces the load client, `monitor` the
    interference monitor and `ports` the pick of each server's port (tests); `coordinate`: what
    the loop asks of the study's other workers (tuner/coordinator.py; none by default);
    `record_hardware=False` leaves the study's hardware to its first worker (a study set up on a
    login node for workers a scheduler places)."""
    url = storage_url or storage.sqlite_url(p.run_dir)
    same_study = identity(p.spec, p.launcher.model_path, p.space.knobs)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = storage.open_study(p.study_name, url, [o.direction.value for o in p.spec.objective], same_study)
    if "spec" not in study.user_attrs:
        study.set_user_attr("spec", p.spec.to_dict())
    else:
        refuse_changed_settings(p, study.user_attrs["spec"])
    stored_hw = study.user_attrs.get("hardware")
    here = {k: p.hardware.get(k) for k in HARDWARE_KEYS}
    if stored_hw is None:
        if record_hardware:
            study.set_user_attr("hardware", p.hardware)
    elif {k: stored_hw.get(k) for k in HARDWARE_KEYS} != here and not allow_mixed_hardware:
        raise SpecError(
            f"study {p.study_name!r} was measured on other hardware "
            f"({hardware.describe(stored_hw)}; this is {hardware.describe(p.hardware)}): "
            f"use a new --study (and --set warm_start={p.study_name}), or --set allow_mixed_hardware=true"
        )
    if not study.trials:
        study.enqueue_trial({}, user_attrs={"baseline": True})
        # A grid measures every config anyway (and Optuna's grid refuses a partial config).
        grid = p.spec.sampler is samplers.SamplerKind.GRID
        if p.spec.informed_start and p.spec.trials > 1 and not grid:
            guess = p.launcher.informed_start(p.space.knobs, p.spec.workload)
            if guess:
                study.enqueue_trial(guess, user_attrs={"informed_start": True})
    study.sampler = study_sampler(p.spec, p.space.knobs, len(study.trials), slot)
    what = Subject(p.spec, p.launcher, p.targets)
    if bench is not None:
        what = dataclasses.replace(what, bench=bench)
    if monitor is not None:
        what = dataclasses.replace(what, monitor=monitor)
    where = Placement.here(slot=slot, cpus=cpus, device_env=device_env, hardware=p.hardware, ports=ports)
    return Tuner(TunerContext(what, where, study, p.run_dir), p.space, callbacks, coordinate)
