"""One trial to deploy and the study it comes from, read once: what every export format renders.

The launch script, the verify script and the other formats all need the trial's argv and
environment, the study's spec (its workload, targets, backend and SLOs) and a few recorded facts
(name, hardware, versions). A `Deployable` holds them typed, the spec parsed once, so no
renderer reads the spec back from a dict again: `kvtune run` builds one from the best it named
(`study.results.BestChoice`), `kvtune export` from the trial results.json picked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from kvtune import hardware
from kvtune.study import best_figures
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import StudySpec


@dataclass(frozen=True)
class Deployable:
    trial: TrialOutcome
    spec: StudySpec
    results: Mapping[str, Any]  # results.json's content: the facts the headers quote as recorded
    named_best: bool  # the trial is the study's named best (headers say "the best trial")
    # the defaults' figures relative targets were set from: the baseline's, or the quiet
    # re-measurement they were anchored on when its own were disturbed (tuner/anchor.py)
    baseline_metrics: dict = field(default_factory=dict)

    @classmethod
    def read(cls, trial: TrialOutcome | Mapping[str, Any], results: Mapping[str, Any]) -> Deployable:
        """The trial (an outcome, or its results.json record) of the study `results` records."""
        outcome = trial if isinstance(trial, TrialOutcome) else TrialOutcome.from_dict(dict(trial))
        base = next((t for t in results.get("trials") or [] if t.get("baseline")), None)
        return cls(
            outcome,
            StudySpec.from_dict(results.get("spec") or {}),
            results,
            outcome.number == results.get("best_trial"),
            dict(
                ((results.get("anchor") or {}).get("quiet") or {}).get("metrics") or (base or {}).get("metrics") or {}
            ),
        )

    def measured_lines(self) -> list[str]:
        """What the trial measured, labelled, for the headers: the study's best figures
        (study/best_figures.py: the verdict's fresh runs with 95% intervals, as the summary shows
        them) when the trial is the best they are of, else its search measurement, said to be one."""
        figures = best_figures.recorded(self.results)
        if figures is not None and figures.trial == self.trial.number:
            lines = [f"measured: {figures.measured_text()}"]
            row = figures.objective_row
            if row is not None and row.change is not None:
                lines.append(f"against the server's defaults: {figures.objective} {row.change.text()}")
            return lines
        m = self.trial.metrics or {}
        if not m:
            return []

        def ms(k: str) -> str:
            return f"{m[k]:.0f} ms" if isinstance(m.get(k), (int, float)) else "n/a"

        which = "1 run" if self.trial.baseline else "1 run, selected as the maximum: biased up"
        return [
            f"measured: search measurement ({which}): output {m.get('output_throughput') or 0:.1f} tok/s, "
            f"TTFT p95 {ms('p95_ttft_ms')}, TPOT p95 {ms('p95_tpot_ms')}, E2EL p95 {ms('p95_e2el_ms')}"
        ]

    @property
    def hardware(self) -> Mapping[str, Any]:
        return self.results.get("hardware") or {}

    @property
    def backend_version(self) -> str:
        return str(self.results.get("backend_version") or "")

    @property
    def pinned_gpus(self) -> list[str]:
        """The GPUs the trial's server was pinned to (its worker slot's CUDA_VISIBLE_DEVICES), or
        [] when it saw every GPU of the host."""
        return hardware.cuda_visible_devices(self.trial.device_env or {}) or []

    @property
    def gpus_to_reserve(self) -> int:
        """GPUs a container reserves for the trial: its slot's, else every GPU the study ran on."""
        return len(self.pinned_gpus) or study_gpu_count(self.hardware)


def study_gpu_count(hw: Mapping[str, Any]) -> int:
    """GPUs the study ran on: a 'gpus' list or count, else 1 when an accelerator is named."""
    gpus = hw.get("gpus")
    if isinstance(gpus, (list, tuple)):
        return len(gpus)
    if isinstance(gpus, int) and not isinstance(gpus, bool):
        return max(gpus, 0)
    acc = str(hw.get("accelerator") or "none").strip().lower()
    return 0 if acc.startswith("none") or acc in ("", "cpu") else 1
