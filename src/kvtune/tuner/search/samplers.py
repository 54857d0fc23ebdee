"""Which search proposes the next config: `--sampler auto|tpe|gp|random|grid|qmc`.

A trial costs minutes, so the search is the one lever over how many of them a good config
takes; which search is best is an empirical question, answered for recorded landscapes by
`benchmarks/search_efficiency.py` (docs/search-efficiency.md). This module turns a name into
an Optuna sampler with kvtune's settings, and gives each worker its own seed.

How each one treats the targets (kvtune stores them with `trial.set_constraint`; every trial,
a failed launch included, ends COMPLETE with its constraints, see tuner/loop.py):
- tpe: Optuna's constrained TPE (multivariate, grouped, constant liar for workers): infeasible
  trials are ranked below every feasible one when it models the good region.
- gp: Optuna's GP sampler with constrained expected improvement (one GP per constraint).
  Needs scipy and PyTorch (not kvtune dependencies: `sampler_choice.check_sampler_installed`
  refuses a gp study without torch before anything starts).
- random: ignores the targets while proposing; they count only when the best is named.
- qmc: a scrambled Sobol sequence over the numeric knobs; ignores the targets while proposing.
  Categorical knobs (most of llama-server's space) are drawn at random by its independent
  sampler, so on an all-choices space it is random search. Needs scipy.
- grid: every combination of a finite space once, in a shuffled order (the exhaustive search of
  vLLM's auto_tune; for small spaces and for recording landscapes); ignores the targets. An int
  range of at most GRID_MAX_RANGE values is expanded to its values; a float range or a wider
  int range is refused (name the values as choices instead). Knobs that another knob switches
  off (llama-server's cache-type-v without flash attention) still span the grid, so those
  points repeat a measured config and reuse its result.

Seeds: a worker's sampler seed is the study seed + the trials already stored (so a resumed
study does not re-propose its first random points) + slot x 65,536 (so workers started
together do not propose the same random start-up points). Grid and QMC keep the study seed in
every worker and on resume: their sequence is shared through the storage (a grid point's id,
a QMC sample's index) and means the same config only under the same seed.
"""

from __future__ import annotations

import warnings
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from kvtune.errors import SpecError
from kvtune.kinds import KnobKind
from kvtune.knobs import Knob
from kvtune.study.sampler_choice import DEFAULT, SamplerKind, parse_sampler  # noqa: F401
from kvtune.tuner.store import storage

# An int range with at most this many values becomes choices for the grid.
GRID_MAX_RANGE = 16
# Seeds of workers on other slots are this far apart (a study never stores this many trials).
SLOT_STRIDE = 65_536


def worker_seed(seed: int, n_stored: int, slot: int = 0) -> int:
    """This worker's sampler seed (fits numpy's 32-bit seeds)."""
    return (seed + n_stored + slot * SLOT_STRIDE) % 2**32


def startup_trials(trials: int) -> int:
    """Random proposals before a model-based sampler models: a third of the budget, 3..10."""
    return max(3, min(10, trials // 3))


def grid_space(knobs: list[Knob]) -> dict[str, list[Any]]:
    """The grid of every tuned knob's values; `SpecError` naming a knob that has no finite list."""
    grid: dict[str, list[Any]] = {}
    for k in knobs:
        if k.kind is KnobKind.FIXED:
            continue
        if k.kind is KnobKind.CHOICES:
            grid[k.name] = list(k.choices)
            continue
        if k.kind is KnobKind.INT:
            step = k.step or 1
            values = list(range(int(k.bounds[0]), int(k.bounds[1]) + 1, step))
            if len(values) <= GRID_MAX_RANGE:
                grid[k.name] = values
                continue
            raise SpecError(
                f"sampler grid needs a finite space: {k.name} is a range of {len(values)} "
                f"values ({k.low}..{k.high}); give it as choices (space: {{{k.name}: "
                f"[...]}}) or use another sampler"
            )
        raise SpecError(
            f"sampler grid needs a finite space: {k.name} is a continuous range "
            f"({k.low}..{k.high}); give it as choices or use another sampler"
        )
    return grid


def make_sampler(
    kind: SamplerKind | str, knobs: list[Knob], *, seed: int, trials: int, n_stored: int = 0, slot: int = 0
) -> optuna.samplers.BaseSampler:
    """The sampler for one worker of a study (see the module docstring for seeds)."""
    kind = parse_sampler(kind)
    own = worker_seed(seed, n_stored, slot)
    with warnings.catch_warnings():  # multivariate/group/GP are "experimental" but long stable
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if kind is SamplerKind.TPE:
            return optuna.samplers.TPESampler(
                seed=own, n_startup_trials=startup_trials(trials), multivariate=True, group=True, constant_liar=True
            )
        if kind is SamplerKind.RANDOM:
            return optuna.samplers.RandomSampler(seed=own)
        if kind is SamplerKind.GRID:
            return AskTellGrid(grid_space(knobs), seed=seed)
        _require_scipy(kind)
        if kind is SamplerKind.GP:
            return BaselineAwareGP(seed=own, n_startup_trials=startup_trials(trials), warn_independent_sampling=False)
        return BaselineAwareQMC(
            qmc_type="sobol",
            scramble=True,
            seed=seed,
            independent_sampler=optuna.samplers.RandomSampler(seed=own),
            warn_independent_sampling=False,
        )


class AskTellGrid(optuna.samplers.GridSampler):
    """Optuna's grid sampler for ask-and-tell. Optuna's calls `study.stop()` once the grid is
    done, which raises outside `study.optimize` (on the last grid point's tell); kvtune's loop
    ends at its budget instead (a grid proposes measured configs again once it is exhausted)."""

    def after_trial(self, study: optuna.Study, trial: FrozenTrial, state: TrialState, values: Any) -> None:
        return None


# ---- the baseline trial has no parameters ---------------------------------------------------------
# kvtune's trial 0 measures the server's defaults: it suggests nothing, so it has no parameters.
# Optuna's GP sampler models only the parameters that *every* completed trial has, and the QMC
# sampler takes its space from the *first* trial: both would see an empty space and propose at
# random for the whole study. These two look past trials without parameters. (TPE with
# group=True decomposes the space by the parameter sets trials have, and needs no help.)


def _with_params(trials: list[FrozenTrial], names: Any = ()) -> list[FrozenTrial]:
    return [t for t in trials if t.params and set(names) <= set(t.params)]


class BaselineAwareGP(optuna.samplers.GPSampler):
    """Optuna's GP sampler over the completed trials that have the sampled parameters."""

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        done = _with_params(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
        if not done:
            return {}
        space = optuna.search_space.intersection_search_space(done)
        return {name: d for name, d in space.items() if not d.single()}

    def sample_relative(self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, Any]) -> dict[str, Any]:
        stand_in = storage.TrialsWithParams(study, search_space)  # reads like a Study where GP looks
        return super().sample_relative(stand_in, trial, search_space)  # type: ignore[arg-type]


class BaselineAwareQMC(optuna.samplers.QMCSampler):
    """Optuna's QMC sampler with its space taken from the first trial that has parameters."""

    def infer_relative_search_space(self, study: optuna.Study, trial: FrozenTrial) -> dict[str, Any]:
        done = _with_params(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))
        if not done:
            return super().infer_relative_search_space(study, trial)
        return dict(min(done, key=lambda t: t.number).distributions)


def _require_scipy(kind: SamplerKind) -> None:
    try:
        import scipy  # noqa: F401  (Optuna's GP and QMC samplers import it when they sample)
    except ImportError:
        raise SpecError(f"sampler {kind.value} needs scipy: pip install scipy (or use sampler tpe)") from None
