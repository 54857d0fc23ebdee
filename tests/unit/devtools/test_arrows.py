"""The documented layering holds: no import circle, no arrow up or sideways (kvtune.devtools.arrows)."""

from __future__ import annotations

from pathlib import Path

from kvtune.devtools import arrows


def test_the_package_has_no_circle_and_no_arrow_against_the_layers():
    assert arrows.problems() == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "kvtune"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_an_upward_arrow_is_reported_with_its_line(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "kinds.py": "",
            "study/__init__.py": "",
            "study/outcome.py": "",
            "tuner/__init__.py": "",
            "tuner/loop.py": "",
            "bench/__init__.py": "",
            "bench/client.py": "\n\nfrom kvtune.tuner import loop\n",
        },
    )
    lines = arrows.problems(root)
    assert lines == [
        "kvtune.bench.client:3 -> kvtune.tuner.loop: bench may not import tuner (docs/architecture.md, layers)"
    ]


def test_a_lazy_import_circle_is_a_circle(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "tuner/__init__.py": "",
            "tuner/loop.py": "from kvtune.tuner import confirmation\n",
            "tuner/confirmation.py": "def f():\n    from kvtune.tuner.loop import x\n",
        },
    )
    assert arrows.problems(root) == ["import circle: kvtune.tuner.confirmation <-> kvtune.tuner.loop"]


def test_type_checking_imports_are_not_arrows(tmp_path):
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "tuner/__init__.py": "",
            "tuner/loop.py": "from kvtune.tuner import confirmation\n",
            "tuner/confirmation.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from kvtune.tuner.loop import x\n",
        },
    )
    assert arrows.problems(root) == []


def test_every_package_is_on_a_layer():
    pkgs = {arrows.package_of(m) for m in arrows.arrows()[1]}
    assert {"study", "tuner", "artifacts", "cli", "bench"} <= pkgs
    assert all(arrows.layer_of(p) >= 0 for p in pkgs)  # layer_of raises KeyError for a stray one
