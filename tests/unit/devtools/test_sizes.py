"""The size limits hold (kvtune.devtools.sizes): modules under MODULE_LINES, functions in tuner/,
bench/ and cli/ under FUNCTION_LINES; a breach is reported with where and how long."""

from __future__ import annotations

from pathlib import Path

from kvtune.devtools import sizes


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "kvtune"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def _function(name: str, body_lines: int, indent: str = "") -> str:
    return f"{indent}def {name}():\n" + f"{indent}    x = 1\n" * body_lines


def test_the_package_is_within_its_limits():
    assert sizes.problems() == []


def test_a_long_function_in_tuner_is_reported_with_its_line_and_length(tmp_path):
    text = (
        "import os\n\n\n"
        + _function("fine", sizes.FUNCTION_LINES - 1)
        + "\n\n"
        + _function("too_long", sizes.FUNCTION_LINES)
    )
    root = _tree(tmp_path, {"tuner/loop.py": text})
    too_long_at = 3 + sizes.FUNCTION_LINES + 2 + 1  # after the import, `fine` and two blank lines
    assert sizes.problems(root) == [
        f"tuner/loop.py:{too_long_at} too_long: {sizes.FUNCTION_LINES + 1} lines, over "
        f"{sizes.FUNCTION_LINES} for a function in tuner/, bench/, cli/"
    ]


def test_methods_and_nested_functions_are_named_by_their_owner(tmp_path):
    text = (
        "class Loop:\n"
        + _function("run", 2, indent="    ")
        + "        "
        + _function("inner", sizes.FUNCTION_LINES + 5, indent="        ").lstrip()
    )
    root = _tree(tmp_path, {"bench/client.py": text})
    _, functions = sizes.measure(root)
    names = {f.where.split(" ", 1)[1]: f.lines for f in functions}
    assert names == {"Loop.run": 3 + sizes.FUNCTION_LINES + 6, "Loop.run.inner": sizes.FUNCTION_LINES + 6}
    assert [line.split(":")[0] for line in sizes.problems(root)] == ["bench/client.py"] * 2


def test_long_functions_outside_the_short_function_packages_are_not_limited(tmp_path):
    root = _tree(tmp_path, {"artifacts/report.py": _function("render", sizes.FUNCTION_LINES * 2)})
    assert sizes.problems(root) == []


def test_a_large_module_is_reported_unless_named_with_its_reason(tmp_path):
    big = "x = 1\n" * (sizes.MODULE_LINES + 1)
    exempt = {"launchers/table.py": "a table read whole"}  # a module exempted with its reason
    files = {"artifacts/big.py": big, "launchers/table.py": big, "artifacts/small.py": "x = 1\n" * sizes.MODULE_LINES}
    root = _tree(tmp_path, files)
    assert sizes.problems(root, exempt) == [
        f"artifacts/big.py: {sizes.MODULE_LINES + 1} lines, over {sizes.MODULE_LINES} "
        "(split it, or name it in LARGE_MODULES with the reason)"
    ]
    modules, _ = sizes.measure(root)
    assert [m.where for m in modules][-1] == "artifacts/small.py"  # largest first
