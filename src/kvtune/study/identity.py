"""Which study a run is: its default name, what a resumed study must share with the one stored,
and what a study name may be.

The default study name carries `fingerprint`, a hash of what the user asked for, so the same
flags find the same study and other flags another; `identity` is what a resumed study is checked
against (the model as the launcher resolved it, the merged space), and `resume_conflict` names a
setting that identity cannot tell apart (a price, a relative target) which would mix
incomparable trials. Split from study/spec.py: the spec declares and checks settings, this says
which study they make.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from kvtune.errors import SpecError, TargetError
from kvtune.knobs import Knob
from kvtune.objectives.targets import parse_target
from kvtune.readable import NAME_MAX

if TYPE_CHECKING:
    from kvtune.study.spec import StudySpec


def fingerprint(spec: StudySpec) -> str:
    """A short hash of what the user asked for (not the trial budget): the default study name.
    Computed from the words given, before any launcher exists; `identity` is what a resumed
    study is checked against. Kept byte-for-byte as earlier versions computed it, so the same
    flags find the same study."""
    key: dict[str, Any] = {
        "backend": spec.backend,
        "model": spec.model,
        "targets": sorted(spec.target_texts),
        "objective": spec.objective_field,
        "workload": spec.workload.to_dict(),
        "space": spec.space,
    }
    if spec.price is not None:  # costs are stored per trial: another price, another study
        key["price"] = [spec.price.usd, spec.price.per_gpu]
    key.update({} if spec.slo is None else {"slo": spec.slo.text})  # another SLO, another study
    key.update({"draft_model": spec.draft_model} if spec.draft_model else {})  # only when set:
    key.update({"speculative": True} if spec.speculative else {})  # older names stay the same
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:8]


def identity(spec: StudySpec, model: str | None, knobs: Iterable[Knob]) -> dict[str, Any]:
    """What a resumed study must share with the one stored (tuner/assemble.py compares it):
    the model as the launcher resolved it and the merged search space. The same keys and
    values as earlier versions stored (absolute targets by their threshold), so their studies
    resume; what that form cannot tell apart (relative factors, the price) `resume_conflict`
    checks against the stored spec."""
    return {
        "backend": spec.backend,
        "model": Path(model).name if model and Path(str(model)).exists() else model,
        "targets": sorted(t.name + t.op + repr(t.threshold) for t in spec.targets),
        "objective": spec.objective_field,
        "workload": spec.workload.to_dict(),
        "space": [k.describe() for k in knobs],
    }


def resume_conflict(spec: StudySpec, stored: dict[str, Any]) -> str | None:
    """The setting this spec changes from a stored study's spec (its `to_dict`) that would mix
    incomparable trials, as a phrase for the refusal; None when there is none."""
    for key, flag in (("price_per_hour", "price_per_hour"), ("price_per_gpu_hour", "price_per_gpu_hour")):
        was, now = stored.get(key), getattr(spec, key)
        if was != now:
            return f"{flag} (stored: {_setting(was)}, now: {_setting(now)})"
    was_rel = _relative_keys(stored.get("targets") or [])
    now_rel = sorted(t.constraint_key for t in spec.targets if t.relative)
    if was_rel != now_rel:
        return f"relative target (stored: {', '.join(was_rel) or 'none'}, now: {', '.join(now_rel) or 'none'})"
    return None


def _setting(value: Any) -> str:
    return "not set" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _relative_keys(texts: Iterable[str]) -> list[str]:
    """The relative targets among stored target texts, by what they mean (constraint key, e.g.
    ``ttft_p95<0.8x``), so a respelling is not a change."""
    out = []
    for text in texts:
        try:
            t = parse_target(text)
        except TargetError:  # a target this version no longer reads is no factor to compare
            continue
        if t.relative:
            out.append(t.constraint_key)
    return sorted(out)


_STUDY_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=@-]*")


def check_study_name(name: str) -> str:
    """A study name is a folder under the runs folder and a key in shared storage: letters,
    digits and . _ + = @ - (starting with a letter or digit), so it can never be empty, climb out
    of the runs folder (/, ..) or read as a flag; and no longer than a folder's name can be."""
    if not _STUDY_NAME.fullmatch(name or ""):
        raise SpecError(
            f"--study {name!r} is not a study name: use letters, digits and . _ - "
            f"(starting with a letter or digit), e.g. my-box-ttft"
        )
    if len(name.encode()) > NAME_MAX:  # its folder could not be made: after the runs folder was
        raise SpecError(
            f"--study {name[:24]!r}... is {len(name.encode())} characters: a study name is {NAME_MAX} at most"
        )
    return name


def study_name_part(text: str) -> str:
    """`text` (a model path or hub id) as part of a default study name: a local path's last
    component, a hub id's org/name as org--name, anything else outside the name's characters
    as '-'."""
    last = text.rstrip("/")
    if last.startswith(("/", "./", "../", "~")):
        last = last.rsplit("/", 1)[-1]
    slug = re.sub(r"[^A-Za-z0-9._+=@-]", "-", last.replace("/", "--")).strip("-.")
    return slug or "model"
