"""The import layering of docs/architecture.md, checked: `python -m kvtune.devtools.arrows`.

Every import in src/kvtune (at the top of a module or inside a function: a lazy import is still
an arrow) is read with `ast` and checked against two rules:

1. No import circle between modules (a strongly connected component of more than one module).
2. Arrows point down the layers below: a module may import its own package and any package on a
   lower layer, never one on its own layer or above. `ALLOWED_SIDEWAYS` names the few arrows
   between packages of one layer that are by design, each with its reason.

Exit status 0 when both hold, 1 with one line per offending arrow otherwise. The unit test
tests/unit/devtools/test_arrows.py runs the same check, so CI keeps it true.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

# Lowest first. A "package" is the first component under kvtune (a top-level module counts as its
# own package). Nothing may import upward or sideways except ALLOWED_SIDEWAYS.
LAYERS: tuple[tuple[str, ...], ...] = (
    # leaves: plain data, parsing of plain values, the process/NVML/GGUF boundaries
    ("kinds", "errors", "jsonsafe", "clock", "setting", "__init__"),
    # what kvtune may read (a regular file, not a pipe or a device) and its environment's numbers
    ("readable", "env_settings"),
    ("durations", "commands", "gguf_file", "nvml", "writable", "knobs"),
    ("workload",),
    # pure domain: load generation, objectives, the KV planner
    ("objectives", "planner", "bench"),
    # the verdict: pure statistics over measurements (what to measure next, the decision)
    ("verdict",),
    # host facts (read NVML, /proc, the planner's GPU tables) and meters
    ("hardware", "energy"),
    # is the machine busy with something else: reads /proc, NVML and the host facts above
    ("interference",),
    ("launchers",),
    # the study record: read by the tuner and by artifacts alike
    ("study",),
    ("tuner", "artifacts"),
    ("testing",),
    ("cli", "devtools"),
)

# (importer package, imported package): why it is allowed.
ALLOWED_SIDEWAYS: dict[tuple[str, str], str] = {
    ("bench", "objectives"): "the client's early stop asks objectives whether a target can still hold",
    ("planner", "objectives"): "none today; kept open for SLO-aware plans",
    ("energy", "hardware"): "meters read the host facts",
}


@dataclass(frozen=True)
class Arrow:
    importer: str  # dotted module, e.g. kvtune.tuner.loop
    imported: str  # dotted module
    line: int

    def __str__(self) -> str:
        return f"{self.importer}:{self.line} -> {self.imported}"


def package_root() -> Path:
    return Path(__file__).resolve().parent.parent


def module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = importer.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def arrows(root: Path | None = None) -> tuple[list[Arrow], set[str]]:
    """Every kvtune -> kvtune import (module level and lazy), and the set of modules."""
    root = root or package_root()
    modules = {module_name(p, root): p for p in root.rglob("*.py")}
    found: list[Arrow] = []
    for name, path in sorted(modules.items()):
        tree = ast.parse(path.read_text(), str(path))
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(node, name, is_pkg)
                # `from kvtune.x import y`: y is a module when kvtune.x.y is one
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for t in targets:
                if t.startswith("kvtune") and t != name and _in_type_checking(tree, node) is False:
                    found.append(Arrow(name, _nearest_module(t, modules), getattr(node, "lineno", 0)))
    return found, set(modules)


def _in_type_checking(tree: ast.Module, target: ast.AST) -> bool:
    """Imports under `if TYPE_CHECKING:` are annotations only: no arrow at run time."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            if any(child is target for child in ast.walk(node)):
                return True
    return False


def _nearest_module(name: str, modules: dict[str, Path] | set[str]) -> str:
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def layer_of(package: str) -> int:
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise KeyError(f"package {package!r} is not in devtools/arrows.py LAYERS: add it to a layer")


def against_layers(found: list[Arrow]) -> list[str]:
    bad = []
    for a in found:
        src, dst = package_of(a.importer), package_of(a.imported)
        if src == dst or (src, dst) in ALLOWED_SIDEWAYS:
            continue
        if layer_of(dst) >= layer_of(src):
            bad.append(f"{a}: {src} may not import {dst} (docs/architecture.md, layers)")
    return bad


def circles(found: list[Arrow], modules: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for a in found:
        graph.setdefault(a.importer, set()).add(a.imported)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def problems(root: Path | None = None) -> list[str]:
    found, modules = arrows(root)
    lines = against_layers(found)
    for comp in circles(found, modules):
        lines.append("import circle: " + " <-> ".join(comp))
    return lines


def main() -> int:
    lines = problems()
    for line in lines:
        print(line)
    if not lines:
        print("arrows: no import circle, every arrow points down the layers")
    return 1 if lines else 0


if __name__ == "__main__":
    raise SystemExit(main())
