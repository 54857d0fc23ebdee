"""Who confirms a study that many processes share: an election through the study's storage.

Optuna's user attrs are last-writer-wins (`set_user_attr` is an upsert, no compare-and-set), so
"the first to write the flag" cannot be read back from them. A trial number can: creating a
trial locks the study's row (Optuna's RDB storage: `SELECT ... FOR UPDATE` before it counts the
trials; SQLite locks the whole file; `kvtune proxy` forwards to that database; the in-memory
storage holds a lock), so numbers are handed out one at a time, in commit order. A process that
reads the trials after its own trial was created therefore sees every lower number.

So each process that would confirm creates a *claim*: a RUNNING trial in a side study,
``<study>:confirmation``, beside the study (in the study itself a claim would count as a running
trial, and the recovery would re-queue it as a config to measure). The lowest-numbered claim
whose holder is alive confirms; a process that sees a live claim below its own leaves (a worker)
or waits for it (`kvtune confirm`).

Alive: the holder's thread bumps its claim's ``beat`` user attr every `BEAT_S`. A claim below
one's own is dead when it names this host and its process is gone (pid and start time, as for
trials: tuner/fleet/recovery.py), or when its beat did not move for `GRACE_S` while this process
watched it: an observation on this process's clock, never a comparison of two hosts' clocks.
A dead claim is told FAIL (by whoever sees it first; the others find it finished) and the next
claim up holds. A holder that leaves (done, interrupted, failed) tells its claim finished at
once, so nobody waits the grace period for it.

The limit: a holder whose beat stops for `GRACE_S` while it still runs (its storage unreachable
that long, the process stopped with SIGSTOP) is taken over, and two confirm at once. `GRACE_S`
is three times the trials' grace period for that reason (60 s by default; a takeover waits that
long once); `claim.lost` tells the holder afterwards.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.storages import BaseStorage

from kvtune.clock import REAL_CLOCK, Clock
from kvtune.tuner.fleet import recovery
from kvtune.tuner.store import storage

SIDE_SUFFIX = ":confirmation"
OWNER_ATTR = "owner"  # the claim's holder: host, pid, start ticks, slot (the trials' worker identity)
BEAT_ATTR = "beat"
BEAT_S = float(storage.HEARTBEAT_S)
GRACE_S = 3.0 * storage.GRACE_S
S = optuna.trial.TrialState


def side_name(study_name: str) -> str:
    return f"{study_name}{SIDE_SUFFIX}"


def side_study(study_name: str, where: str | BaseStorage) -> optuna.Study:
    """The study's side study of claims in the same storage (`where`: its URL or storage),
    created by the first process that needs it (two at once: Optuna loads the other's)."""
    store = storage.make_storage(where) if isinstance(where, str) else where
    return optuna.create_study(
        study_name=side_name(study_name),
        storage=store,
        sampler=optuna.samplers.RandomSampler(),  # a claim has no parameters: nothing to sample
        load_if_exists=True,
    )


@dataclass
class Claim:
    """This process's claim: a RUNNING trial of the side study, numbered by the storage."""

    side: optuna.Study
    trial: optuna.trial.Trial
    beats: int = 0
    lost: bool = False  # another process told it finished while this one held it

    @property
    def number(self) -> int:
        return self.trial.number

    def beat(self) -> None:
        """One heartbeat. A storage that does not answer this once is no reason to stop: the
        next beat retries; a claim told finished by another process is `lost`."""
        try:
            self.trial.set_user_attr(BEAT_ATTR, self.beats + 1)
            self.beats += 1
        except optuna.exceptions.UpdateFinishedTrialError:
            self.lost = True
        except Exception:  # noqa: BLE001 (a storage hiccup: the grace period covers a few missed beats)
            pass

    def release(self, done: bool) -> None:
        """Tell the claim finished: COMPLETE when this process confirmed, else FAIL."""
        state = S.COMPLETE if done else S.FAIL
        try:
            self.side.tell(self.trial, 0.0 if done else None, state=state, skip_if_finished=True)
        except Exception:  # noqa: BLE001 (unreachable now: the grace period ends the claim)
            pass


def claim(side: optuna.Study, owner: dict[str, Any]) -> Claim:
    """A new claim for `owner` (the worker identity trials carry). Always a new trial: no
    trial is ever queued in the side study, so `ask` never pops an older number."""
    with warnings.catch_warnings():  # ask/tell on a storage with heartbeats is meant here
        warnings.simplefilter("ignore")
        trial = side.ask()
    trial.set_user_attr(OWNER_ATTR, owner)
    trial.set_user_attr(BEAT_ATTR, 0)
    return Claim(side, trial)


class Beating:
    """A thread that beats `claim` every `beat_s` until the `with` block ends."""

    def __init__(self, c: Claim, beat_s: float = BEAT_S):
        self.claim, self.beat_s = c, beat_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kvtune-claim-beat", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.beat_s):
            self.claim.beat()

    def __enter__(self) -> Claim:
        self._thread.start()
        return self.claim

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=self.beat_s + 30)


@dataclass(frozen=True)
class Holder:
    """A live claim below this process's own: the process that confirms."""

    number: int
    owner: dict[str, Any]

    def describe(self) -> str:
        o = self.owner
        return f"slot {o.get('slot', '?')} on {o.get('host', '?')} (pid {o.get('pid', '?')}, claim {self.number})"


@dataclass
class Election:
    """This process's view of the claims below its own (`host`: this host's name, as trials
    record it). `seen` holds, per claim number, the beat last read and when it was first read
    at that value (this process's clock), and whether the beat was seen to move."""

    side: optuna.Study
    host: str
    clock: Clock = REAL_CLOCK
    grace_s: float = GRACE_S
    seen: dict[int, tuple[Any, float, bool]] = field(default_factory=dict)

    def look(self, mine: int) -> tuple[Holder | None, bool]:
        """(the lowest claim below `mine` not known to be dead, whether it is known alive);
        (None, True) when `mine` is the lowest: this process confirms. Dead ones are told FAIL."""
        below = [t for t in self.side.get_trials(deepcopy=False, states=(S.RUNNING,)) if t.number < mine]
        for t in sorted(below, key=lambda t: t.number):
            alive = self._alive(t)
            if alive is False:
                self._fail(t)
                continue
            return Holder(t.number, dict(t.user_attrs.get(OWNER_ATTR) or {})), bool(alive)
        return None, True

    def _alive(self, t: optuna.trial.FrozenTrial) -> bool | None:
        """True: alive; False: dead; None: not known yet (watched less than the grace period)."""
        owner = t.user_attrs.get(OWNER_ATTR) or {}
        if owner.get("host") == self.host:
            return recovery.alive(owner)
        beat, now = t.user_attrs.get(BEAT_ATTR), self.clock.monotonic()
        last = self.seen.get(t.number)
        if last is None:  # first sight: alive only once its beat is seen to move
            self.seen[t.number] = (beat, now, False)
            return None
        value, since, moved = last
        if value != beat:
            self.seen[t.number] = (beat, now, True)
            return True
        if now - since >= self.grace_s:
            return False
        return True if moved else None

    def _fail(self, t: optuna.trial.FrozenTrial) -> None:
        try:
            self.side.tell(t.number, state=S.FAIL, skip_if_finished=True)
        except (RuntimeError, ValueError):
            pass  # another process got there first
