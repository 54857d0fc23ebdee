"""The size limits of the code style, checked: `python -m kvtune.devtools.sizes`.

Small modules and short functions are what keeps a change readable in one screen (issue 18:
the tuner grew 700-line modules and 150-line functions before it was split). Two rules:

1. No module in src/kvtune over `MODULE_LINES` lines, except the few named in `LARGE_MODULES`
   with the reason each is still whole.
2. No function in the packages of `SHORT_FUNCTION_PACKAGES` (tuner/, bench/: the loop and the
   measurement, where a long function hides a decision; cli/: a command is a thin shell over
   library code, its flags declared as a record, cli/flag_record.py) over `FUNCTION_LINES` lines, counted from
   its `def` to its last line (docstring included, decorators not).

Prints the largest modules and functions, then one line per breach; exit status 1 when there is
one. The unit test tests/unit/devtools/test_sizes.py runs the same check, so CI keeps it true.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

MODULE_LINES = 400
FUNCTION_LINES = 60
SHORT_FUNCTION_PACKAGES = ("tuner", "bench", "cli")
SHOW = 8  # how many of the largest modules and functions the report lists

# Module (path under src/kvtune) -> why it may stay over MODULE_LINES for now.
LARGE_MODULES: dict[str, str] = {
    "study/spec.py": "the StudySpec record declares each of its ~25 settings with its help (kvtune/setting.py): one field per setting, long by design",
}


@dataclass(frozen=True)
class Size:
    where: str  # "tuner/loop.py" or "tuner/loop.py:120 Tuner.run"
    lines: int

    def __str__(self) -> str:
        return f"{self.lines:5d}  {self.where}"


def package_root() -> Path:
    return Path(__file__).resolve().parent.parent


def _functions(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function and method with its qualified name (Class.method, outer.inner)."""
    found: list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((prefix + child.name, child))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def measure(root: Path | None = None) -> tuple[list[Size], list[Size]]:
    """(modules, functions of the short-function packages), each largest first."""
    root = root or package_root()
    modules: list[Size] = []
    functions: list[Size] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        text = path.read_text()
        modules.append(Size(rel, len(text.splitlines())))
        if rel.split("/", 1)[0] not in SHORT_FUNCTION_PACKAGES:
            continue
        for name, fn in _functions(ast.parse(text, str(path))):
            length = (fn.end_lineno or fn.lineno) - fn.lineno + 1
            functions.append(Size(f"{rel}:{fn.lineno} {name}", length))
    by_size = lambda s: (-s.lines, s.where)
    return sorted(modules, key=by_size), sorted(functions, key=by_size)


def problems(root: Path | None = None, exempt: dict[str, str] | None = None) -> list[str]:
    """What is over its limit, one line each. `exempt`: the modules allowed to be large
    (default LARGE_MODULES; a test names its own)."""
    modules, functions = measure(root)
    bad = [
        f"{m.where}: {m.lines} lines, over {MODULE_LINES} (split it, or name it in LARGE_MODULES with the reason)"
        for m in modules
        if m.lines > MODULE_LINES and m.where not in (LARGE_MODULES if exempt is None else exempt)
    ]
    bad += [
        f"{f.where}: {f.lines} lines, over {FUNCTION_LINES} for a function in {'/, '.join(SHORT_FUNCTION_PACKAGES)}/"
        for f in functions
        if f.lines > FUNCTION_LINES
    ]
    return bad


def main() -> int:
    modules, functions = measure()
    print(f"largest modules (limit {MODULE_LINES}):")
    print("\n".join(str(m) for m in modules[:SHOW]))
    print(f"largest functions in {', '.join(SHORT_FUNCTION_PACKAGES)} (limit {FUNCTION_LINES}):")
    print("\n".join(str(f) for f in functions[:SHOW]))
    lines = problems()
    for line in lines:
        print(line)
    if not lines:
        print("sizes: every module and function within its limit")
    return 1 if lines else 0


if __name__ == "__main__":
    raise SystemExit(main())
