"""No module basename twice in src/kvtune: a name says which module is meant (`confirm.py` was the
CLI command and the tuner's phase; `evidence.py` three things), in a traceback, a grep, a review."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import kvtune

ROOT = Path(kvtune.__file__).resolve().parent


def test_no_module_basename_is_used_twice():
    where: dict[str, list[str]] = defaultdict(list)
    for path in ROOT.rglob("*.py"):
        if path.name != "__init__.py" and "__pycache__" not in path.parts:
            where[path.name].append(str(path.relative_to(ROOT)))
    twice = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert twice == {}, f"rename one of each: {twice}"
