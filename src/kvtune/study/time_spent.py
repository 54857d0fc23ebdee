"""Where a study's hardware time went: seconds by phase for every launch, summed per study.

Users pay for tuning in hardware time (GPU-hours on a box they would rather serve from), and on a
GPU most of a launch is start-up, not measurement. So every launch kvtune makes (a search trial,
a fresh run of a sentinel or the confirmation, a fresh measurement of the defaults for the
anchor of relative targets, the load search) records the seconds its server held the hardware
by phase:

- ``startup``: launch to ready (a transient failure's retry included);
- ``warmup``: the warm-up requests, left out of the figures;
- ``measurement``: the measured requests (a capacity search's load levels included);
- ``fidelity``: the fidelity probe on the trial's own server;
- ``teardown``: stopping the server;
- ``waits``: held but not measuring: the wait for the previous server's memory, the wait for a
  quiet machine and the measurements the interference monitor dropped as disturbed.

`cache_hit` says whether the start-up loaded vLLM's compiled graphs from its compile cache
(launchers/compile_cache.py) rather than compiling them: True, False, or None when the server
compiled nothing or its log does not say (llama-server, an eager vLLM).

A trial keeps its record in `TrialOutcome.time_spent`, a re-measurement in its run record
(tuner/remeasure.py `run_record`), a mid-search sentinel in its point of the sentinel series
(tuner/sentinel.py, results.json "sentinel"; the end point is the baseline's confirmation run),
an anchor run in its run record (tuner/anchor.py, results.json "anchor"), the load search in its
record (tuner/load_search.py, results.json "load_search"). `StudyTime.of` sums them by where the
time went, the parts `PART` declares; a part no launch went to is left out of the lines and the
report's table. A re-measurement or an anchor run whose launch failed transiently is launched
again; the failed launch's seconds (its start-up and waits) are added to the record of the launch
that then ran (`with_failed_starts`), as the runner's own retry of a start counts in its trial's
start-up. When no launch of it ever started, each failed launch is kept on its own in the study
(tuner/accounting.py `keep_never_started`, results.json "never_started": its part, its trial,
its seconds) and counted in its part like any launch, and the lines say how many never started:
the hardware was held even though nothing was measured. The record is plain data: the tuner
writes it, results.json, `kvtune show` and the report read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Iterable, Mapping, NamedTuple

from kvtune.durations import format_duration

PHASES = ("startup", "warmup", "measurement", "fidelity", "teardown", "waits")
PHASE_TEXT = {
    "startup": "start-up",
    "warmup": "warm-up",
    "measurement": "measurement",
    "fidelity": "fidelity probe",
    "teardown": "teardown",
    "waits": "waits",
}


class Part(NamedTuple):
    """Where a launch's time is counted: its name in the time lines and the report's table, and
    what its launches are (the table's column title)."""

    text: str
    what: str


# results.json "time_spent"'s keys for the parts
SEARCH, SENTINEL, ANCHOR, CONFIRMATION, LOAD_SEARCH = "search", "sentinel", "anchor", "confirmation", "load_search"
# Each part once, in the order the lines, results.json and the report's table give them.
PART = {
    SEARCH: Part("search", "the search's trials"),  # tuner/ask_tell.py
    SENTINEL: Part("sentinel", "the defaults measured again during the search"),  # tuner/sentinel.py
    ANCHOR: Part("anchor", "the defaults measured again, quiet, to anchor relative targets"),  # tuner/anchor.py
    CONFIRMATION: Part("confirmation", "the verdict's fresh runs"),  # tuner/confirmation.py
    LOAD_SEARCH: Part("load search", "the load that holds, searched on the nearest config"),  # tuner/load_search.py
}
PARTS = tuple(PART)
SENTINEL_ROLE = "sentinel"  # tuner/sentinel.py's run role; "screen" and "proof" are the verdict's


@dataclass(frozen=True)
class TimeSpent:
    """One launch's (or a sum of launches') seconds by phase, and the start-up's cache hit."""

    startup_s: float = 0.0
    warmup_s: float = 0.0
    measurement_s: float = 0.0
    fidelity_s: float = 0.0
    teardown_s: float = 0.0
    waits_s: float = 0.0
    cache_hit: bool | None = None

    def of(self, phase: str) -> float:
        """The seconds of `phase` (one of `PHASES`)."""
        return float(getattr(self, f"{phase}_s"))

    @property
    def total_s(self) -> float:
        return sum(self.of(p) for p in PHASES)

    def __add__(self, other: "TimeSpent") -> "TimeSpent":
        """The sum of two records (a sum has no single cache hit: None)."""
        seconds: dict[str, Any] = {f"{p}_s": self.of(p) + other.of(p) for p in PHASES}
        return TimeSpent(**seconds)

    def to_dict(self) -> dict[str, Any]:
        """{"<phase>_s": seconds, ..., "total_s", "cache_hit"} (seconds rounded to ms)."""
        d: dict[str, Any] = {f"{p}_s": round(self.of(p), 3) for p in PHASES}
        d["total_s"] = round(self.total_s, 3)
        d["cache_hit"] = self.cache_hit
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "TimeSpent | None":
        """Read back `to_dict()`; None for a record without one (an older file, a copied trial)."""
        if not d:
            return None
        known = {f.name for f in fields(cls)} - {"cache_hit"}
        values = {k: float(v) for k, v in d.items() if k in known and isinstance(v, (int, float))}
        hit = d.get("cache_hit")
        return cls(**values, cache_hit=hit if isinstance(hit, bool) else None)


def with_failed_starts(
    record: Mapping[str, Any] | None, failed: Iterable[Mapping[str, Any] | None]
) -> dict[str, Any] | None:
    """`record` (a launch's `to_dict()`) with the seconds of the launches before it that failed
    transiently added phase by phase (they never became ready: their start-up and waits), its
    own cache hit kept: what the retry cost counts in the launch that finally ran. None when
    `record` is None (nothing to add to)."""
    t = TimeSpent.from_dict(record)
    if t is None:
        return None
    total = t
    for f in failed:
        before = TimeSpent.from_dict(f)
        if before is not None:
            total = total + before
    return replace(total, cache_hit=t.cache_hit).to_dict()


@dataclass
class PartTime:
    """The launches of one part of a study (one of `PARTS`)."""

    spent: TimeSpent = field(default_factory=TimeSpent)
    launches: int = 0
    cache_hits: int = 0
    cache_misses: int = 0

    def add(self, t: TimeSpent) -> None:
        self.spent = self.spent + t
        self.launches += 1
        self.cache_hits += t.cache_hit is True
        self.cache_misses += t.cache_hit is False

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.spent.to_dict(),
            "cache_hit": None,
            "launches": self.launches,
            "cache_hits": self.cache_hits,
            "cache_misses": self.cache_misses,
        }


@dataclass
class StudyTime:
    """A study's hardware-seconds: by part (`PARTS`) and by phase (`PHASES`)."""

    parts: dict[str, PartTime] = field(default_factory=lambda: {p: PartTime() for p in PARTS})
    never_started: int = 0  # of the launches, those that never became ready (nothing measured)

    @classmethod
    def of(
        cls,
        trials: Iterable[Any],
        anchor: Mapping[str, Any] | None = None,
        load_search: Mapping[str, Any] | None = None,
        sentinel: Mapping[str, Any] | None = None,
        never_started: Iterable[Any] | None = None,
    ) -> "StudyTime":
        """Sum the records of `trials` (TrialOutcomes, or their `to_dict()` as results.json holds
        them): each trial's own launch into the search, each fresh run by its role (sentinel or
        confirmation). A copied trial (a duplicate) launched nothing and carries no record.
        `anchor`: the anchor's record (tuner/anchor.py), each of its runs one launch; `load_search`:
        the load search's (tuner/load_search.py), one launch when it launched; `sentinel`: the
        sentinel block (tuner/sentinel.py), each mid-search point one launch (the end point is
        the baseline's confirmation run, counted there; the first is the baseline's trial);
        `never_started`: the launches of re-measurements and anchor runs that never started
        (tuner/accounting.py `keep_never_started`), each in the part it names."""
        out = cls()
        for o in trials:
            d = o if isinstance(o, Mapping) else {"time_spent": o.time_spent, "confirmation": o.confirmation}
            out._add(SEARCH, d)
            for run in (d.get("confirmation") or {}).get("runs") or ():
                if isinstance(run, Mapping):
                    out._add(SENTINEL if run.get("role") == SENTINEL_ROLE else CONFIRMATION, run)
        for point in (sentinel or {}).get("series") or ():
            if isinstance(point, Mapping) and not point.get("end") and not point.get("first"):
                out._add(SENTINEL, point)
        for run in (anchor or {}).get("runs") or ():  # "quiet" is one of these runs again
            if isinstance(run, Mapping):
                out._add(ANCHOR, run)
        out._add(LOAD_SEARCH, load_search or {})
        for launch in never_started or ():
            if isinstance(launch, Mapping) and launch.get("part") in out.parts:
                out._add(str(launch["part"]), launch)
                out.never_started += 1
        return out

    @classmethod
    def of_results(cls, results: Mapping[str, Any]) -> "StudyTime":
        """The launches a results.json records: its trials', its "sentinel" block's mid-search
        points, its "anchor" block's runs, its "load_search" record's and its "never_started"
        launches (tuner/ledger.py)."""
        return cls.of(
            results.get("trials") or (),
            results.get("anchor"),
            results.get("load_search"),
            results.get("sentinel"),
            results.get("never_started"),
        )

    def _add(self, part: str, record: Mapping[str, Any]) -> None:
        """Count `record`'s launch (its "time_spent") in `part`; nothing when it keeps none."""
        t = TimeSpent.from_dict(record.get("time_spent"))
        if t is not None:
            self.parts[part].add(t)

    @property
    def total(self) -> TimeSpent:
        t = TimeSpent()
        for part in self.parts.values():
            t = t + part.spent
        return t

    @property
    def launches(self) -> int:
        return sum(p.launches for p in self.parts.values())

    def shares(self) -> dict[str, float]:
        """Each phase's fraction of the study's hardware-seconds (all 0 when nothing was timed)."""
        total = self.total.total_s
        return {p: (self.total.of(p) / total if total > 0 else 0.0) for p in PHASES}

    def to_dict(self) -> dict[str, Any]:
        """results.json's "time_spent"."""
        total = self.total
        return {
            **{part: self.parts[part].to_dict() for part in PARTS},
            "total_s": round(total.total_s, 3),
            "phases_s": {p: round(total.of(p), 3) for p in PHASES},
            "shares": {p: round(s, 4) for p, s in self.shares().items()},
            "launches": self.launches,
            "never_started": self.never_started,
        }

    def lines(self) -> list[str]:
        """Where the time went, for people: the total by part, then by phase with shares, then
        the compile cache's hits when any start-up said (empty when nothing was timed)."""
        total = self.total.total_s
        if self.launches == 0:
            return []
        by_part = ", ".join(
            f"{PART[part].text} {format_duration(self.parts[part].spent.total_s)} ({self.parts[part].launches} launch"
            f"{'' if self.parts[part].launches == 1 else 'es'})"
            for part in PARTS
            if self.parts[part].launches
        )
        shares = self.shares()
        by_phase = ", ".join(
            f"{PHASE_TEXT[p]} {format_duration(self.total.of(p))} ({shares[p]:.0%})"
            for p in PHASES
            if self.total.of(p) >= 0.5  # a phase that took no time says nothing
        )
        launches = f"{self.launches} launch{'' if self.launches == 1 else 'es'}" + (
            f" ({self.never_started} never started)" if self.never_started else ""
        )
        out = [
            f"hardware time: {format_duration(total)} in {launches}: {by_part}",
            f"  by phase: {by_phase}",
        ]
        hits = sum(p.cache_hits for p in self.parts.values())
        misses = sum(p.cache_misses for p in self.parts.values())
        if hits or misses:
            out.append(f"  compile cache: {hits} start-ups loaded compiled graphs, {misses} compiled")
        return out
