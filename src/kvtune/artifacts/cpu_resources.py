"""The CPUs a config was tuned on, as container exports reserve them.

A config tuned on 4 CPUs (threads=4, a batch size that keeps 4 cores busy) is a claim about 4
CPUs: a container that may take the whole host, or is squeezed onto one core by its neighbours,
serves another config. Compose and Kubernetes exports therefore carry the figure the
measurement ran with, and say where it came from:

- a trial whose server was pinned to a CPU set (a worker's slot: `TrialOutcome.cpus`) ran on
  that many CPUs, and compose also pins the same set (`cpuset`);
- otherwise the study's hardware fingerprint (results.json `hardware.cpus`: this process's CPU
  affinity, or the CPUs per trial of a study set up for workers);
- a cgroup CPU quota below that (`hardware.cpu_quota`) is what the server could use.

Pure: results in, figures out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from kvtune.study.outcome import TrialOutcome


@dataclass(frozen=True)
class CpuResources:
    count: float  # CPUs' worth of time the measured server had
    cpuset: str | None  # "0-3,8": the set it was pinned to; None: it was not pinned
    source: str  # where `count` comes from, for the export's comment

    def compose_cpus(self) -> float | int:
        """Compose's `cpus:` (a number of CPUs, fractions allowed)."""
        return int(self.count) if float(self.count).is_integer() else self.count

    def k8s_quantity(self) -> str:
        """A Kubernetes CPU quantity: whole CPUs as "4", fractions in millicores ("1500m")."""
        if float(self.count).is_integer():
            return str(int(self.count))
        return f"{round(self.count * 1000)}m"

    def compose_fields(self) -> dict:
        """A compose service's `cpus:` and, for a pinned trial, `cpuset:`."""
        return {"cpus": self.compose_cpus(), **({"cpuset": self.cpuset} if self.cpuset else {})}

    def k8s_resources(self) -> dict:
        """A container's CPU requests = limits: the scheduler places it where the CPUs are free,
        and with whole CPUs the kubelet's static CPU manager gives it cores of its own."""
        return {"limits": {"cpu": self.k8s_quantity()}, "requests": {"cpu": self.k8s_quantity()}}

    def comment(self, what: str) -> str:
        """The header line that says what the file reserves (`what`) and where it came from."""
        return f"CPUs: {what}, as tuned: {self.source}"

    def compose_comment(self) -> str:
        pinned = f", cpuset {self.cpuset} (the tuning host's CPU numbers: drop it on another host)"
        return self.comment(f"cpus {self.compose_cpus():g}" + (pinned if self.cpuset else ""))

    def k8s_comment(self) -> str:
        return self.comment(f"cpu requests = limits = {self.k8s_quantity()}")


def cpu_ranges(cpus: list[int]) -> str:
    """[0, 1, 2, 3, 8] -> "0-3,8" (the cpuset list format of docker, compose and Linux)."""
    out: list[str] = []
    ids = sorted(set(cpus))
    start = prev = ids[0]
    for c in [*ids[1:], None]:
        if c is not None and c == prev + 1:
            prev = c
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if c is not None:
            start = prev = c
    return ",".join(out)


def tuned_cpus(trial: TrialOutcome, hw: Mapping[str, Any]) -> CpuResources | None:
    """The CPUs `trial` was measured on, from its pinned set or the study's hardware
    fingerprint `hw`, or None when neither says (files written before the hardware was recorded)."""
    pinned = [int(c) for c in trial.cpus or []]
    cpuset: str | None = None
    if pinned:
        count: float = len(pinned)
        cpuset = cpu_ranges(pinned)
        source = f"the trial's server was pinned to CPUs {cpuset} (results.json trial {trial.number} 'cpus')"
    elif (cpus := _positive(hw.get("cpus"))) is not None:
        count = cpus
        per_trial = " per trial (a study set up for workers)" if hw.get("host_cpus") else ""
        source = f"the study's hardware fingerprint (results.json hardware.cpus: {count}{per_trial})"
    else:
        return None
    quota = _positive(hw.get("cpu_quota"))
    if quota is not None and quota < count:
        count = quota
        source += f", capped by the cgroup CPU quota it ran under (hardware.cpu_quota: {quota:g})"
    return CpuResources(count=count, cpuset=cpuset, source=source)


def _positive(x: object) -> float | None:
    """`x` where it is a number above zero (a hand-edited or older results.json may hold anything)."""
    return x if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 else None
