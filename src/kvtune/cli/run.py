"""`kvtune run`: tune a server. The front door's flags are in cli/run_flags.py (`RunFlags`), every
setting is declared on its field (kvtune/setting.py); here the study file, `--set` and the flags
become the typed, checked `RunOptions` (the study's settings, how and where to run it) before
anything starts; `cli.one_study` (or `cli.multi`, several backends) runs the study
and `cli.render` prints the header and the summary."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, Mapping

import typer

from kvtune.cli.app import app
from kvtune.cli.flag_names import flag_of, flags_given, named_by_flag, refused_as_typed
from kvtune.cli.flag_record import command_signature
from kvtune.cli.flag_values import progress_mode, trace_of
from kvtune.cli.multi import run_backends
from kvtune.cli.one_study import run_study
from kvtune.cli.run_flags import RunFlags
from kvtune.errors import ModelError, SpecError
from kvtune.kinds import ProgressMode
from kvtune.study.settings import of_field, parse_sets, run_values
from kvtune.study.study_file import load_study_file
from kvtune.tuner.multi_backend import BackendChoice, parse_backends, single_backend_model
from kvtune.tuner.session import RunOptions, study_spec
from kvtune.tuner.trial.slots import check_gpu_slots, gpu_pool


def given_by_flags(f: RunFlags, choice: BackendChoice) -> dict[str, Any]:
    """The settings the front door's flags gave, in the study file's shape (by field name,
    `workload` a mapping of its own), each value checked by its setting."""
    top: dict[str, Any] = {}
    workload: dict[str, Any] = {}
    for field in fields(RunFlags):
        where = field.metadata.get("setting")
        value = getattr(f, field.name)
        if where is None or value is None or value is False or value == []:
            continue
        s = of_field(*where)
        try:
            (workload if s.section == "workload" else top)[s.field] = s.check(value)
        except SpecError as e:  # said under the flag typed, not the key
            raise SpecError(named_by_flag(str(e), {s.key: s.doc.run_flag or s.key})) from e
    if not choice.several and choice.backends:
        top["backend"] = next(iter(choice.backends))
    if f.rate is not None:
        workload["mode"] = "open"
    if f.workload_kind == "multiturn":
        workload["multiturn"] = True
    elif f.workload_kind is not None:
        workload["trace"] = trace_of(f.workload_kind)
    return {**top, **({"workload": workload} if workload else {})}


def over(base: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """`given` laid over `base`, both in the study file's shape (the workload merged key by key)."""
    workload = {**(base.get("workload") or {}), **(given.get("workload") or {})}
    space = {**(base.get("space") or {}), **(given.get("space") or {})}
    merged = {**base, **given}
    merged.update({"workload": workload} if workload else {})
    merged.update({"space": space} if space else {})
    return merged


#: Flags that name a file, a folder, a study or an address: given empty, each would silently
#: mean its default (`--model ''` the demo model), so an empty one is refused.
NOT_EMPTY: dict[str, str] = {
    "model": "a GGUF file (llama-server), an HF folder or hub id (vLLM)",
    "study_file": "a YAML study file",
    "runs_dir": "a folder",
    "dataset": "a ShareGPT JSON or JSONL file",
    "storage": "a storage URL, e.g. postgresql://user@db/kvtune",
}


def refuse_empty(f: RunFlags) -> None:
    """An empty value given to a flag of `NOT_EMPTY`: one line naming the flag."""
    for name, what in NOT_EMPTY.items():
        value = getattr(f, name)
        if value is not None and not value.strip():
            raise SpecError(f"{flag_of(RunFlags, name)} is empty: give {what}, or leave the flag out")


def check_spec(opts: RunOptions, by_flags: Mapping[str, Any]) -> None:
    """The study spec built once before anything starts; a refusal about a value a flag gave
    names the flag (`--output-tokens must be at least 1`), not the study file's key."""
    try:
        study_spec(opts)
    except SpecError as e:
        raise SpecError(named_by_flag(str(e), flags_given(by_flags))) from e


def run_options(f: RunFlags, choice: BackendChoice) -> RunOptions:
    """The checked request: the study file, then `--set`, then the flags, each over the last;
    the run settings among them say where and how to run the study, the rest make its spec."""
    refuse_empty(f)
    file_data = {} if f.study_file is None else load_study_file(f.study_file)  # read and checked once
    by_flags = given_by_flags(f, choice)
    given = over(parse_sets(f.set), by_flags)
    runs = run_values(over(file_data, given))
    if choice.several and runs.get("setup_only"):
        raise SpecError("--setup-only sets up one study: give one --backend")
    try:
        opts = RunOptions(
            study_file=None if f.study_file is None else Path(f.study_file),
            file_data=file_data,
            given=given,
            **runs,
        ).validate()
    except SpecError as e:
        raise SpecError(named_by_flag(str(e), flags_given(by_flags))) from e
    if opts.gpus_per_trial > 0 and not opts.setup_only:  # a scheduler gives each worker its GPUs
        check_gpu_slots(opts.workers, opts.gpus_per_trial, gpu_pool())
    check_spec(opts, by_flags)
    return opts


def model_as_typed(f: RunFlags, choice: BackendChoice) -> AbstractContextManager[None]:
    """The model (and a draft) is read when its launcher is built, after the flags were checked;
    its refusal opens with the key it came in as (`model`, from `--set` or the study file), or
    with --model when that flag gave it (issue 41: a refusal is read under what was typed)."""
    return refused_as_typed(flags_given(given_by_flags(f, choice)), ModelError)


def output_mode(f: RunFlags) -> str:
    """--quiet, --jsonl or --progress: one of them; two contradict each other (the first of
    quiet, jsonl, progress silently won)."""
    progress_mode(f.progress)  # a misspelt mode is named as such, not as a contradiction
    chosen = {mode: flag for mode, flag, on in (("quiet", "--quiet", f.quiet), ("jsonl", "--jsonl", f.jsonl)) if on}
    if f.progress != ProgressMode.AUTO:  # --progress quiet with --quiet says it twice, not two things
        chosen.setdefault(f.progress, f"--progress {f.progress}")
    if len(chosen) > 1:
        raise SpecError(f"{' and '.join(chosen.values())} contradict each other: give one")
    return "quiet" if f.quiet else "jsonl" if f.jsonl else progress_mode(f.progress)


def tune(f: RunFlags) -> int:
    """`kvtune run` from its flags; the exit status (0 best found, 1 nothing feasible, 130
    interrupted)."""
    choice = parse_backends(f.backend)
    opts = run_options(f, choice)
    mode = output_mode(f)
    with model_as_typed(f, choice):
        if choice.several:
            return run_backends(opts, choice, opts.hf_model, mode)
        if opts.hf_model:  # the model this backend serves, of the pair given
            model_here = single_backend_model(study_spec(opts).backend, opts.hf_model)
            opts = replace(opts, given={**opts.given, "model": model_here})
        return run_study(opts, mode)


def run(**flags: Any) -> None:
    """Tune a server: launch it with candidate flags, measure real load, keep the best."""
    raise typer.Exit(tune(RunFlags(**flags)))


run.__signature__, run.__annotations__ = command_signature(RunFlags)  # type: ignore[attr-defined]
app.command()(run)
