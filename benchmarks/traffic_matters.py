"""Does the traffic change the best config? The demo tuned on synthetic prompts and on multi-turn
chat, then both bests re-measured under both workloads (issue 20).

    PYTHONPATH=src .venv/bin/python benchmarks/traffic_matters.py [--trials 6] [--repeats 3]
        [--seed 0] [--turns 4] [--think-time 1s] [--workdir kvtune-runs/traffic-matters]
        [--out docs/traffic-table.md] [--json measurements.json] [--run-arg=--confirm-top=0 ...]

1. Two real `kvtune run` studies of the demo (llama-server + SmolLM2, studies/smollm2-cpu-llamacpp.yaml:
   4 users, 128-token prompts, 32 output tokens, 16 measured requests, relative targets
   ttft_p95<1.5x and tpot_p95<2x, confirm_pairs 2), the same --trials and --seed, each in its
   own folder under --workdir: (A) the study file's workload, every prompt new (cache-busting);
   (B) the same users and sizes as --turns-turn conversations (`--workload multiturn --turns 4
   --think-time 1s`): turn 4 sends ~690 prompt tokens (the history and the new 128), 4x a first
   turn's, so a prefix cache and the slots a conversation keeps decide what later turns cost; the search
   then also tries --cache-reuse and --slot-prompt-similarity. Running the script again resumes
   both studies (a finished one just prints its result).
2. Each study's named best is read from its results.json (`best_trial`, the confirmation's
   winner). Both naming one config is a finding too: the table is then an A/A.
3. Both bests are re-measured under both workloads through kvtune's own trial runner (the path
   the confirmation takes: a fresh server per measurement, the launcher's argv, the same
   BenchOptions and per-request cache policy as the tuning: `cache_prompt` on for the
   conversations only, no early stop, the interference monitor retaking a disturbed
   measurement). --repeats rounds, each A B B A: round r measures (A, w1) (B, w1) (B, w2)
   (A, w2), with w1/w2 = random/multi-turn for even r and swapped for odd r, so slow drift hits
   both configs alike and each pair in a column is measured back to back. Each round uses a new
   prompt seed (the same for both configs). Relative targets resolve against the baseline of
   the workload's own study (the mean of its first measurement and its valid re-measurements);
   the defaults are not re-measured here.
4. Prints (and --out writes) the 2x2 table of output tok/s (mean +/- SD over rounds), the
   target metrics per cell, the ratio of the column's own best to the other with a 95%
   interval (a paired log-ratio over the rounds, `paired_interval` below, with the noise
   pooled over the four cells' rounds), the flags of both, the commands, the host CPU and the
   load before and after.

Takes real llama-server and a quiet machine: about 20-30 minutes on a 2-core CPU with the defaults.
A study that names no best (on a busy machine every measurement is disturbed, so none is evidence)
stops the script with the reason, status 1.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence

from kvtune.jsonsafe import dumps
from kvtune.objectives.targets import Target, with_default_error_target
from kvtune.study.measured_noise import PRIOR, Noise, pool, quantile
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import StudySpec
from kvtune.tuner.remeasure import mean_metrics
from kvtune.verdict.stats import POWER, t_quantile

# The difference the comparison must be able to see (issue 30): 15% at 80% power.
WANTED_EFFECT = 0.15

REPO = Path(__file__).resolve().parents[1]
STUDY_FILE = REPO / "studies" / "smollm2-cpu-llamacpp.yaml"
WORKLOADS = ("random", "multiturn")  # the studies, and the columns
LABEL = {"random": "random prompts", "multiturn": "multi-turn"}
OBJECTIVE = "output_throughput"
# (metrics key, label): the objective and what the targets read; later-turn TTFT for chat
SHOWN = (
    (OBJECTIVE, "output tok/s"),
    ("p95_ttft_ms", "TTFT p95 ms"),
    ("p95_tpot_ms", "TPOT p95 ms"),
    ("median_ttft_ms_later", "TTFT p50 later turns ms"),
    ("error_rate", "error rate"),
)
SEED_STEP = 7919  # as tuner/remeasure.py: round r's prompt seed = the study's + SEED_STEP x (r + 2)


# ---- pure parts (tests/unit/benchmarks/test_traffic_matters.py) ---------------------------------


def tune_command(kind: str, runs_dir: Path, trials: int, seed: int, extra: Sequence[str] = ()) -> list[str]:
    """The `kvtune run` of one study: the demo study file, its own --runs-dir and study name."""
    argv = [sys.executable, "-m", "kvtune.cli", "run", "--study-file", str(STUDY_FILE)]
    argv += ["--study", f"traffic-{kind}", "--runs-dir", str(runs_dir), "--trials", str(trials)]
    argv += ["--set", f"seed={seed}", "--progress", "plain", *extra]
    return argv


def workload_flags(kind: str, turns: int, think_time: str, requests: int | None, warmup: int | None) -> list[str]:
    """The flags that make study `kind`'s workload (the study file's sizes otherwise)."""
    flags = (
        ["--workload", "multiturn", "--set", f"workload.turns={turns}", "--set", f"workload.think_time_s={think_time}"]
        if kind == "multiturn"
        else []
    )
    flags += [] if requests is None else ["--set", f"workload.num_requests={requests}"]
    return flags + ([] if warmup is None else ["--set", f"workload.warmup_requests={warmup}"])


@dataclass(frozen=True)
class Best:
    """A study's named best, and what re-measuring under that study's workload needs."""

    kind: str
    trial: TrialOutcome
    spec: StudySpec
    baseline: TrialOutcome  # metrics: the reference relative targets resolve against
    why: str

    @property
    def targets(self) -> list[Target]:
        """The study's targets and the error-rate target every study holds unless it names one."""
        return with_default_error_target(list(self.spec.targets))

    @property
    def flags(self) -> dict[str, Any]:
        return {**self.trial.candidate.flags, **{f"env:{k}": v for k, v in self.trial.candidate.env.items()}}


def read_best(results: dict[str, Any], kind: str) -> Best:
    """The named best of a results.json payload (`best_trial`) and its study's baseline, whose
    metrics become the mean of its first measurement and its valid re-measurements."""
    trials = {t["number"]: t for t in results.get("trials") or []}
    number = results.get("best_trial")
    if number is None or number not in trials:
        raise ValueError(f"the {kind} study named no best: {results.get('named_best') or 'no config met the targets'}")
    base = TrialOutcome.from_dict(trials[results["baseline_trial"]])
    again = [r.get("metrics") or {} for r in (base.confirmation or {}).get("runs") or [] if r.get("valid", True)]
    base = replace(base, metrics=mean_metrics([base.metrics or {}, *again]) or {})
    why = (results.get("named_best") or {}).get("why") or ""
    return Best(kind, TrialOutcome.from_dict(trials[number]), StudySpec.from_dict(results["spec"]), base, why)


def same_config(a: Best, b: Best) -> bool:
    return a.flags == b.flags


def argv_with_port(argv: Sequence[str], port: str = "PORT") -> list[str]:
    """`argv` with its --port value replaced (two argvs of one config then compare equal)."""
    out = list(argv)
    for i, word in enumerate(out[:-1]):
        if word == "--port":
            out[i + 1] = port
    return out


def schedule(repeats: int) -> list[tuple[int, str, str]]:
    """(round, config, workload) in measuring order; configs are the studies that named them.
    Round r: (A, w1) (B, w1) (B, w2) (A, w2), w1 w2 = random multiturn for even r, swapped for odd."""
    a, b = WORKLOADS
    out = []
    for r in range(repeats):
        w1, w2 = (a, b) if r % 2 == 0 else (b, a)
        out += [(r, a, w1), (r, b, w1), (r, b, w2), (r, a, w2)]
    return out


@dataclass
class Measured:
    """One re-measurement: config (the study that named it) under workload, its figures."""

    round: int
    config: str
    workload: str
    metrics: dict[str, float] = field(default_factory=dict)
    feasible: bool = False
    reason: str = ""
    disturbed: bool = False
    foreign_cores: float | None = None
    retaken: int = 0  # measurements dropped as disturbed and taken again
    seconds: float = 0.0


def cell(ms: Sequence[Measured], config: str, workload: str) -> list[Measured]:
    return sorted((m for m in ms if m.config == config and m.workload == workload), key=lambda m: m.round)


def value(m: Measured, key: str) -> float | None:
    v = m.metrics.get(key)
    return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None


def mean_sd(runs: Sequence[Measured], key: str) -> str:
    """``mean ± SD`` of `key` over `runs` (n/a when no run reports it, failed when none has a figure)."""
    if not any(key in m.metrics for m in runs):
        return "n/a"
    values = [value(m, key) for m in runs]
    vals = [v for v in values if v is not None]
    if not vals:
        return "failed"
    text = f"{statistics.fmean(vals):.4g}"
    text += f" ± {statistics.stdev(vals):.2g}" if len(vals) > 1 else ""
    return text + ("" if len(vals) == len(values) else f" ({len(vals)} of {len(values)})")


def noise_of(ms: Sequence[Measured], key: str = OBJECTIVE) -> Noise:
    """The noise pooled over the four cells' rounds (kvtune's `study.measured_noise.pool`)."""
    cells = [(c, w) for c in WORKLOADS for w in WORKLOADS]
    return pool({i: [v for m in cell(ms, c, w) if (v := value(m, key)) is not None] for i, (c, w) in enumerate(cells)})


def t95(dof: int) -> float:
    """The two-sided 95% Student t quantile (the normal's for the prior's 0 dof)."""
    return quantile(0.975, dof)


@dataclass(frozen=True)
class PairedInterval:
    """The mean paired log-ratio own/other with its 95% interval; `source` says whose spread."""

    mean: float
    low: float
    high: float
    pairs: int
    dof: int
    source: str

    def ratio_text(self) -> str:
        """``+12.3% [+4.1%, +21.2%] (source)``: own relative to other, as people read it."""
        pct = [(math.exp(x) - 1) * 100 for x in (self.mean, self.low, self.high)]
        return f"{pct[0]:+.1f}% [{pct[1]:+.1f}%, {pct[2]:+.1f}%] ({self.source})"


def paired_interval(pairs: Sequence[tuple[float, float]], noise: Noise = PRIOR) -> PairedInterval:
    """95% interval of the mean of ``ln(a_i / b_i)`` over the (own, other) `pairs` (positive
    figures): Student t from the pairs' own spread once they have at least as many degrees of
    freedom as the pooled noise (and at least 2), else the pooled noise's ``s * sqrt(2 / n)``."""
    d = [math.log(a / b) for a, b in pairs]
    n = len(d)
    mean = sum(d) / n
    if n - 1 >= max(noise.dof, 2):
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1))
        half, dof, source = t95(n - 1) * sd / math.sqrt(n), n - 1, f"{n} pairs' own spread"
    else:
        half, dof, source = noise.t() * noise.rel_sd * math.sqrt(2 / n), noise.dof, noise.source()
    return PairedInterval(mean, mean - half, mean + half, n, dof, source)


def own_vs_other(ms: Sequence[Measured], workload: str, key: str = OBJECTIVE) -> PairedInterval | None:
    """Under `workload`, its own study's best over the other study's, paired by round; None
    without a usable pair (a failed side is a failure, not a ratio)."""
    other = WORKLOADS[1 - WORKLOADS.index(workload)]
    own = {m.round: v for m in cell(ms, workload, workload) if (v := value(m, key))}
    theirs = {m.round: v for m in cell(ms, other, workload) if (v := value(m, key))}
    pairs = [(own[r], theirs[r]) for r in sorted(own) if r in theirs]
    return paired_interval(pairs, noise_of(ms, key)) if pairs else None


def detectable(iv: PairedInterval) -> tuple[float, int]:
    """The smallest ratio difference these paired rounds detect with 80% power in a two-sided
    95% test, exp((t_0.975 + t_0.80) * se) - 1 with `iv`'s standard error and degrees of
    freedom, and the rounds that would detect WANTED_EFFECT (the same noise, n scaled by the
    square of the ratio of the two log effects)."""
    se = (iv.high - iv.low) / 2 / t95(iv.dof)
    factor = t95(iv.dof) + t_quantile(POWER, iv.dof)
    smallest = math.exp(factor * se) - 1
    rounds = math.ceil(iv.pairs * (factor * se / math.log1p(WANTED_EFFECT)) ** 2)
    return smallest, max(rounds, 2)


def power_text(iv: PairedInterval | None) -> str:
    """What the comparison could have seen: 'smallest detectable +X% (80% power); N rounds for 15%'."""
    if iv is None:
        return "no pair"
    smallest, rounds = detectable(iv)
    enough = "enough for" if smallest <= WANTED_EFFECT else f"{rounds} rounds would detect"
    return f"smallest detectable {smallest:+.0%} ({POWER:.0%} power); {enough} {WANTED_EFFECT:.0%}"


def targets_on_mean(targets: Sequence[Target], reference: dict[str, Any], runs: Sequence[Measured]) -> str:
    """'' when the mean of `runs` meets every target (relative ones resolved against
    `reference`), else what it misses; a run that failed outright decides on its own."""
    outright = [m for m in runs if not m.metrics]
    if outright:
        return f"{len(outright)} run(s) failed: {outright[0].reason}"
    mean = mean_metrics([m.metrics for m in runs]) or {}
    resolved = [t.resolve(reference) for t in targets]
    return "; ".join(f"{t.name} {t.value(mean):.4g} breaks {t.text}" for t in resolved if not t.met(mean))


def verdict(ms: Sequence[Measured], misses: dict[tuple[str, str], str], same: bool) -> str:
    """The answer in words, from the intervals and the targets."""
    if same:
        return (
            "No: both studies named the same config, so on this machine the traffic did not change the "
            "best config (the table is an A/A: its ratios show the noise)."
        )
    lines, beats = [], 0
    for w in WORKLOADS:
        other = WORKLOADS[1 - WORKLOADS.index(w)]
        iv = own_vs_other(ms, w)
        if misses.get((other, w)) and not misses.get((w, w)):
            beats += 1
            lines.append(f"under {LABEL[w]} the best of {LABEL[other]} misses the targets ({misses[(other, w)]})")
        elif iv is None:
            lines.append(f"under {LABEL[w]} no pair could be compared")
        elif iv.low > 0:
            beats += 1
            lines.append(f"under {LABEL[w]} its own best is faster beyond the noise: {iv.ratio_text()}")
        elif iv.high < 0:
            lines.append(f"under {LABEL[w]} the other study's best is faster beyond the noise: {iv.ratio_text()}")
        else:
            lines.append(f"under {LABEL[w]} not detected: {iv.ratio_text()}; {power_text(iv)}")
    head = {0: "No measurable difference", 1: "Partly", 2: "Yes"}[beats]
    return f"{head}: " + "; ".join(lines) + "."


def render(facts: dict[str, Any], bests: dict[str, Best], ms: Sequence[Measured], misses: dict) -> str:
    """The markdown page section: answer, 2x2 table, target metrics, flags, commands, host."""
    n = max((m.round for m in ms), default=-1) + 1
    out = [f"**Answer.** {verdict(ms, misses, same_config(*bests.values()))}", ""]
    out += [f"| output tok/s, mean ± SD over {n} rounds | " + " | ".join(f"under {LABEL[w]}" for w in WORKLOADS) + " |"]
    out += ["|---|" + "---|" * len(WORKLOADS)]
    for c in WORKLOADS:
        row = [f"best of {LABEL[c]} (trial {bests[c].trial.number})"]
        for w in WORKLOADS:
            runs = cell(ms, c, w)
            met = sum(1 for m in runs if m.feasible)
            row.append(f"{mean_sd(runs, OBJECTIVE)} (targets met {met}/{len(runs)})")
        out.append("| " + " | ".join(row) + " |")
    ivs = [own_vs_other(ms, w) for w in WORKLOADS]
    out.append(
        "| the column's own best / the other, paired, 95% | "
        + " | ".join("no pair" if iv is None else iv.ratio_text() for iv in ivs)
        + " |"
    )
    out.append("| what these rounds could detect | " + " | ".join(power_text(iv) for iv in ivs) + " |")
    out += ["", "| config | workload | " + " | ".join(label for _, label in SHOWN[1:]) + " | targets on the mean |"]
    out += ["|---|---|" + "---|" * len(SHOWN)]
    for c in WORKLOADS:
        for w in WORKLOADS:
            runs = cell(ms, c, w)
            figs = [mean_sd(runs, k) for k, _ in SHOWN[1:]]
            miss = misses.get((c, w), "")
            out.append(f"| best of {LABEL[c]} | {LABEL[w]} | " + " | ".join(figs) + f" | {miss or 'met'} |")
    out += ["", "Targets (relative ones against the baseline of that workload's own study):"]
    for w in WORKLOADS:
        b = bests[w]
        ref = b.baseline.metrics or {}
        resolved = ", ".join(f"{t.text} (= {t.resolve(ref).threshold:.4g})" for t in b.targets)
        out.append(f"- {LABEL[w]}: {resolved}")
    out += ["", "The two configs (flags changed from the server's defaults, as each study named them):"]
    for c in WORKLOADS:
        b = bests[c]
        flags = " ".join(f"{k}={v}" for k, v in b.flags.items()) or "(the defaults)"
        out.append(f"- best of {LABEL[c]}: trial {b.trial.number}: `{flags}` ({b.why})")
        out.append(f"  `{shlex.join(argv_with_port(b.trial.argv))}`")
    disturbed = sum(1 for m in ms if m.disturbed)
    retaken = sum(m.retaken for m in ms)
    out += ["", f"Host: {facts['host']}. Load (1, 5, 15 min): {facts['load']}."]
    out.append(
        f"Interference monitor over the {len(ms)} re-measurements: {disturbed} stayed disturbed, "
        f"{retaken} dropped and retaken; foreign cores max {facts['foreign_max']}."
    )
    out += ["", "Commands:", "", "```", *facts["commands"], "```"]
    return "\n".join(out) + "\n"


# ---- the real runs -------------------------------------------------------------------------------


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "n/a"


def tune(kind: str, argv: list[str], log: Path) -> dict[str, Any]:
    """Run one study (its plain progress echoed and logged); its results.json."""
    print(f"[{kind}] {shlex.join(argv)}", flush=True)
    t0 = time.monotonic()
    with log.open("a") as f, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as p:
        assert p.stdout is not None
        for line in p.stdout:
            f.write(line)
            print(f"[{kind}] {line}", end="", flush=True)
    if p.returncode not in (0, 1):
        raise SystemExit(f"the {kind} study failed (status {p.returncode}): see {log}")
    runs_dir = Path(argv[argv.index("--runs-dir") + 1])
    results = json.loads((runs_dir / f"traffic-{kind}" / "results.json").read_text())
    print(f"[{kind}] done in {time.monotonic() - t0:.0f} s (status {p.returncode})", flush=True)
    return results


def no_best(results: dict[str, Any], kind: str, log: Path) -> str:
    """Why a study gives nothing to compare, with the busy machine named when it was one."""
    disturbed = results.get("disturbed") or []
    why = (results.get("named_best") or {}).get("why") or "no config met the targets"
    busy = (
        f"; {len(disturbed)} of its measurements were disturbed by other load and are no evidence: "
        "run it on a quiet machine"
        if disturbed
        else ""
    )
    return f"the {kind} study named no best ({why}{busy}); nothing to compare (see {log})"


def runners(bests: dict[str, Best], pid_file: Path) -> dict[str, Any]:
    """One trial runner per workload, built as its study built it (spec, launcher, targets)."""
    from kvtune.launchers.registry import create_launcher
    from kvtune.tuner.trial.context import Placement, Subject
    from kvtune.tuner.trial.runner import TrialRunner

    def phase(n: int, text: str) -> None:
        print(f"      {time.strftime('%H:%M:%S')} {text}", flush=True)

    out = {}
    for w, b in bests.items():
        what = Subject(b.spec, create_launcher(b.spec), b.spec.judged_targets)
        out[w] = TrialRunner(what, Placement.here(), pid_file, on_phase=phase)
    return out


def remeasure(
    bests: dict[str, Best], repeats: int, workdir: Path, by_workload: dict[str, Any] | None = None
) -> list[Measured]:
    """The rounds of `schedule`, each config under each workload on a fresh server through that
    workload's trial runner (`by_workload`: a test's runners; default: as the studies built them)."""
    by_workload = by_workload or runners(bests, workdir / "server.pid")
    ms = []
    for r, c, w in schedule(repeats):
        runner, config, study = by_workload[w], bests[c], bests[w]
        outcome, port = runner.new_outcome(config.trial.number, config.trial.candidate, baseline=False)
        if argv_with_port(outcome.argv) != argv_with_port(config.trial.argv):
            print(f"    note: argv differs from the recorded one: {shlex.join(argv_with_port(outcome.argv))}")
        seed = (study.spec.workload.seed + SEED_STEP * (r + 2)) % 2**32
        print(f"  round {r + 1}/{repeats}: best of {LABEL[c]} under {LABEL[w]} (seed {seed})", flush=True)
        t0 = time.monotonic()
        workload = replace(study.spec.workload, seed=seed)
        folder = workdir / "remeasure" / f"r{r}-{c}-on-{w}"
        runner.run(outcome, port, folder, study.baseline, workload, early_stop=False)
        seen = outcome.interference or {}
        m = Measured(
            r, c, w, dict(outcome.metrics or {}), outcome.feasible, outcome.reason, outcome.disturbed,
            seen.get("foreign_cores"), len(outcome.disturbed_attempts), time.monotonic() - t0,
        )  # fmt: skip
        print(
            f"    {OBJECTIVE} {value(m, OBJECTIVE)}, TTFT p95 {value(m, 'p95_ttft_ms')} ms, "
            f"{'targets met' if m.feasible else 'MISSED: ' + m.reason}"
            f"{', disturbed' if m.disturbed else ''} ({m.seconds:.0f} s)",
            flush=True,
        )
        ms.append(m)
    return ms


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--trials", type=int, default=6, help="trials of each study, baseline included (make demo: 6)")
    ap.add_argument("--repeats", type=int, default=3, help="rounds of re-measurement (R)")
    ap.add_argument("--seed", type=int, default=0, help="both studies' sampler and prompt seed")
    ap.add_argument("--turns", type=int, default=4, help="multi-turn: turns per conversation")
    ap.add_argument("--think-time", default="1s", help="multi-turn: a user's pause between turns")
    ap.add_argument(
        "--num-requests", type=int, help="measured requests of both workloads (default: the study file's 16)"
    )
    ap.add_argument("--warmup-requests", type=int, help="warm-up requests of both (default: the study file's 4)")
    ap.add_argument(
        "--run-arg",
        action="append",
        default=[],
        help="one more `kvtune run` argument for both studies, e.g. --run-arg=--set --run-arg=confirm_top=0 (repeatable)",
    )
    ap.add_argument("--workdir", type=Path, default=Path("kvtune-runs/traffic-matters"))
    ap.add_argument("--out", type=Path, help="write the markdown section here (for docs/traffic.md)")
    ap.add_argument("--json", type=Path, help="write every measurement here")
    a = ap.parse_args()
    if a.trials < 2 or a.repeats < 1:
        ap.error("--trials needs 2 or more (the baseline and one config), --repeats 1 or more")
    from kvtune import hardware

    t0, load_before = time.monotonic(), loadavg()
    a.workdir.mkdir(parents=True, exist_ok=True)
    commands = [shlex.join([Path(sys.executable).name, *sys.argv])]
    bests = {}
    for kind in WORKLOADS:
        flags = workload_flags(kind, a.turns, a.think_time, a.num_requests, a.warmup_requests) + a.run_arg
        argv = tune_command(kind, a.workdir / kind, a.trials, a.seed, flags)
        commands.append(shlex.join(["kvtune", *argv[3:]]))
        log = a.workdir / f"{kind}.log"
        results = tune(kind, argv, log)
        try:
            bests[kind] = read_best(results, kind)
        except ValueError:
            print(no_best(results, kind, log), file=sys.stderr)
            return 1
    tuned_s = time.monotonic() - t0
    if same_config(*bests.values()):
        print("both studies named the same config: re-measuring it under both workloads anyway (an A/A)")
    ms = remeasure(bests, a.repeats, a.workdir)
    misses = {
        (c, w): targets_on_mean(bests[w].targets, bests[w].baseline.metrics or {}, cell(ms, c, w))
        for c in WORKLOADS
        for w in WORKLOADS
    }
    fp = hardware.fingerprint()
    foreign = [m.foreign_cores for m in ms if m.foreign_cores is not None]
    facts = {
        "host": f"{hardware.describe(fp)}, {fp['os']}",
        "load": f"{load_before} before, {loadavg()} after",
        "foreign_max": f"{max(foreign):.2f}" if foreign else "n/a",
        "commands": commands,
    }
    page = render(facts, bests, ms, misses)
    total = time.monotonic() - t0
    print(f"\n{page}\ntook {total / 60:.1f} min ({tuned_s / 60:.1f} tuning, {(total - tuned_s) / 60:.1f} re-measuring)")
    if a.out:
        a.out.write_text(page)
    if a.json:
        a.json.write_text(dumps({"facts": facts, "measurements": [asdict(m) for m in ms]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
