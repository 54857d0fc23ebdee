"""`kvtune bench`: measure a running server the way a trial does (vLLM bench serve style).

With `--target`, the run is also a check: each target is shown met or missed and a miss exits
with status 1, so a deployment script (`kvtune export --format bench`) can confirm on the
production box what the study measured. The flags are declared in cli/bench_flags.py."""

from __future__ import annotations

import datetime
import json
from dataclasses import fields
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from kvtune.cli.app import app, console
from kvtune.cli.bench_flags import BenchFlags
from kvtune.cli.bench_sweep import check_sweep, curve_table, parse_rates, rate_unit, sweep, sweep_verdict
from kvtune.cli.flag_names import flag_of, named_by_flag
from kvtune.cli.flag_record import command_signature
from kvtune.cli.flag_values import plain_text, server_url, trace_of
from kvtune.errors import SpecError
from kvtune.objectives.slo import Slo, slo_field
from kvtune.objectives.targets import RATE_METRICS, Target, parse_targets
from kvtune.study.settings import by_key, of_field, parse_sets
from kvtune.workload import Workload
from kvtune.writable import check_file


def bench_targets(f: BenchFlags) -> list[Target]:
    """The --target list; a relative one (no baseline here) is one line, exit 2."""
    targets = parse_targets(list(f.target))
    relative = [t.text for t in targets if t.relative]
    if relative:
        raise SpecError(
            f"target {relative[0]!r} is relative to a baseline, which kvtune bench does not "
            f"have: give an absolute threshold, e.g. 'ttft<1s'"
        )
    fidelity = [t.text for t in targets if t.fidelity]
    if fidelity:
        raise SpecError(
            f"target {fidelity[0]!r} compares a config's answers with the server defaults', which "
            f"kvtune bench does not start: give it to kvtune run"
        )
    return targets


def bench_slo(f: BenchFlags, targets: list[Target]) -> Slo | None:
    """--slo, parsed as kvtune run parses it; a slo_attainment target without one is one line,
    exit 2 (nothing would be measured for it, so it could only be missed)."""
    if f.slo is None:
        wanting = next((t for t in targets if t.metric == "slo_attainment"), None)
        if wanting is not None:
            raise SpecError(
                f"target {wanting.text!r} needs per-request SLOs to measure: add --slo, e.g. 'ttft<2s,tpot<100ms'"
            )
        return None
    try:
        return slo_field(plain_text("--slo", f.slo, "per-request limits, e.g. 'ttft<2s,tpot<100ms'"))
    except SpecError as e:  # `slo is empty`, `slo limits ttft twice`: the key, typed as --slo
        raise SpecError(named_by_flag(str(e), {"slo": "--slo"})) from e


#: Flags of words that name a model, a file or a key: given empty, each would silently mean its
#: default (`--api-key ''` $OPENAI_API_KEY, `--model ''` the first model /v1/models lists).
TEXT_FLAGS: dict[str, str] = {
    "model": "the model name the server serves",
    "tokenizer": "a GGUF file or an HF folder",
    "api_key": "the server's bearer token",
}


def check_text_flags(f: BenchFlags) -> None:
    """The flags of `TEXT_FLAGS` given: not blank, plain text; an API key without blanks (a
    bearer token has none; a blank key was masked as *** between every word of a refusal). The
    --save file can be written: a folder, a path under a file, a folder not there was a traceback
    after the whole run."""
    for name, what in TEXT_FLAGS.items():
        value = getattr(f, name)
        if value is not None:
            plain_text(flag_of(BenchFlags, name), value, what)
    if f.api_key is not None and any(ch.isspace() for ch in f.api_key):
        raise SpecError("--api-key holds a blank: give the bearer token alone, without 'Bearer ' or spaces")
    if f.save is not None:
        check_file(plain_text("--save", f.save, "a file to write the results to"), "--save")


def bench_sets(items: list[str]) -> dict[str, Any]:
    """`--set`: workload settings only, `workload.` optional (`seed=1` is `workload.seed=1`). A
    refusal quotes the item as typed: it said `--set 'workload.seed=1'` for `seed=1`."""
    known = by_key()
    for item in items:
        key = item.partition("=")[0].strip()
        s = known.get(key)
        if s is not None and s.section != "workload" and f"workload.{key}" not in known:
            raise SpecError(
                f"--set {key} is a setting of kvtune run, not of the load: kvtune bench takes workload settings "
                f"(`kvtune settings` lists them)"
            )
    written = {item: item if item.startswith("workload.") else f"workload.{item}" for item in items}
    try:
        return parse_sets(list(written.values()))
    except SpecError as e:
        line = str(e)
        for typed, given in written.items():
            if typed != given:
                key, given_key = typed.partition("=")[0].strip(), given.partition("=")[0].strip()
                line = line.replace(f"'{given}'", f"'{typed}'").replace(f"--set {given_key}:", f"--set {key}:")
        raise SpecError(line) from e


def bench_workload(f: BenchFlags) -> Workload:
    """The checked workload: `--set`'s workload keys, then the flags, over the defaults."""
    sets = bench_sets(f.set)
    values: dict[str, Any] = dict(sets.get("workload") or {})
    flags: dict[str, str] = {}  # key -> the flag that gave it: a refusal names what was typed
    try:
        for field in fields(BenchFlags):
            where = field.metadata.get("setting")
            value = getattr(f, field.name)
            if where is not None and value is not None:
                s = of_field(*where)
                flags[s.key] = s.doc.bench_flag or s.key
                values[s.field] = s.check(value)
        rates = parse_rates(f.rate)
        if rates:  # a sweep's workload is checked at its first rate, each rate against its most
            flags["workload.rate"] = "--rate"
            for rate in rates:
                of_field("workload", "rate").check(rate)
            values.update(mode="open", rate=rates[0])
        if f.workload_kind == "multiturn":
            values["multiturn"] = True
        elif f.workload_kind is not None:
            values["trace"] = trace_of(f.workload_kind)
        _multiturn_only(values)
        return Workload(**values).validate()
    except SpecError as e:
        raise SpecError(named_by_flag(str(e), flags)) from e


def cache_policy(text: Optional[str], workload: Workload) -> Any:
    """--prompt-cache, or as kvtune run measured: workloads that reuse prefixes (a trace,
    conversations, a shared system prompt) with the prompt cache on, synthetic prompts without."""
    from kvtune.bench.server_kind import PromptCache

    if text is None:
        return PromptCache.ON if workload.reuses_prefixes else PromptCache.OFF
    try:
        return PromptCache(text)
    except ValueError:
        raise SpecError(f"--prompt-cache must be one of {', '.join(PromptCache.values())}, got {text!r}") from None


def measure(f: BenchFlags, base: str, workload: Workload, targets: list[Target], slo: Slo | None) -> Any:
    """Run the load against the server at `base`; the bench result. Goodput is as a trial counts
    it (requests meeting every absolute latency target); `slo` adds slo_attainment."""
    from kvtune.bench.client import BenchOptions, detect_model, resolve_api_key, slo_goodput
    from kvtune.bench.client import run as bench_run
    from kvtune.bench.server_kind import detect_server

    key = resolve_api_key(f.api_key)
    policy = cache_policy(f.prompt_cache, workload)
    model_name = f.model or detect_model(base, api_key=key)
    server = detect_server(base, api_key=key)
    latency = {t.metric: t.threshold for t in targets if t.upper and t.metric in ("ttft", "tpot", "e2el")}
    console.print(f"benchmarking {base} ({model_name}): {workload.describe()}", markup=False)
    console.print(f"server: {server.name}; {server.describe_policy(policy, workload)}", markup=False)
    if slo is not None:
        console.print(f"per-request SLOs: {slo.describe()} (slo_attainment: the share meeting all)", markup=False)
    options = BenchOptions(
        model_name,
        api_key=key,
        tokenizer=f.tokenizer,
        extra_body=server.cache_body(policy),
        goodput_fn=slo_goodput(latency) if latency else (slo.met if slo is not None else None),
        slo=slo,
        scrape_metrics=True,
        on_phase=lambda ph: console.print(f"[dim]... {ph}[/dim]"),
    )
    return bench_run(base, workload, options), model_name


def print_result(result: Any) -> None:
    from kvtune.bench.results_format import metrics_table, server_metrics_table

    table = Table(show_header=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    for label, value in [*metrics_table(result.metrics), *server_metrics_table(result.server_metrics)]:
        table.add_row(f"[bold]{label}[/bold]" if value == "" else label, value)
    console.print(table)
    for note in getattr(result, "notes", []) or []:
        console.print(f"note: {note}", markup=False)


def save_result(f: BenchFlags, workload: Workload, result: Any, model_name: str, base: str) -> None:
    """--save: vLLM bench serve's JSON with kvtune's per-request samples."""
    from kvtune.bench.results_format import to_vllm_json

    if not f.save:
        return
    info = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "model_id": model_name,
        "base_url": base,
        "backend": f"openai-{workload.endpoint}",
    }
    Path(f.save).expanduser().write_text(json.dumps(to_vllm_json(result, info), allow_nan=False, indent=1))
    console.print(f"saved {f.save}")


def checked(targets: list[Target], result: Any) -> int:
    """Each target met or missed; exit status 1 when one is missed or every request failed."""
    missed = [t for t in targets if not t.met(result.metrics)]
    for t in targets:
        console.print(
            f"target {t.constraint_key}: {'missed' if t in missed else 'met'} ({_shown(t, result.metrics)})",
            markup=False,
        )
    if missed:
        console.print(f"targets missed: {', '.join(t.constraint_key for t in missed)}", markup=False)
    failed = result.metrics.get("failed", 0)
    return 1 if missed or (failed and failed == result.metrics.get("num_requests")) else 0


def check_local_files(f: BenchFlags, workload: Workload) -> None:
    """The trace, dataset and tokenizer named: read before the server is asked anything, so a
    typo is that file's one line, not "cannot reach" when the server is down too."""
    from kvtune.bench.inputs import check_workload_files

    check_workload_files(workload)
    if f.tokenizer and ("/" in f.tokenizer or f.tokenizer.endswith(".gguf")) and not Path(f.tokenizer).exists():
        raise SpecError(f"--tokenizer {f.tokenizer!r} does not exist: give a GGUF file or an HF folder")


def bench(**flags: Any) -> None:
    """Measure a running server (vLLM bench serve style): TTFT, TPOT, ITL, E2EL, throughput, goodput."""
    f = BenchFlags(**flags)
    targets = bench_targets(f)
    slo = bench_slo(f, targets)
    base = server_url(f.url)
    check_text_flags(f)
    workload = bench_workload(f)
    rates = parse_rates(f.rate)
    check_sweep(rates, f.save)
    check_local_files(f, workload)
    if rates is not None and len(rates) > 1:
        raise typer.Exit(rate_sweep(f, base, workload, rates, targets, slo))
    result, model_name = measure(f, base, workload, targets, slo)
    print_result(result)
    save_result(f, workload, result, model_name, base)
    raise typer.Exit(checked(targets, result))


def rate_sweep(
    f: BenchFlags, base: str, workload: Workload, rates: list[float], targets: list[Target], slo: Slo | None
) -> int:
    """--rate 1,2,4,8: one run per rate (cli/bench_sweep.py), the goodput curve, its exit status."""
    rows = sweep(workload, rates, lambda w: measure(f, base, w, targets, slo)[0], targets)
    goodput = slo is not None or any(t.upper and t.metric in ("ttft", "tpot", "e2el") for t in targets)
    unit = rate_unit(workload)  # conversations/s for multi-turn: the achieved column stays req/s
    console.print(curve_table(rows, goodput=goodput, targets=bool(targets), unit=unit))
    line, status = sweep_verdict(rows, targets, unit)
    if line:
        console.print(line, markup=False)
    return status


bench.__signature__, bench.__annotations__ = command_signature(BenchFlags)  # type: ignore[attr-defined]
app.command()(bench)


def _multiturn_only(values: dict[str, Any]) -> None:
    """A conversation's setting given without --workload multiturn is one line, exit 2."""
    if values.get("multiturn"):
        return
    given = [k for k in ("turns", "think_time_s", "think_spread", "conversation_max_tokens") if k in values]
    if given:
        raise SpecError(f"workload.{given[0]} applies to --workload multiturn only: add --workload multiturn")


def _shown(t: Target, metrics: dict) -> str:
    """The measured value of a target's metric, in its unit."""
    v = t.value(metrics)
    if v == float("inf"):
        return "no value: requests failed"
    if t.metric in RATE_METRICS:  # error_rate, slo_attainment: shares
        return f"{v * 100:.1f}%"
    return f"{v:.0f} ms" if t.key.endswith("_ms") else f"{v:.1f}"
