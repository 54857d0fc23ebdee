"""The checks of benchmarks/gpu_acceptance.sh, read from a finished study: PASS/FAIL/SKIP lines
with their figures (the shell script collects them into its summary).

    python benchmarks/gpu_checks.py RESULTS_JSON --mode gpu|cpu [--nvidia-smi-log F] [--idle-mib N]

- servers started: every trial's llama-server started and was measured.
- KV MiB: llama-server's ``llama_kv_cache: size = N MiB`` line (logged at verbosity 4) against the
  planner's figure for the trial's --ctx-size, --parallel, unified or not, and cache types
  (kvtune.planner.kv); within 2%.
- layers offloaded (GPU): ``offloaded N/M layers to GPU`` against -ngl (M is the layers plus the
  output layer; -ngl 99 asks for all M); a trial without -ngl (the server's default, fit) is shown.
- GPU memory released (GPU): from nvidia-smi polled through the study (one line per compute
  process, one total per poll): no server's memory still held once the next server holds any,
  and the card back within 64 MiB of its idle figure at the end.
- fidelity gate: on, and it probed the configs that change the numerics.
- verdict: the study's verdict and best command line (or why there is none).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path
from typing import Any

KV_LINE = re.compile(r"llama_kv_cache: size =\s*([\d.]+) MiB")
OFFLOAD_LINE = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
TOLERANCE = 0.02
RELEASED_SLACK_MIB = 64


def opt(argv: list[str], name: str, default: str) -> str:
    return argv[argv.index(name) + 1] if name in argv else default


def flags(argv: list[str]) -> str:
    """The tuned flags of a server argv (no binary, model, host or port)."""
    out, skip = [], False
    for a in argv[1:]:
        if skip:
            skip = False
            continue
        if a in ("--model", "--host", "--port"):
            skip = True
            continue
        out.append(a)
    return " ".join(out) or "(server defaults)"


def planned_kv_mib(t: dict[str, Any], model: str) -> float:
    from kvtune.planner.kv import kv_bytes_per_sequence, llama_server_kv_tokens
    from kvtune.planner.shape import shape_from_gguf

    argv = t["argv"]
    facts = t.get("server_facts") or {}
    unified = bool(facts.get("kv_unified"))
    if "--ctx-size" in argv:
        ctx, parallel = int(opt(argv, "--ctx-size", "0")), int(opt(argv, "--parallel", "1"))
    else:  # the server's defaults: what it logged it set up
        parallel = int(facts.get("slots") or 1)
        ctx = int(facts.get("ctx_per_slot") or 0) * (1 if unified else parallel)
    tokens = llama_server_kv_tokens(ctx, parallel, unified)
    cache = (opt(argv, "--cache-type-k", "f16"), opt(argv, "--cache-type-v", "f16"))
    return kv_bytes_per_sequence(shape_from_gguf(model), tokens, cache) / 2**20


def kv_check(trials: list[dict[str, Any]], model: str) -> tuple[str, list[str]]:
    rows, bad, checked = [], [], 0
    for t in trials:
        log = Path(t.get("log_path") or "")
        text = log.read_text(errors="replace") if log.is_file() else ""
        m = KV_LINE.search(text)
        if not m:
            bad.append(f"trial {t['number']}: no KV size in {log}")
            continue
        logged, planned = float(m.group(1)), planned_kv_mib(t, model)
        err = (planned - logged) / logged
        checked += 1
        rows.append(f"#{t['number']} {logged:.2f}/{planned:.2f} MiB ({err:+.1%})")
        if abs(err) > TOLERANCE:
            bad.append(f"trial {t['number']}: planner {planned:.2f} MiB vs logged {logged:.2f} MiB ({err:+.2%})")
    figures = f"logged/planned: {'; '.join(rows)}"
    if bad or not checked:
        return f"FAIL: KV MiB within 2% of the planner ({'; '.join(bad) or 'no trial to check'}; {figures})", rows
    return f"PASS: KV MiB within 2% of the planner ({checked} trials; {figures})", rows


def offload_check(trials: list[dict[str, Any]]) -> str:
    rows, bad = [], []
    for t in trials:
        log = Path(t.get("log_path") or "")
        m = OFFLOAD_LINE.search(log.read_text(errors="replace") if log.is_file() else "")
        argv = t["argv"]
        if not m:
            bad.append(f"trial {t['number']}: no 'offloaded N/M layers' line")
            continue
        got, total = int(m.group(1)), int(m.group(2))
        if "--n-gpu-layers" in argv:
            want = min(int(opt(argv, "--n-gpu-layers", "0")), total)
            rows.append(f"#{t['number']} -ngl {opt(argv, '--n-gpu-layers', '')}: {got}/{total}")
            if got != want:
                bad.append(f"trial {t['number']}: -ngl asks {want}, offloaded {got}/{total}")
        else:
            rows.append(f"#{t['number']} default: {got}/{total}")
    status = "FAIL" if bad else "PASS"
    return f"{status}: layers offloaded as -ngl asks ({'; '.join(bad + rows)})"


def memory_check(log: Path, idle_mib: float, servers: int = 0) -> str:
    """Each compute process's memory gone before the next process holds any, and the card back
    to idle at the end. Where nvidia-smi lists no processes (some containers hide them), the
    card's total must fall back to idle at least once per server started instead."""
    spans: dict[int, list[float]] = {}
    totals: list[tuple[float, float]] = []
    for line in log.read_text().splitlines() if log.is_file() else []:
        parts = [p.strip() for p in line.replace(",", " ").split()]
        try:
            if len(parts) >= 3 and parts[1] == "total":
                totals.append((float(parts[0]), float(parts[2])))
            elif len(parts) >= 4 and parts[1] == "app":
                span = spans.setdefault(int(parts[2]), [float(parts[0]), float(parts[0])])
                span[1] = float(parts[0])
        except ValueError:
            continue
    if not totals:
        return f"FAIL: GPU memory released after every trial (no nvidia-smi readings in {log})"
    busy = [v > idle_mib + RELEASED_SLACK_MIB for _, v in totals]
    releases = sum(1 for a, b in zip(busy, busy[1:]) if a and not b)
    order = sorted(spans.items(), key=lambda kv: kv[1][0])
    overlaps = [
        f"pid {a} still held memory when pid {b} took some"
        for (a, sa), (b, sb) in zip(order, order[1:])
        if sa[1] >= sb[0]
    ]
    peak, end = max(v for _, v in totals), totals[-1][1]
    figures = (
        f"{len(order)} server processes seen, {releases} falls back to idle for {servers} trials, "
        f"peak {peak:.0f} MiB, idle {idle_mib:.0f} MiB before, {end:.0f} MiB after"
    )
    why = "; ".join(overlaps)
    if end > idle_mib + RELEASED_SLACK_MIB:
        why = why or "memory not back to idle"
    elif not order and releases < servers:
        why = "no process listed, and fewer falls back to idle than trials"
    if why:
        return f"FAIL: GPU memory released after every trial ({why}; {figures})"
    return f"PASS: GPU memory released after every trial ({figures})"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("results", type=Path)
    p.add_argument("--mode", choices=("gpu", "cpu"), required=True)
    p.add_argument("--nvidia-smi-log", type=Path)
    p.add_argument("--idle-mib", type=float, default=0.0)
    a = p.parse_args()
    if not a.results.is_file():
        print(f"FAIL: results.json written (no {a.results})")
        return 1
    r = json.loads(a.results.read_text())
    model = r["spec"]["model"]
    trials = r["trials"]
    started = [t for t in trials if t.get("launched") and t.get("startup_s") is not None]
    lines = []
    print(f"{'trial':>5} {'start_s':>7} {'feasible':>8}  flags")
    for t in trials:
        start = t.get("startup_s")
        print(
            f"{t['number']:>5} {'-' if start is None else f'{start:.1f}':>7} {t.get('feasible')!s:>8}  {flags(t['argv'])}"
        )
    dupes = [t for t in trials if t.get("duplicate_of") is not None]  # the same config again: not re-run
    failed = [f"#{t['number']}: {t.get('reason') or t.get('failure')}" for t in trials if t not in started + dupes]
    lines.append(
        f"{'FAIL' if failed or not started else 'PASS'}: every trial's server started "
        f"({len(started)} of {len(trials)}, {len(dupes)} repeated configs not re-run"
        f"{'; ' + '; '.join(failed) if failed else ''})"
    )
    kv_line, _ = kv_check(started, model)
    lines.append(kv_line)
    if a.mode == "gpu":
        lines.append(offload_check(started))
        lines.append(memory_check(a.nvidia_smi_log or Path(""), a.idle_mib, len(started)))
    else:
        lines.append("SKIP: layers offloaded as -ngl asks (no GPU)")
        lines.append("SKIP: GPU memory released after every trial (no GPU)")
    gate = r.get("fidelity") or {}
    numerics = [
        t
        for t in started
        if {opt(t["argv"], "--cache-type-k", "f16"), opt(t["argv"], "--cache-type-v", "f16")} != {"f16"}
    ]
    probed = int(gate.get("probed") or 0)
    figures = (
        f"state {gate.get('state')}, target {gate.get('target')}, {len(numerics)} trials with a quantized KV cache, "
        f"{probed} configs probed, {len(gate.get('refused') or [])} refused"
    )
    if not numerics:
        lines.append(f"SKIP: fidelity gate ran (no trial changed the numerics; {figures})")
    else:
        gate_ok = gate.get("state") == "on" and probed >= len(numerics)
        lines.append(f"{'PASS' if gate_ok else 'FAIL'}: fidelity gate ran ({figures})")
    best = r.get("best_trial")
    named = r.get("named_best") or {}
    if best is not None:
        argv = next(t["argv"] for t in trials if t["number"] == best)
        verdict = f"best trial {best}, {named.get('why') or 'named'}: {shlex.join(argv)}"
    else:
        verdict = f"no best command line: {named.get('why') or 'no feasible config'}"
    lines.append(f"{'PASS' if 'named_best' in r else 'FAIL'}: verdict and best command line ({verdict})")
    for line in lines:
        print(line)
    return 1 if any(line.startswith("FAIL") for line in lines) else 0


if __name__ == "__main__":
    raise SystemExit(main())
