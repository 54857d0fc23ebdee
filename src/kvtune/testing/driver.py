"""A study on the fake launcher as its own process, for crash-safety tests and the soak
benchmark: kill it at any moment, start it again, and check the study.

    python -m kvtune.testing.driver --runs-dir D --study S --trials N [--faults]

With --faults, trials draw faults (crashes, hangs, HTTP errors, rejected flags, slow starts).
With --setup-only --confirm-top N the study asks for a confirmation, and its --join workers end
as `kvtune worker` does: the one elected confirms (its JSON line says how each ended).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys

from kvtune.errors import KvtuneError
from kvtune.kinds import KnobKind
from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec, parse_objectives
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner import cluster_seam as cluster
from kvtune.tuner.assemble import open_tuner, prepare
from kvtune.tuner.loop import Tuner
from kvtune.tuner.trial.disturbance import unwatched
from kvtune.workload import Workload

# A continuous speed makes every candidate distinct (each trial launches); about half the
# trials draw a fault.
FAULT_KNOBS = (
    Knob("speed", KnobKind.FLOAT, low=1.0, high=8.0),
    Knob(
        "fault",
        KnobKind.CHOICES,
        choices=("none", "no-fault", "healthy", "ok", "bogus", "http500", "crash", "hang", "slow-start"),
    ),
)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C, like `kvtune worker` (cli/one_study.py): the running trial is
    recorded as interrupted, its server stopped, its config re-queued."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs-dir", required=True)
    p.add_argument("--study", default="drive")
    p.add_argument("--trials", type=int, default=10)
    p.add_argument("--faults", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mark", default="", help="KVTUNE_TEST_MARK set on every server started")
    p.add_argument(
        "--storage",
        default=os.environ.get("KVTUNE_STORAGE"),
        help="shared Optuna storage URL (default: $KVTUNE_STORAGE, as `kvtune worker` reads it; else SQLite in the run dir)",
    )
    p.add_argument("--join", action="store_true", help="join the study as an extra worker")
    p.add_argument(
        "--setup-only", action="store_true", help="create the study for a scheduler's workers and run no trial"
    )
    p.add_argument("--slot", type=int, default=0)
    p.add_argument("--requests", type=int, default=2, help="measured requests per trial")
    p.add_argument(
        "--continuous", action="store_true", help="a continuous speed knob: every trial a new config (no duplicates)"
    )
    p.add_argument(
        "--base-ttft-ms",
        type=float,
        default=200.0,
        help="TTFT of speed 1 without faults (speed s: this / s); a test on a loaded "
        "machine widens the gaps so scheduling delay cannot reorder the configs",
    )
    p.add_argument(
        "--confirm-top",
        type=int,
        default=0,
        help="the study's --confirm-top (default 0: no confirmation, the crash and soak tests' speed); "
        "with N > 0 a study set up for workers is confirmed by the --join worker elected, as by `kvtune worker`",
    )
    p.add_argument("--confirm-pairs", type=int, default=3, help="the study's --confirm-pairs")
    p.add_argument(
        "--cpus-per-trial",
        type=int,
        default=None,
        help="--setup-only: the CPUs each worker's trials get (kvtune run --setup-only --cpus-per-trial)",
    )
    a = p.parse_args(argv)
    # a request may take its TTFT plus a loaded machine's delay, never a timeout by design
    timeout_s = max(1.0, 3 * a.base_ttft_ms / 1000)
    workload = Workload(
        concurrency=2,
        prompt_tokens=8,
        output_tokens=3,
        num_requests=a.requests,
        warmup_requests=0,
        request_timeout_s=timeout_s,
    )
    spec = StudySpec(
        study=a.study,
        trials=a.trials,
        workload=workload,
        seed=a.seed,
        startup_timeout_s=2,
        confirm_top=a.confirm_top,
        confirm_pairs=a.confirm_pairs,
        objective=parse_objectives("output_throughput" if a.faults else "ttft_p95"),
    ).validate()
    # Without faults, TTFT 200/100/50 ms for speed 1/2/4 (--base-ttft-ms scales them): the best
    # config is known (speed 4).
    launcher = FakeLauncher(
        base_ttft_ms=10 if a.faults else a.base_ttft_ms,
        base_itl_ms=1,
        extra_env={"KVTUNE_TEST_MARK": a.mark} if a.mark else {},
    )
    if a.faults:
        launcher.knobs = FAULT_KNOBS
    elif a.continuous:
        launcher.knobs = (Knob("speed", KnobKind.FLOAT, low=1.0, high=4.0),)
    if a.setup_only:
        prepared = prepare(spec, launcher=launcher, runs_dir=a.runs_dir, cpus_per_trial=a.cpus_per_trial)
        cluster.set_up_study(prepared, a.storage)
        print(json.dumps({"set_up": a.study}))
        return 0
    if a.join:  # as `kvtune worker` does: a scheduler's task index names it, SIGTERM re-queues
        task = cluster.scheduler_task()
        tuner = cluster.join(
            a.storage, a.study, launcher=launcher, runs_dir=a.runs_dir, slot=a.slot, monitor=unwatched, task=task
        )
        signal.signal(signal.SIGTERM, _interrupt)
    else:  # a fake server's figures are no evidence: nothing to watch (tuner/trial/disturbance.py)
        tuner = open_tuner(  # as `kvtune run --storage` does: the creator of a study workers share
            prepare(spec, launcher=launcher, runs_dir=a.runs_dir),
            storage_url=a.storage,
            monitor=unwatched,
            coordinate=cluster.coordinator_for(a.storage, workers=1),
        )
    if a.faults:  # draw faults at random: TPE would learn to avoid them, which is not the test
        import optuna

        tuner.study.sampler = optuna.samplers.RandomSampler(seed=a.seed + len(tuner.study.trials))
    try:
        outcomes = tuner.run()
        ending = _confirm(tuner, a.storage) if a.join else None
    except KeyboardInterrupt:
        print(json.dumps({"interrupted": True}))
        return 130
    except KvtuneError as e:  # as kvtune's CLI ends: one line, its exit status (75: the storage stayed down)
        print(f"error: {e}", file=sys.stderr)
        return e.exit_code
    print(json.dumps({"trials": len(outcomes), "feasible": sum(o.feasible for o in outcomes), "confirmation": ending}))
    return 0


def _confirm(tuner: Tuner, url: str) -> str | None:
    """A worker's last step, as `kvtune worker` takes it (tuner/fleet/confirmer.py): in a study
    set up for workers that asks for a confirmation, the worker elected confirms, the others
    leave. How it ended for this one (None: the study asks for none)."""
    if not cluster.ends_with_confirmation(tuner):
        return None
    return cluster.confirm_study(tuner, url, wait=False).ending.value


if __name__ == "__main__":
    sys.exit(main())
