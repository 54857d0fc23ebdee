"""The study file: a YAML mapping of StudySpec keys, read and type-checked at the edge.

Its values go to `study.spec.build_spec`, which lays the command-line flags over them. Kept apart
from the spec so the spec module is the typed record and this one the YAML boundary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvtune.errors import SpecError, TargetError
from kvtune.objectives.targets import parse_target
from kvtune.readable import check_regular_file
from kvtune.study.settings import SECTION_KEYS, read_section
from kvtune.study.space import parse_space
from kvtune.study.study_yaml import parse_study_yaml, read_study_bytes
from kvtune.workload import Workload


def load_study_file(path: str | Path) -> dict[str, Any]:
    """Read and type-check a YAML study file; returns the keys it sets (`workload`: the workload
    keys it sets)."""
    p = Path(path)
    if not str(path).strip():
        raise SpecError("--study-file is empty: give a YAML study file's path, or leave the flag out")
    check_regular_file(p, f"study file {str(path)!r}")  # a named pipe would block the read
    try:
        raw = read_study_bytes(p)
    except FileNotFoundError:
        raise SpecError(f"study file {str(path)!r} does not exist") from None
    except IsADirectoryError:
        raise SpecError(f"study file {str(path)!r} is a folder: give a YAML file in it") from None
    except OSError as e:
        raise SpecError(f"cannot read study file {str(path)!r}: {e.strerror}") from e
    data = parse_study_yaml(raw, f"study file {str(path)!r}")  # bytes, size, aliases, keys given twice
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(f"study file {str(path)!r} must be a mapping of keys, not {type(data).__name__}")
    typed = read_section({k: v for k, v in data.items() if k not in SECTION_KEYS}, "top", f"study file {str(path)!r}")
    data = {**typed, **{k: data[k] for k in SECTION_KEYS if data.get(k) is not None}}
    if "targets" in data:
        try:  # parsed once, here: the spec keeps these Targets (study/spec.py _typed_targets)
            data["targets"] = [parse_target(text) for text in data["targets"]]
        except TargetError as e:  # the file's error, said as one: where, then what
            raise SpecError(f"targets: {e}") from e
    if "workload" in data:  # checked here; kept as the keys given (build_spec needs to know which)
        parse_workload(data["workload"])
        data["workload"] = read_section(data["workload"], "workload", "workload")
    if "space" in data:
        if data["space"] is None:
            data["space"] = {}
        parse_space(data["space"])
    # Relative model paths are relative to the study file, so studies can travel with models.
    for key in ("model", "draft_model", "fidelity_prompts"):
        if data.get(key) and data[key] != "demo" and not Path(data[key]).is_absolute():
            data[key] = str((p.parent / data[key]).resolve())
    return data


def parse_workload(raw: Any) -> Workload:
    """A study file's `workload:` mapping, each key checked by its setting, as a Workload."""
    if not isinstance(raw, dict):
        raise SpecError("workload must be a mapping (concurrency, prompt_tokens, output_tokens, ...)")
    return Workload(**read_section(raw, "workload", "workload")).validate()
