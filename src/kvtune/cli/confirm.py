"""`kvtune confirm --storage URL --study NAME`: confirm a study that workers searched, from any
host of its hardware class, and print the result as `kvtune run` prints a local study's end.

A study set up with `kvtune run --setup-only` is confirmed by the last of its workers (one, by
election: tuner/fleet/confirmer.py); this command joins the same election, so it resumes a
confirmation whose worker died, waits for one under way elsewhere, or prints the stored verdict.
It refuses, in one line with exit status 2 and before any server starts, a study still
searching and a host of another hardware class than the study's (the fresh runs are compared
with the search's: `--allow-mixed-hardware` to do it anyway). Exit status 0 when a config is
named, 1 when nothing met the targets, 75 when the storage does not answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import typer
from rich.console import Console

from kvtune import hardware
from kvtune.artifacts.summary import summarize
from kvtune.cli.app import app, console, err_console, say_wait
from kvtune.cli.flag_names import check_llama_server_flag, check_vllm_python_flag
from kvtune.cli.one_study import interrupt_on_sigterm
from kvtune.cli.progress import make_reporter
from kvtune.cli.run_text import print_summary
from kvtune.errors import SpecError
from kvtune.study.spec import StudySpec
from kvtune.tuner import accounting
from kvtune.tuner.assemble import HARDWARE_KEYS, Prepared
from kvtune.tuner.fleet.confirmer import Ending, Result, confirm_study, confirmed, confirmed_by, still_searching
from kvtune.tuner.fleet.setup import PLACEMENT_ATTR
from kvtune.tuner.fleet.workers import join
from kvtune.tuner.loop import Tuner
from kvtune.tuner.session import RunOptions, Session
from kvtune.tuner.store import storage
from kvtune.tuner.store.connect import unreachable


@dataclass(frozen=True)
class ConfirmOptions:
    """`kvtune confirm`'s flags."""

    storage: str
    study: str
    runs_dir: str | None = None
    llama_server: str | None = None
    vllm_python: str | None = None
    gpus_per_trial: int | None = None  # None: the study's own (set up with --gpus-per-trial)
    allow_mixed_hardware: bool = False


@app.command()
def confirm(
    storage: str = typer.Option(
        ...,
        envvar="KVTUNE_STORAGE",
        help="The study's Optuna storage URL (postgresql://..., grpc://HOST:PORT of `kvtune proxy`), or set KVTUNE_STORAGE.",
    ),
    study: str = typer.Option(..., help="Study name (set up with `kvtune run --setup-only --study NAME`)."),
    runs_dir: Optional[str] = typer.Option(
        None, help="Where this host keeps server logs and the launch script (default ./kvtune-runs)."
    ),
    llama_server: Optional[str] = typer.Option(None, "--llama-server", help="Path to llama-server on this host."),
    vllm_python: Optional[str] = typer.Option(None, "--vllm-python", help="Python whose vLLM to run on this host."),
    gpus_per_trial: Optional[int] = typer.Option(
        None, "--gpus-per-trial", help="GPUs each server gets (default: the study's, as it was set up)."
    ),
    allow_mixed_hardware: bool = typer.Option(
        False, "--allow-mixed-hardware", help="Confirm on a host of another hardware class than the study's."
    ),
) -> None:
    """Confirm a study its workers searched: the leaders re-measured on fresh servers, one tested against the defaults."""
    interrupt_on_sigterm()
    opts = ConfirmOptions(storage, study, runs_dir, llama_server, vllm_python, gpus_per_trial, allow_mixed_hardware)
    raise typer.Exit(confirm_here(opts))


def confirm_here(o: ConfirmOptions, *, out: Console = console, **parts: Any) -> int:
    """The command's work; `parts` are the fakes a test injects into `join` (launcher, monitor)."""
    if not o.study.strip():
        raise SpecError("--study must name the study to confirm, got ''")
    check_llama_server_flag(o.llama_server)  # named by the flag, before the study is read
    check_vllm_python_flag(o.vllm_python)
    if o.gpus_per_trial is not None and o.gpus_per_trial < 0:  # was 'still searching', the flag unread
        raise SpecError(f"--gpus-per-trial must be 0 or more, got {o.gpus_per_trial}")
    stored_hw, gpus = _check_study(o)
    reporter = make_reporter("plain", out, 0)
    tuner = join(
        o.storage,
        o.study,
        runs_dir=o.runs_dir,
        gpus_per_trial=gpus if o.gpus_per_trial is None else o.gpus_per_trial,
        llama_server=o.llama_server,
        vllm_python=o.vllm_python,
        callbacks=reporter.callbacks(),
        allow_mixed_hardware=True,  # refused below, in words about confirming
        **parts,
    )
    if not confirmed(tuner.study):
        _check_hardware(o, stored_hw, tuner.ctx.where.hardware)
    try:
        result = confirm_study(
            tuner, o.storage, wait=True, on_wait=lambda line: out.print(line, markup=False), resume_clock=True
        )
    except KeyboardInterrupt:
        err_console.print("interrupted: the runs so far are stored; run `kvtune confirm` again to resume")
        return 130
    except Exception as e:  # the storage went away mid-way: exit 75, retry
        lost = unreachable(e, o.storage)
        if lost is None:
            raise
        raise lost from e
    finally:
        reporter.close()
    return print_result(tuner, o.storage, result, out)


def _check_study(o: ConfirmOptions) -> tuple[dict, int]:
    """The study's hardware class and GPUs per trial, read only; one line (exit 2) when there
    is nothing to confirm yet, or its workers are still searching."""
    study = storage.load_study(o.study, o.storage, read_only=True, on_wait=say_wait)
    attrs = study.user_attrs
    if "spec" not in attrs:
        raise SpecError(f"study {o.study!r} was not created by kvtune (no stored spec)")
    if StudySpec.from_dict(attrs["spec"]).confirm_top < 1:
        raise SpecError(
            f"study {o.study!r} asks for no confirmation (confirm_top: 0): its best is named as it stands "
            f"(kvtune show --storage URL {o.study}); set up a new study to confirm"
        )
    gpus = int((attrs.get(PLACEMENT_ATTR) or {}).get("gpus_per_trial", 0))
    if confirmed(study):
        return attrs.get("hardware") or {}, gpus
    if attrs.get("hardware") is None or accounting.spent(study).measured == 0:
        raise SpecError(
            f"study {o.study!r} has no measured trial yet: start its workers first "
            f"(kvtune worker, or kvtune export-workers --study {o.study})"
        )
    busy = still_searching(study)
    if busy is not None:
        raise SpecError(
            f"study {o.study!r} is still searching ({busy}): its last worker confirms it when the budget "
            f"is spent; run kvtune confirm once its workers are gone"
        )
    return attrs["hardware"], gpus


def _check_hardware(o: ConfirmOptions, stored: dict, here: dict) -> None:
    """The fresh runs are compared with the search's: they must run on the same hardware class."""
    if o.allow_mixed_hardware or {k: stored.get(k) for k in HARDWARE_KEYS} == {k: here.get(k) for k in HARDWARE_KEYS}:
        return
    raise SpecError(
        f"study {o.study!r} was measured on {hardware.describe(stored)}; this host is {hardware.describe(here)}: "
        f"confirm it on a host of that class (its fresh runs are compared with the search's), "
        f"or pass --allow-mixed-hardware"
    )


def prepared_of(tuner: Tuner) -> Prepared:
    """The prepared parts a joined tuner was built from, as the summary reads them."""
    return Prepared(
        spec=tuner.spec,
        targets=tuner.targets,
        launcher=tuner.launcher,
        space=tuner.space,
        study_name=tuner.study.study_name,
        run_dir=tuner.run_dir,
        hardware=tuner.ctx.where.hardware,
    )


def print_result(tuner: Tuner, url: str, result: Result, out: Console) -> int:
    """Who confirmed, then the study's end as `kvtune run` prints it (results.json and the
    launch script written in this host's run folder); the summary's exit status."""
    p = prepared_of(tuner)
    if result.ending is Ending.CONFIRMED:
        out.print(f"confirmed study {p.study_name} here; the verdict is stored in the study", markup=False)
        if result.lost:
            err_console.print("warning: another process took this confirmation over while it ran (its beat stopped)")
    else:
        out.print(f"study {p.study_name} was confirmed by {confirmed_by(tuner.study)}:", markup=False)
    outcomes = tuner.outcomes()
    session = Session(RunOptions(storage=url, runs_dir=None), p, tuner, url)
    summary = summarize(
        p.run_dir, session.results(outcomes), outcomes, p.spec.objective_specs, p.targets, "127.0.0.1", 8080
    )
    print_summary(p, summary, out)
    return summary.exit_code


def confirm_at_end(tuner: Tuner, url: str, out: Console = console) -> None:
    """A worker's last step in a study set up for a scheduler (tuner/fleet/confirmer.py): confirm
    it when elected, else leave it to the one that is."""
    result = confirm_study(tuner, url, wait=False)
    slot = tuner.ctx.where.slot
    if result.ending is Ending.ELSEWHERE and result.holder is not None:
        out.print(f"worker {slot}: {result.holder.describe()} confirms study {tuner.study.study_name}; leaving")
    elif result.ending is Ending.DONE:
        out.print(f"worker {slot}: study {tuner.study.study_name} is confirmed; leaving")
    else:
        print_result(tuner, url, result, out)
