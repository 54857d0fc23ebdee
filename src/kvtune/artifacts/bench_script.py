"""`kvtune export --format bench`: a script that checks a deployed server against the study.

What a study measured on the tuning box is a claim until it is seen on the production box. The
script re-runs the study's workload (users or rate, prompt and output lengths, requests, warm-up,
dataset, shared prefix, seed) against the deployed server with `kvtune bench`, with the study's
targets (relative ones fixed at the thresholds the baseline gave them, and the error-rate target
the study added), and exits with kvtune bench's status: 0 when every target held, 1 when one was
missed. It first prints the equivalent `vllm bench serve` command line, for whoever wants the
figure from vLLM's own benchmark. A capacity study is checked at the capacity it found. Pure:
results in, script text out; `export.write` makes it executable.
"""

from __future__ import annotations

import shlex
from dataclasses import replace

from kvtune.errors import SpecError, TargetError
from kvtune.objectives.targets import Target, with_default_error_target
from kvtune.study.spec import StudySpec
from kvtune.workload import Workload

# Target metrics vLLM's --goodput understands (ms).
GOODPUT_METRICS = ("ttft", "tpot", "e2el")
DEMO_HF_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the demo model (spec model None)


def absolute_targets(results: dict) -> list[Target]:
    """The study's targets as absolute thresholds: relative ones set from the baseline."""
    spec = StudySpec.from_dict(results.get("spec") or {})
    base = next((t for t in results.get("trials") or [] if t.get("baseline")), None)
    out = []
    for t in with_default_error_target(list(spec.targets)):
        if t.relative:
            try:
                t = t.resolve((base or {}).get("metrics") or {})
            except TargetError:
                raise SpecError(
                    f"target {t.text!r} is relative to the baseline, and the baseline was "
                    f"not measured: there is no threshold to check"
                ) from None
            t = replace(t, factor=None)
        out.append(t)
    return out


def load_for(trial: dict, spec: StudySpec) -> Workload:
    """The workload to re-run; a capacity study's at the capacity the trial reached."""
    w = spec.workload
    if not spec.is_capacity:
        return w
    capacity = (trial.get("metrics") or {}).get("capacity")
    if not capacity:
        raise SpecError(f"trial {trial.get('number')} held no load: there is no capacity to verify")
    return replace(w, rate=capacity) if w.mode == "open" else replace(w, concurrency=int(capacity))


def bench_args(w: Workload, targets: list[Target]) -> list[str]:
    """`kvtune bench` flags for workload `w` and `targets` (the URL goes first)."""
    args: list[object] = [
        "--prompt-tokens",
        w.prompt_tokens,
        "--output-tokens",
        w.output_tokens,
        "--num-requests",
        w.num_requests,
        "--warmup-requests",
        w.warmup_requests,
        "--timeout",
        w.request_timeout_s,
        "--seed",
        w.seed,
        "--endpoint",
        w.endpoint,
    ]
    if w.mode == "open":
        args += ["--rate", w.rate, "--arrival", w.arrival, "--burstiness", w.burstiness]
    else:
        args += ["--concurrency", w.concurrency]
    if w.duration_s:
        args += ["--duration", w.duration_s]
    if w.dataset:
        args += ["--dataset", w.dataset]
    if w.shared_prefix_fraction:
        args += [
            "--shared-prefix-fraction",
            w.shared_prefix_fraction,
            "--shared-prefix-tokens",
            w.shared_prefix_tokens,
            "--prompt-cache",
            "on",
        ]  # as the tuner measured a shared-prefix workload
    for t in targets:
        args += ["--target", t.constraint_key]
    return [str(a) for a in args]


def vllm_args(w: Workload, targets: list[Target], model: str) -> list[str]:
    """The same load as `vllm bench serve` flags (the base URL goes in as $URL)."""
    chat = w.endpoint == "chat"
    args: list[object] = [
        "vllm",
        "bench",
        "serve",
        "--backend",
        "openai-chat" if chat else "openai",
        "--endpoint",
        "/v1/chat/completions" if chat else "/v1/completions",
        "--model",
        model,
    ]
    if w.dataset:
        args += ["--dataset-name", "sharegpt", "--dataset-path", w.dataset]
    else:
        args += [
            "--dataset-name",
            "random",
            "--random-input-len",
            w.prompt_tokens,
            "--random-output-len",
            w.output_tokens,
        ]
        if w.shared_prefix_fraction:
            args += ["--random-prefix-len", w.shared_prefix_tokens]
    args += ["--ignore-eos", "--num-prompts", w.num_requests, "--num-warmups", w.warmup_requests, "--seed", w.seed]
    if w.mode == "open":
        args += ["--request-rate", w.rate, "--burstiness", w.burstiness]
    else:
        args += ["--max-concurrency", w.concurrency, "--request-rate", "inf"]
    args += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,95,99"]
    goodput = [f"{t.metric}:{t.threshold:g}" for t in targets if t.metric in GOODPUT_METRICS and t.upper]
    if goodput:
        args += ["--goodput", *goodput]
    return [str(a) for a in args]


def render(trial: dict, results: dict, host: str, port: int, header: list[str]) -> str:
    """The verification script for `trial` of `results` (header: the launch script's lines)."""
    spec = StudySpec.from_dict(results.get("spec") or {})
    w = load_for(trial, spec)
    targets = absolute_targets(results)
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{port}"
    model = str(spec.model or DEMO_HF_ID)
    if model.endswith(".gguf"):  # vllm bench serve tokenizes with --model: it needs the HF id
        model = "<the model's Hugging Face id>"
    bench = " ".join(shlex.quote(a) for a in bench_args(w, targets))
    vllm = shlex.join(vllm_args(w, targets, model))
    local_model = spec.model if str(spec.model or "").startswith("/") else ""
    lines = [
        "#!/usr/bin/env bash",
        "# Generated by kvtune: checks a deployed server against the study's workload and targets.",
        *[f"# {h}" for h in header],
        "# targets checked: " + ", ".join(t.constraint_key for t in targets),
        f"# usage: verify.sh [BASE_URL]   (default {url}); exit 0 = every target held,",
        "#        1 = a target was missed (or every request failed), 2 = bad input.",
        "# KVTUNE names the kvtune command (default: kvtune), e.g. KVTUNE='python -m kvtune.cli';",
        "# KVTUNE_TOKENIZER a GGUF file or HF folder whose tokenizer makes prompt sizes exact",
        "# (default: the study's model where it exists on this box; else sizes are approximate).",
        "set -euo pipefail",
        f'URL="${{1:-{url}}}"',
        'read -r -a KVTUNE_CMD <<< "${KVTUNE:-kvtune}"',
        f"MODEL_TOKENIZER={shlex.quote(str(local_model))}",
        'TOKENIZER="${KVTUNE_TOKENIZER:-$MODEL_TOKENIZER}"',
        "EXTRA=()",
        'if [ -n "$TOKENIZER" ] && [ -e "$TOKENIZER" ]; then EXTRA=(--tokenizer "$TOKENIZER"); fi',
        "echo 'The same load with vLLM bench serve (not run here):'",
        f"printf '  %s --base-url %s\\n' {shlex.quote(vllm)} \"$URL\"",
        f'exec "${{KVTUNE_CMD[@]}}" bench "$URL" {bench} ${{EXTRA[@]+"${{EXTRA[@]}}"}}',
        "",
    ]
    return "\n".join(lines)
