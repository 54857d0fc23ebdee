"""Does the search beat random search? Replays a recorded landscape for every sampler.

    python benchmarks/search_efficiency.py benchmarks/landscapes/llama-server-demo.jsonl \
        [--seeds 30] [--budgets 5,10,20,30,40] [--samplers tpe,gp,random,qmc,grid] \
        [--reference-budget 120] [--target 'ttft_p95<5s' ...] [--seed 0] \
        [--md docs/search-efficiency-table.md] [--png docs/search-efficiency.png]

No server runs: Optuna is driven directly, with kvtune's own samplers (tuner/samplers.py, the
same settings a study gets for that budget) and the landscape as the objective. A study is
simulated by kvtune's own rules, as kvtune runs one:
- trial 0 is the baseline (the server's defaults), trial 1 the informed start (when on; the same
  config for every sampler in one seed, see `informed_start`), then the sampler;
- a measured config answers with one of its recorded measurements drawn at random *without
  replacement* (a re-measurement is another launch, so never the same recorded measurement as
  the first; the noise is the measured noise) and costs that measurement's recorded wall time,
  cut where kvtune's exact early stop would have ended it;
- each measurement is scored by kvtune's own scoring (tuner/trial/scoring.py): relative targets
  are resolved from the baseline's first measurement in this study, not from the landscape's
  mean; the targets are told as constraints as the tuner tells them;
- a config proposed again is told its first result at no cost and does not count (the budget
  counts measured configs; asks are capped at 4 x budget + 25);
- after the search, the baseline's end-of-search sentinel, then the verdict as tuner/confirmation.py
  runs it (`verdict.next_step`: screening of the top 3, one candidate against the defaults
  D W W D, group-sequential, at most 9 pairs), then the best is named by kvtune's own naming
  code (`named_best`: study/naming.py).

The truth a run is scored against is the landscape's (landscape.py: a config's mean over its
measurements, relative targets on the baseline's mean). Reported per sampler and budget, over
the seeds: the regret of the named best (its true mean objective against the best truly
feasible config, as a fraction of that; 100% when nothing feasible was named), how often the
named best is truly feasible, and from each sampler's largest budget the trials and simulated
hours until the search has measured a truly feasible config within 5% / 2% of the optimum (">B"
when the median run never did). Random search, the headline's reference, also runs at
`--reference-budget` (default 3 x the largest budget, at most the landscape's size), so that
its figure is measured, not censored, where the goal (<= 1/3 of its trials) needs it; a
censored comparison says "not shown". Deterministic for a given --seed. A bad landscape file is
one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hardware_seconds as hs  # noqa: E402
from efficiency_report import REFERENCE, SAMPLERS, headline, markdown, plot  # noqa: E402
from landscape import Config, Landscape, LandscapeError, key, load  # noqa: E402
from replay_rules import cut_of, informed_start, knobs_of, named_best, outcome_of, slot_ladder, stop_at  # noqa: E402, F401

from kvtune.errors import KvtuneError  # noqa: E402
from kvtune.kinds import Direction, KnobKind  # noqa: E402
from kvtune.knobs import Knob  # noqa: E402
from kvtune.study.measured_noise import noise_of  # noqa: E402
from kvtune.study.outcome import TrialOutcome  # noqa: E402
from kvtune.study.verdict_evidence import RUN_ROLE, evidence_of, goal_of, policy_of  # noqa: E402
from kvtune.tuner.remeasure import aggregate, run_record  # noqa: E402
from kvtune.tuner.search import samplers  # noqa: E402
from kvtune.tuner.trial.screening import leader_of  # noqa: E402
from kvtune.tuner.trial.stopping import watched_targets  # noqa: E402
from kvtune.verdict import Done, next_step  # noqa: E402

BUDGETS = (5, 10, 20, 30, 40)

# Other TPE settings than kvtune's (tuner/samplers.py: random start-up for a third of the
# budget, 3..10 trials; multivariate and grouped), so that the evidence picks the settings too:
# `--samplers tpe,tpe-s3,tpe-indep,...`.
TPE_VARIANTS = {
    "tpe-s3": lambda seed: optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=3, multivariate=True, group=True, constant_liar=True
    ),
    "tpe-indep": lambda seed: optuna.samplers.TPESampler(seed=seed, n_startup_trials=3),
}
VERDICT_TOP, VERDICT_PAIRS = 3, 9  # the verdict's, kvtune's defaults (study/spec.py)
# The GPU-like cost scenario (issue 38): a start-up is 60 s, 40 s when a server of the same
# compile key started before in the study (vLLM's compile cache: its key holds
# max-num-batched-tokens and kv-cache-dtype; llama-server compiles nothing, so only a re-launch
# of the same config counts as cached), and a whole measurement is 20 s (a cut one, its share).
GPU_COLD_S, GPU_CACHED_S, GPU_MEASURE_S = 60.0, 40.0, 20.0
COMPILE_KEYS = {"vllm": ("max-num-batched-tokens", "kv-cache-dtype")}


@dataclass
class Run:
    """One simulated study: the named best and the path to it. Hours are simulated wall time
    with kvtune's exact early stop (`hours`) and, from the same draws, without it
    (`hours_no_stop`): early stop changes what a trial costs, never its verdict."""

    sampler: str
    seed: int
    budget: int
    informed: bool
    regret: float
    named_feasible: bool
    hours: float
    hours_no_stop: float = 0.0
    # seconds that search trials ending infeasible cost, with and without early stop
    infeasible_s: float = 0.0
    infeasible_no_stop_s: float = 0.0
    stopped: int = 0  # trials early stop ended
    # per measured trial: (trials so far, hours so far, true regret of the best config measured)
    path: list[tuple[int, float, float]] = field(default_factory=list)
    reused: int = 0  # draws that had to repeat a recorded measurement (every one already drawn)
    confirm_runs: int = 0  # re-measurements the confirmation took
    screened: int = 0  # search trials the screen cut
    gpu_hours: float = 0.0  # the same study under the GPU-like cost scenario
    # seconds of the sentinel and the verdict's fresh runs (host, GPU-like): the proof's share
    verdict_s: float = 0.0
    verdict_gpu_s: float = 0.0

    def reached(self, within: float) -> tuple[int, float] | None:
        for n, h, r in self.path:
            if r <= within:
                return n, h
        return None


def suggest(trial: optuna.trial.Trial, knobs: list[Knob]) -> dict[str, Any]:
    params = {}
    for k in knobs:
        if k.kind is KnobKind.INT:
            params[k.name] = trial.suggest_int(k.name, int(k.low), int(k.high), step=k.step or 1)
        else:
            params[k.name] = trial.suggest_categorical(k.name, list(k.choices))
    return params


class Replay:
    """One simulated study of `budget` measured configs."""

    def __init__(
        self,
        ls: Landscape,
        sampler: str,
        seed: int,
        budget: int,
        informed: bool,
        base_seed: int,
        screen: float = 0.0,
        starts: Sequence[dict[str, Any]] | None = None,
    ):
        self.ls, self.budget, self.informed = ls, budget, informed
        # the configs enqueued after the baseline, in order (None: kvtune's one informed start when
        # `informed`); hardware_seconds.py's start policies give other lists
        self.starts = starts
        self.screen = screen  # kvtune's screen_fraction (0: every search trial measured whole)
        self.screened = 0
        self.gpu_seconds = 0.0  # the GPU-like scenario's cost of the same launches
        self.compiled: set[str] = set()  # compile keys started so far (the GPU-like scenario)
        self.confirm_runs = 0
        self.verdict_s = self.verdict_gpu_s = 0.0  # the sentinel's and verdict's runs (host, GPU-like)
        self.sampler_name, self.seed = sampler, seed
        # Common random numbers: every sampler draws measurements from the same stream per seed.
        self.rng = random.Random(f"{base_seed}:{seed}:{budget}:{informed}")
        self.knobs = knobs_of(ls)
        self.seconds = 0.0  # simulated wall time with early stop (kvtune's default)
        self.seconds_no_stop = 0.0  # the same draws, every measurement run whole
        self.infeasible_s = 0.0
        self.infeasible_no_stop_s = 0.0
        self.stopped = 0
        self.reused = 0
        self.outcomes: list[TrialOutcome] = []
        self.configs: dict[int, Config] = {}
        self.path: list[tuple[int, float, float]] = []
        self.drawn: dict[int, set[int]] = {}  # id(config) -> indices of its measurements drawn
        self.base: TrialOutcome | None = None  # the baseline's first measurement, once it ran

    def pick(self, c: Config) -> dict:
        """A recorded measurement of `c` not drawn before in this study, at random: each launch
        of a config is another measurement. Only when every one was drawn is one repeated
        (counted in `reused`; a landscape with two per config never needs it)."""
        drawn = self.drawn.setdefault(id(c), set())
        fresh = [i for i in range(len(c.measurements)) if i not in drawn]
        if not fresh:
            self.reused += 1
            fresh = list(range(len(c.measurements)))
        i = self.rng.choice(fresh)
        drawn.add(i)
        return c.measurements[i]

    def measure(self, number: int, c: Config, baseline: bool, search: bool) -> TrialOutcome:
        """One launch of `c`: a fresh recorded measurement, scored as kvtune scores it, charged
        only until kvtune's early stop or, for a search trial, its screen would have ended it
        (the baseline always runs whole); a screened one is judged on its short run."""
        m = self.pick(c)
        watched = watched_targets(self.ls.declared, baseline, self.base.metrics if self.base else None)
        leader = None
        if search and not baseline and self.screen > 0:
            key, rel_sd = self.ls.objective_key, noise_of(self.outcomes, objective_key=self.ls.objective_key).rel_sd
            leader = leader_of(self.outcomes, key, self._direction(), rel_sd)
        cut = cut_of(self.ls, m, watched, leader, self.screen) if m.get("metrics") is not None else None
        if cut is not None and cut[0] == "screened":
            self.screened += 1
            m = {**m, "metrics": {**m["metrics"], **cut[2]}, "objective": cut[2][self.ls.objective_key]}
        o = outcome_of(self.ls, number, c, m, baseline, self.base)
        whole, measure_s = float(m["cost_s"]), float(m.get("measure_s") or 0.0)
        at = cut[1] if cut is not None else None
        cost = whole if at is None else whole - measure_s + at
        self.stopped += int(cut is not None and cut[0] == "early")
        self.seconds += cost
        self.gpu_seconds += self._gpu_cost(c, at, measure_s)
        self.seconds_no_stop += whole
        if search and not o.feasible:
            self.infeasible_s += cost
            self.infeasible_no_stop_s += whole
        if baseline and self.base is None and o.measured:
            self.base = o
        return o

    def _gpu_cost(self, c: Config, at: float | None, measure_s: float) -> float:
        """This launch under the GPU-like scenario (`gpu_launch_s`), cut to the share of its
        measurement it ran."""
        share = 1.0 if at is None or measure_s <= 0 else min(1.0, at / measure_s)
        return gpu_launch_s(self.ls, c.params, c.baseline, self.compiled, share)

    def _study(self) -> tuple[optuna.Study, Config | None]:
        """The study as kvtune builds it (tuner/assemble.py): baseline, informed start, sampler."""
        study = optuna.create_study(direction="maximize" if self.ls.maximize else "minimize")
        baseline = next((c for c in self.ls.configs if c.baseline), None)
        if baseline is not None:
            study.enqueue_trial({}, user_attrs={"baseline": True})
        kind = samplers.parse_sampler(self.sampler_name.split("-")[0])
        guess = informed_start(self.ls, self.seed)
        starts = self.starts if self.starts is not None else ([guess] if self.informed and guess else [])
        if self.budget > 1 and kind is not samplers.SamplerKind.GRID:
            for params in starts[: self.budget - 1]:
                study.enqueue_trial(params, user_attrs={"informed_start": True})
        if self.sampler_name in TPE_VARIANTS:
            study.sampler = TPE_VARIANTS[self.sampler_name](samplers.worker_seed(self.seed, len(study.trials), 0))
        else:
            study.sampler = samplers.make_sampler(
                kind, self.knobs, seed=self.seed, trials=self.budget, n_stored=len(study.trials)
            )
        return study, baseline

    def run(self) -> Run:
        ls = self.ls
        study, baseline = self._study()
        seen: dict[str, TrialOutcome] = {}
        asks = 0
        while len(self.outcomes) < self.budget and asks < 4 * self.budget + 25:
            asks += 1
            trial = study.ask()
            is_base = bool(trial.user_attrs.get("baseline"))
            params = {} if is_base else suggest(trial, self.knobs)
            c = baseline if is_base else ls.by_key.get(key(params))
            if c is None:
                raise LandscapeError(f"{ls.path}: the sampler proposed {params}, which the landscape lacks")
            k = "baseline" if is_base else key(params)
            if k in seen:  # a duplicate: told the first result, no measurement, not counted
                self._tell(study, trial, seen[k])
                continue
            o = self.measure(trial.number, c, is_base, search=True)
            seen[k] = o
            self.outcomes.append(o)
            self.configs[o.number] = c
            self._tell(study, trial, o)
            self.path.append((len(self.outcomes), self.seconds / 3600, self._found_regret()))
        self.decide()
        best = named_best(self.outcomes, self._direction())
        named = self.configs[best.number] if best else None
        return Run(
            self.sampler_name,
            self.seed,
            self.budget,
            self.informed,
            ls.regret(named),
            bool(named and named.truly_feasible),
            self.seconds / 3600,
            self.seconds_no_stop / 3600,
            self.infeasible_s,
            self.infeasible_no_stop_s,
            self.stopped,
            self.path,
            self.reused,
            self.confirm_runs,
            self.screened,
            self.gpu_seconds / 3600,
            self.verdict_s,
            self.verdict_gpu_s,
        )

    def _tell(self, study: optuna.Study, trial: optuna.trial.Trial, o: TrialOutcome) -> None:
        for k, v in o.constraints.items():
            trial.set_constraint(k, v)
        worst = 0.0 if self.ls.maximize else 1e12
        study.tell(trial, o.objective if o.objective is not None else worst)

    def _found_regret(self) -> float:
        """The regret of the best config measured so far, by its truth: has the search found
        (measured) a config that close to the optimum yet? Naming it is the confirmation's job."""
        return min((self.ls.regret(c) for c in self.configs.values()), default=1.0)

    def _direction(self) -> Direction:
        return Direction.MAXIMIZE if self.ls.maximize else Direction.MINIMIZE

    def decide(self) -> None:
        """The verdict as tuner/confirmation.py drives it: the baseline's end sentinel (the first D),
        then what `verdict.next_step` asks for until it is done."""
        base = next((o for o in self.outcomes if o.baseline and o.measured), None)
        if base is not None:
            self._add_run(base, "sentinel")
        goal = goal_of(self._direction(), self.ls.declared, self.ls.objective_key)
        policy = policy_of(VERDICT_TOP, VERDICT_PAIRS)
        for _ in range(200):
            step = next_step(evidence_of(self.outcomes), goal, policy)
            if isinstance(step, Done):
                verdict = step.verdict.to_dict()
                for o in self.outcomes:
                    if o.number in (step.verdict.named, step.verdict.candidate, step.verdict.baseline):
                        o.verdict = verdict
                return
            o = next(x for x in self.outcomes if x.number == step.config)
            self._add_run(o, RUN_ROLE[step.role])

    def _add_run(self, o: TrialOutcome, role: str) -> None:
        """One fresh launch of `o`'s config, appended to its confirmation record as
        tuner/remeasure.py appends it (the order of the runs is their "at")."""
        host, gpu = self.seconds, self.gpu_seconds
        again = self.measure(o.number, self.configs[o.number], o.baseline, search=False)
        self.verdict_s += self.seconds - host
        self.verdict_gpu_s += self.gpu_seconds - gpu
        self.confirm_runs += 1
        run = {**run_record(again, seed=0, role=role), "at": float(self.confirm_runs)}  # in replay order
        o.confirmation = aggregate([*((o.confirmation or {}).get("runs") or []), run])


def gpu_launch_s(ls: Landscape, params: dict, baseline: bool, compiled: set, share: float = 1.0) -> float:
    """One launch under the GPU-like scenario: a cold start-up, or a cached one when a server of
    the same compile key started before in the study (`compiled`, updated), and `share` of a
    whole measurement."""
    names = COMPILE_KEYS.get(str(ls.header.get("backend") or "").split("-")[0])
    compile_key = key({n: params.get(n) for n in names}) if names and not baseline else key(params)
    start = GPU_CACHED_S if compile_key in compiled else GPU_COLD_S
    compiled.add(compile_key)
    return start + GPU_MEASURE_S * share


def replay(
    ls: Landscape,
    sampler: str,
    seed: int,
    budget: int,
    informed: bool,
    base_seed: int = 0,
    screen: float = 0.0,
    starts: Sequence[dict[str, Any]] | None = None,
) -> Run:
    return Replay(ls, sampler, base_seed * 100_003 + seed, budget, informed, base_seed, screen, starts).run()


def reference_budget(ls: Landscape, budgets: Sequence[int], asked: int | None = None) -> int:
    """The budget random search (the headline's reference) also runs at: `asked`, else 3 x the
    largest budget (the goal is 1/3 of random's trials, so a default figure that is measured can
    always be compared), at most the landscape's size (no study measures more configs)."""
    return asked if asked is not None else min(3 * max(budgets), len(ls.configs))


def benchmark(
    ls: Landscape,
    sampler_names: list[str],
    budgets: list[int],
    seeds: int,
    base_seed: int = 0,
    informed_variants: tuple[bool, ...] = (True, False),
    progress: bool = False,
    reference: int | None = None,
) -> list[Run]:
    """Every sampler at every budget over `seeds`; random search also at `reference`."""
    runs = []
    for name in sampler_names:
        t0 = time.monotonic()
        # the grid never takes the informed start (a grid measures every config anyway)
        variants = (False,) if name == "grid" else informed_variants
        extra = [reference] if name == REFERENCE and reference and reference not in budgets else []
        for informed in variants:
            for budget in list(budgets) + extra:
                for s in range(seeds):
                    runs.append(replay(ls, name, s, budget, informed, base_seed))
        if progress:
            print(f"  {name}: {time.monotonic() - t0:.0f} s", file=sys.stderr)
    return runs


def hardware_seconds(
    ls: Landscape, seeds: int, ladder: Sequence[int], base_seed: int = 0, fixed: int = 20
) -> dict[str, list[hs.SeedResult]]:
    """Per method (hardware_seconds.METHODS, then auto_tune's grid) and seed: the
    hardware-seconds until the named config is within 5%, walking up the budget `ladder` (a
    seed stops at its first success), and the named regret at the `fixed` budget."""
    results: dict[str, list[hs.SeedResult]] = {}
    for name, m in hs.METHODS.items():
        res = []
        informed = m.start is not hs.Start.NONE
        for s in range(seeds):
            starts = starts_of(ls, s + base_seed * 100_003, m.start)
            by_budget: dict[int, list[Run]] = {}
            for b in sorted({*m.first_budgets, *ladder}):
                by_budget[b] = [replay(ls, m.sampler, s, b, informed, base_seed, m.screen, starts)]
                if by_budget[b][0].regret <= hs.WITHIN:
                    break
            at_fixed = (
                by_budget[fixed][0]
                if fixed in by_budget
                else replay(ls, m.sampler, s, fixed, informed, base_seed, m.screen, starts)
            )
            host, budget, host_share = hs.first_within(by_budget, 0, "host")
            gpu, _, gpu_share = hs.first_within(by_budget, 0, "gpu")
            res.append(
                hs.SeedResult(
                    {"host": host, "gpu": gpu}, budget, at_fixed.regret, {"host": host_share, "gpu": gpu_share}
                )
            )
        results[name] = res
    results[hs.AUTOTUNE] = [
        hs.autotune(ls, s, base_seed, lambda p, b, done: gpu_launch_s(ls, p, b, done)) for s in range(seeds)
    ]
    return results


def starts_of(ls: Landscape, seed: int, start: "hs.Start") -> list[dict[str, Any]] | None:
    """The configs a replayed study measures after the baseline under `start` (None: kvtune's
    own informed start, as `Replay` builds it)."""
    if start is hs.Start.OPTIMUM:
        return [dict(ls.optimum().params)]
    if start is hs.Start.SLOT_LADDER:
        return slot_ladder(ls, seed)
    return None if start is hs.Start.INFORMED else []


def naming_lines(runs: list[Run]) -> str:
    """Per sampler at its largest budget: how often the named config is the landscape's true
    best, within 5% of it (the run-to-run noise), truly feasible, and the re-measurements spent."""
    out = ["\nNamed config (by the verdict), at each sampler's largest budget, informed start on:"]
    for name in dict.fromkeys(r.sampler for r in runs):
        mine = [r for r in runs if r.sampler == name and (r.informed or name == "grid")]
        if not mine:
            continue
        top = max(r.budget for r in mine)
        at = [r for r in mine if r.budget == top]
        n = len(at)
        best = sum(r.regret == 0 for r in at) / n
        near = sum(r.regret <= 0.05 for r in at) / n
        feasible = sum(r.named_feasible for r in at) / n
        spent = sum(r.confirm_runs for r in at) / n
        out.append(
            f"- {name}, {top} trials, {n} seeds: true best {best:.0%}, within 5% {near:.0%}, "
            f"truly feasible {feasible:.0%}, {spent:.1f} re-measurements"
        )
    return "\n".join(out) + "\n"


def _one_thread() -> None:
    """The GP sampler's torch would start a thread per core for tiny matrices; on a busy machine
    those threads thrash (a replay took minutes instead of seconds). One thread, and runs stay
    deterministic."""
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("landscape")
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    ap.add_argument("--samplers", default=",".join(s for s in SAMPLERS if s not in TPE_VARIANTS))
    ap.add_argument(
        "--reference-budget",
        type=int,
        default=None,
        help="random search's budget for the headline (default 3 x the largest, at most the landscape's size)",
    )
    ap.add_argument(
        "--target",
        action="append",
        default=None,
        help="judge the measurements against these targets instead of the header's",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-informed-variant", action="store_true", help="only runs with the informed start on")
    ap.add_argument(
        "--hardware-seconds",
        action="store_true",
        help="report hardware-seconds to a named config within 5%%: kvtune before/now, random, auto_tune's grid",
    )
    ap.add_argument("--ladder", default=None, help="the budgets each seed walks up (default: --budgets)")
    ap.add_argument("--fixed-budget", type=int, default=20, help="the budget the named regret is reported at")
    ap.add_argument("--md", type=Path, default=None)
    ap.add_argument("--png", type=Path, default=None)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    a = _arguments(argv)
    _one_thread()
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    try:
        budgets = [int(b) for b in a.budgets.split(",")]
        if not budgets or min(budgets) < 1:
            raise ValueError
    except ValueError:
        print(f"error: --budgets must be positive integers separated by commas, got {a.budgets!r}", file=sys.stderr)
        return 2
    if a.reference_budget is not None and a.reference_budget < 1:
        print(f"error: --reference-budget must be a positive integer, got {a.reference_budget}", file=sys.stderr)
        return 2
    if a.hardware_seconds:
        return _hardware_seconds_main(a, argv)
    try:
        names = [s if s in TPE_VARIANTS else samplers.parse_sampler(s).value for s in a.samplers.split(",")]
        ls = load(a.landscape)
        if a.target:
            ls = ls.with_targets(a.target)
        ls.optimum()
        runs = benchmark(
            ls,
            names,
            budgets,
            a.seeds,
            a.seed,
            (True,) if a.no_informed_variant else (True, False),
            progress=True,
            reference=reference_budget(ls, budgets, a.reference_budget),
        )
    except KvtuneError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    command = "python benchmarks/search_efficiency.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = markdown(ls, runs, a.seeds, command)
    text += "\nHeadline: " + headline(runs, samplers.DEFAULT.value) + "\n"
    text += naming_lines(runs)
    print(text)
    if a.md:
        a.md.write_text(text)
    if a.png:
        plot(runs, a.png, f"{Path(ls.path).name}: regret of the named best vs budget ({a.seeds} seeds)")
    return 0


def _hardware_seconds_main(a: argparse.Namespace, argv: list[str] | None) -> int:
    try:
        ladder = [int(b) for b in (a.ladder or a.budgets).split(",")]
        if not ladder or min(ladder) < 1 or a.fixed_budget < 1:
            raise ValueError
    except ValueError:
        print(f"error: --ladder must be positive integers separated by commas, got {a.ladder!r}", file=sys.stderr)
        return 2
    try:
        ls = load(a.landscape)
        if a.target:
            ls = ls.with_targets(a.target)
        ls.optimum()
        results = hardware_seconds(ls, a.seeds, ladder, a.seed, a.fixed_budget)
    except KvtuneError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    command = "python benchmarks/search_efficiency.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = f"`{command}`\n" + hs.table(results, a.seeds, a.fixed_budget, Path(ls.path).name)
    print(text)
    if a.md:
        a.md.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
