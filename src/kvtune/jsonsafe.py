"""JSON that any tool can read: non-finite floats become null, objects their `to_dict()`.

A leaf module used by the tuner (trial outcomes stored in Optuna's user attrs), the bench
(saved runs) and the artifacts (results.json). A p99 of +inf means requests failed, which the
error rate already says, so writing null loses nothing and keeps the file standard JSON.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from typing import Any


def to_jsonable(obj: Any) -> Any:
    """Plain JSON data: dicts with str keys, lists, finite numbers or None, strings."""
    if isinstance(obj, bool) or obj is None:
        return obj
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, dict):
        return {str(to_jsonable(k)) if isinstance(k, enum.Enum) else str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    return str(obj)


def dumps(obj: Any, **kwargs: Any) -> str:
    return json.dumps(to_jsonable(obj), allow_nan=False, **kwargs)
