"""Several backends in one `kvtune run`: which ones, what model each serves, how the budget splits.

The operator's first question is which server to run at all, and only measuring both on the same
workload answers it. `kvtune run --backend llama-server --backend vllm` (or `--backend auto`:
every backend that can serve the model here) tunes each backend as its own study: the same spec
(workload, targets, objective, space, seed) with its own backend, its own form of the same model,
its share of the trial budget and its own name (``NAME-llama-server``, ``NAME-vllm``). The
studies run one after the other: one machine, so no study's figures are disturbed by another's
servers. This module only plans (no launch, nothing written): it parses the backend list, routes
the model to each backend (llama-server a GGUF, vLLM an HF folder or hub id; the demo model
exists in both forms), asks each backend's launcher whether it can serve it and keeps the reason
when it cannot, and splits the budget. `cli/multi.py` runs the legs through the ordinary
`kvtune run` path and `artifacts/side_by_side.py` puts them side by side.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

from kvtune.errors import BackendError, ModelError, ServerNotFoundError, SpecError
from kvtune.launchers.base import Launcher
from kvtune.launchers.registry import create_launcher
from kvtune.study.spec import BACKENDS, StudySpec
from kvtune.tuner.session import RunOptions, study_spec

AUTO = "auto"
DEMO = "demo"  # the models' name for the demo model (a GGUF for llama-server, an HF folder for vLLM)
LLAMA_SERVER, VLLM = BACKENDS
# Failures that mean "this backend cannot serve this model here" (not installed, no usable model,
# no device): the run goes on with the others. A SpecError (bad flags, study file) stops everything.
CANNOT_SERVE = (ModelError, BackendError, ServerNotFoundError)

LauncherFactory = Callable[[StudySpec], Launcher]


@dataclass(frozen=True)
class BackendChoice:
    """What --backend asked for: the backends, and whether it was `auto`."""

    backends: tuple[str, ...] = ()
    auto: bool = False

    @property
    def several(self) -> bool:
        """A multi-backend run (auto, or more than one name); else today's one-study run."""
        return self.auto or len(self.backends) > 1


def parse_backends(values: Sequence[str]) -> BackendChoice:
    """--backend values (repeatable) -> a `BackendChoice`. One name is passed through unchecked
    (the spec checks it, as before); several are checked here: each known, each once."""
    values = list(values)
    if len(values) <= 1 and values != [AUTO]:
        return BackendChoice(tuple(values))
    if AUTO in values:
        if len(values) > 1:
            raise SpecError("--backend auto means every backend installed here: give it alone")
        return BackendChoice(BACKENDS, auto=True)
    seen: set[str] = set()
    for v in values:
        if v not in BACKENDS:
            raise SpecError(f"unknown backend {v!r}: use one of {', '.join(BACKENDS)} (or auto)")
        if v in seen:
            raise SpecError(f"--backend {v} is given twice: name each backend once")
        seen.add(v)
    return BackendChoice(tuple(values))


def split_budget(total: int, n: int) -> list[int]:
    """--trials split among `n` backends: an equal share each, the remainder one by one to the
    first ones named (12 -> 6 + 6, 5 -> 3 + 2). Each needs at least its baseline."""
    if n < 1:
        raise ValueError("split_budget needs at least one backend")
    if total < n:
        raise SpecError(
            f"--trials {total} cannot be split among {n} backends: each needs at least "
            f"its baseline; use --trials {n} or more"
        )
    share, rest = divmod(total, n)
    return [share + (1 if i < rest else 0) for i in range(n)]


def _is_demo(model: str | None) -> bool:
    return model in (None, "", DEMO)


def model_for(backend: str, model: str | None, hf_model: str | None) -> str:
    """The model `backend` serves when several backends tune one model: llama-server the GGUF
    (--model), vLLM the HF folder or hub id (--hf-model, else a --model that is one); the demo
    model when neither is given. A `ModelError` says why this backend cannot serve it."""
    if backend == LLAMA_SERVER:
        if _is_demo(model):
            if hf_model:
                raise ModelError("llama-server needs the GGUF file of the hf_model: pass it with --model X.gguf")
            return DEMO
        assert model is not None  # not the demo
        if Path(model).expanduser().is_dir():
            raise ModelError(
                f"model {model!r} is a folder and llama-server needs a GGUF file: "
                f"give the GGUF as the model and the folder as hf_model (--set hf_model=FOLDER)"
            )
        return model
    if backend == VLLM:
        if hf_model:
            return _hf_folder(hf_model, "hf_model")
        if _is_demo(model):
            return DEMO
        assert model is not None  # not the demo
        if model.endswith(".gguf") or Path(model).expanduser().is_file():
            raise ModelError(
                f"vLLM serves an HF model folder or hub id, not the GGUF file {model!r}: "
                f"pass the same model's HF folder with --set hf_model=FOLDER"
            )
        return _hf_folder(model, "model")
    raise SpecError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")


def _hf_folder(model: str, key: str) -> str:
    """A local HF folder must hold config.json; anything that is not a local path is a hub id.
    A refusal opens with `key`, the setting it came in as (`kvtune run` opens it with the flag
    when a flag gave it)."""
    path = Path(model).expanduser()
    if path.is_file():
        raise ModelError(f"{key} {model!r} is a file: vLLM serves an HF model folder (with config.json) or a hub id")
    if path.is_dir() and not (path / "config.json").is_file():
        raise ModelError(f"{key} {model!r} has no config.json: vLLM serves an HF model folder")
    return model


def single_backend_model(backend: str, hf_model: str | None) -> str | None:
    """The model override of a one-backend run given --hf-model: vLLM serves it; llama-server
    cannot (None: --hf-model was not given)."""
    if not hf_model:
        return None
    if backend != VLLM:
        raise SpecError(f"hf_model is the model vLLM serves; {backend} takes a GGUF with --model")
    return _hf_folder(hf_model, "hf_model")


@dataclass
class Leg:
    """One backend's study: the same run options with its backend, model, share of the budget
    and name; the launcher already built (so it is built once, and a fake can be injected)."""

    backend: str
    options: RunOptions
    launcher: Launcher

    @property
    def study(self) -> str:
        return str(self.options.given["study"])


@dataclass(frozen=True)
class Skipped:
    """A backend asked for that cannot serve the model here, and why (one line)."""

    backend: str
    reason: str


@dataclass
class BackendPlan:
    """The studies a multi-backend run makes, in order, and the backends it leaves out.
    `name` names the comparison (RUNS/name/compare.json); each leg's study is name-backend."""

    name: str
    legs: list[Leg]
    skipped: list[Skipped] = field(default_factory=list)
    auto: bool = False

    def split_note(self) -> str:
        """How the budget was split, for the header: ``12 trials: llama-server 6, vllm 6``."""
        shares = [f"{leg.backend} {leg.options.given.get('trials')}" for leg in self.legs]
        total = sum(leg.options.given.get("trials") or 0 for leg in self.legs)
        return f"{total} trials: {', '.join(shares)}"


def comparison_name(spec: StudySpec, backends: Sequence[str], hf_model: str | None) -> str:
    """--study, else ``backends-HASH`` of what defines the comparison (not the trial budget)."""
    if spec.study:
        return spec.study
    key = {
        "backends": list(backends),
        "model": spec.model,
        "hf_model": hf_model,
        "targets": sorted(spec.target_texts),
        "objective": spec.objective_field,
        "workload": asdict(spec.workload),
        "space": spec.space,
    }
    return "backends-" + hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:8]


def plan_backends(
    opts: RunOptions, choice: BackendChoice, hf_model: str | None = None, factory: LauncherFactory = create_launcher
) -> BackendPlan:
    """Check the flags once, route the model to each backend, build each launcher (a backend
    that cannot serve is skipped with its reason), split the budget among those left. Nothing
    is launched or written; bad input and "no backend can serve it" raise (exit 2)."""
    if opts.warm_start:
        raise SpecError("warm_start continues one backend's study: tune several backends without it")
    base = study_spec(opts)  # the study file and the flags, validated before any backend is asked
    relative = [t.text for t in base.judged_targets if t.relative]
    if relative and (choice.auto or len(choice.backends) > 1):
        raise SpecError(
            f"target {relative[0]!r} is relative to each backend's own defaults, so the "
            f"backends would be held to different thresholds: give absolute targets "
            f"(e.g. ttft_p95<2s) to compare backends"
        )
    name = comparison_name(base, choice.backends, hf_model)
    if not choice.auto:
        split_budget(base.trials, len(choice.backends))  # too few trials: before any backend is asked
    ready: list[tuple[str, RunOptions, Launcher]] = []
    skipped: list[Skipped] = []
    for backend in choice.backends:
        try:
            given = {
                **opts.given,
                "backend": backend,
                "model": model_for(backend, base.model, hf_model),
                "study": f"{name}-{backend}",
            }
            leg_opts = replace(opts, given=given)
            launcher = factory(study_spec(leg_opts))
        except CANNOT_SERVE as e:
            skipped.append(Skipped(backend, str(e)))
            continue
        ready.append((backend, leg_opts, launcher))
    if not ready:
        why = "; ".join(f"{s.backend}: {s.reason}" for s in skipped)
        raise BackendError(f"no backend can serve this model here ({why})")
    shares = split_budget(base.trials, len(ready))
    time_share = base.time_budget_s / len(ready) if base.time_budget_s else None
    legs = [
        Leg(
            backend,
            replace(o, given={**o.given, "trials": trials, "time_budget_s": time_share}),
            launcher,
        )
        for (backend, o, launcher), trials in zip(ready, shares)
    ]
    return BackendPlan(name, legs, skipped, choice.auto)
