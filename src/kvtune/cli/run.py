"""`kvtune run`: tune a server. The flags are declared once, in cli/run_flags.py (`RunFlags`);
here they become the typed, checked `RunOptions` (the study spec's overrides, how and where to
run it) before anything starts; `cli.one_study` (or `cli.multi`, several backends) runs the study
and `cli.render` prints the header and the summary."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import typer

from kvtune.cli.app import app
from kvtune.cli.flag_names import flag_of, flags_given, named_by_flag
from kvtune.cli.flag_record import command_signature
from kvtune.cli.flag_values import pause_seconds, prices, progress_mode, repeats_value, seconds, trace_of
from kvtune.cli.multi import run_backends
from kvtune.cli.one_study import run_study
from kvtune.cli.run_flags import RunFlags
from kvtune.durations import parse_duration
from kvtune.errors import SpecError
from kvtune.study.overrides import SpecOverrides, WorkloadOverrides
from kvtune.study.study_file import load_study_file
from kvtune.tuner.multi_backend import BackendChoice, parse_backends, single_backend_model
from kvtune.tuner.session import RunOptions, study_spec
from kvtune.tuner.trial.slots import check_gpu_slots, gpu_pool


def workload_overrides(f: RunFlags) -> WorkloadOverrides:
    """The workload flags given (None: the study file's or the default)."""
    rate_mode = WorkloadOverrides(mode="open") if f.rate is not None else WorkloadOverrides()
    return replace(
        rate_mode,
        concurrency=f.concurrency,
        prompt_tokens=f.prompt_tokens,
        output_tokens=f.output_tokens,
        prompt_spread=f.prompt_spread,
        output_spread=f.output_spread,
        num_requests=f.num_requests,
        warmup_requests=f.warmup_requests,
        rate=f.rate,
        dataset=f.dataset,
        endpoint=f.endpoint,
        shared_prefix_fraction=f.shared_prefix_fraction,
        shared_prefix_tokens=f.shared_prefix_tokens,
        shared_prefix_groups=f.prefix_groups,
        trace=trace_of(f.workload_kind),
        trace_requests=f.trace_requests,
        trace_window_s=seconds(f.trace_window, "--trace-window"),
        trace_speed=f.trace_speed,
        trace_length_scale=f.trace_length_scale,
        trace_max_tokens=f.trace_max_tokens,
        trace_time_unit=f.trace_time_unit,
        trace_model=f.trace_model,
        trace_log_type=f.trace_log_type,
        multiturn=True if f.workload_kind == "multiturn" else None,
        turns=f.turns,
        think_time_s=pause_seconds(f.think_time, "--think-time"),
        think_spread=f.think_spread,
    )


def spec_overrides(f: RunFlags, choice: BackendChoice) -> SpecOverrides:
    """The study spec's fields the flags set, over the study file's."""
    return SpecOverrides(
        targets=tuple(f.target) or None,
        trials=f.trials,
        study=f.study,
        model=f.model,
        backend=None if choice.several else next(iter(choice.backends), None),
        llama_server=f.llama_server,
        vllm_python=f.vllm_python,
        objective=tuple(f.objective) or None,
        seed=f.seed,
        repeats=repeats_value(f.repeats),
        confirm_top=f.confirm_top,
        confirm_pairs=f.confirm_pairs,
        informed_start=f.informed_start,
        time_budget_s=None if f.time_budget is None else parse_duration(f.time_budget),
        early_stop=None if f.early_stop else False,
        startup_timeout_s=seconds(f.startup_timeout, "--startup-timeout"),
        startup_stall_s=seconds(f.startup_stall, "--startup-stall"),
        sampler=f.sampler,
        slo=f.slo,
        draft_model=f.draft_model,
        speculative=f.speculative or None,
        fidelity_gate=None if f.fidelity_gate else False,
        workload=workload_overrides(f),
        **prices(f.price_per_hour, f.price_per_gpu_hour),
    )


#: Flags that name a file, a folder, a program, a study or an address: given empty, each would
#: silently mean its default (`--model ''` the demo model), so an empty one is refused.
NOT_EMPTY: dict[str, str] = {
    "model": "a GGUF file (llama-server), an HF folder or hub id (vLLM)",
    "hf_model": "an HF folder or hub id",
    "study_file": "a YAML study file",
    "runs_dir": "a folder",
    "deploy_host": "the address the launch script binds, e.g. 0.0.0.0",
    "llama_server": "the path of the llama-server binary",
    "vllm_python": "a Python with vLLM",
    "dataset": "a ShareGPT JSON or JSONL file",
    "draft_model": "a draft model's GGUF file",
    "storage": "a storage URL, e.g. postgresql://user@db/kvtune",
    "warm_start": "a study's name",
    "warm_start_storage": "a storage URL",
}


def refuse_empty(f: RunFlags) -> None:
    """An empty value given to a flag of `NOT_EMPTY`: one line naming the flag."""
    for name, what in NOT_EMPTY.items():
        value = getattr(f, name)
        if value is not None and not value.strip():
            raise SpecError(f"{flag_of(RunFlags, name)} is empty: give {what}, or leave the flag out")


def check_spec(opts: RunOptions) -> None:
    """The study spec built once before anything starts; a refusal about a value a flag gave
    names the flag (`--output-tokens must be at least 1`), not the study file's key."""
    try:
        study_spec(opts)
    except SpecError as e:
        raise SpecError(named_by_flag(str(e), flags_given(opts.spec_overrides))) from e


def run_options(f: RunFlags, choice: BackendChoice) -> RunOptions:
    """The checked request: the spec's overrides and how and where to run the study."""
    refuse_empty(f)
    if choice.several and f.setup_only:
        raise SpecError("--setup-only sets up one study: give one --backend")
    if f.gpus_per_trial > 0 and not f.setup_only:  # a scheduler gives each worker its GPUs
        check_gpu_slots(f.workers, f.gpus_per_trial, gpu_pool())
    opts = RunOptions(
        study_file=None if f.study_file is None else Path(f.study_file),
        file_data=None if f.study_file is None else load_study_file(f.study_file),  # read and checked once
        spec_overrides=spec_overrides(f, choice),
        runs_dir=f.runs_dir,
        deploy_host=f.deploy_host,
        deploy_port=f.deploy_port,
        storage=f.storage,
        workers=f.workers,
        gpus_per_trial=f.gpus_per_trial,
        warm_start=f.warm_start,
        warm_start_storage=f.warm_start_storage,
        allow_mixed_hardware=f.allow_mixed_hardware,
        setup_only=f.setup_only,
        cpus_per_trial=f.cpus_per_trial,
    ).validate()
    check_spec(opts)
    return opts


def output_mode(f: RunFlags) -> str:
    return "quiet" if f.quiet else "jsonl" if f.jsonl else progress_mode(f.progress)


def tune(f: RunFlags) -> int:
    """`kvtune run` from its flags; the exit status (0 best found, 1 nothing feasible, 130
    interrupted)."""
    choice = parse_backends(f.backend)
    opts = run_options(f, choice)
    mode = output_mode(f)
    if choice.several:
        return run_backends(opts, choice, f.hf_model, mode)
    if f.hf_model:  # the model this backend serves, of the pair given
        model_here = single_backend_model(study_spec(opts).backend, f.hf_model)
        opts = replace(opts, spec_overrides=replace(opts.spec_overrides, model=model_here))
    return run_study(opts, mode)


def run(**flags: Any) -> None:
    """Tune a server: launch it with candidate flags, measure real load, keep the best."""
    raise typer.Exit(tune(RunFlags(**flags)))


run.__signature__, run.__annotations__ = command_signature(RunFlags)  # type: ignore[attr-defined]
app.command()(run)
