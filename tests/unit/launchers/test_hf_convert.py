"""The demo conversion runs as source in the vLLM Python, which may have no kvtune: hf_convert.py
must import nothing from kvtune, and nothing beyond the standard library at its top; hf_model
picks the interpreter (the flag's, else $KVTUNE_VLLM_PYTHON, else this one)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from kvtune.launchers import hf_convert
from kvtune.launchers.hf_model import converter_python


def test_the_conversion_script_stands_alone() -> None:
    tree = ast.parse(Path(hf_convert.__file__).read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name.split(".")[0] for n in top if isinstance(n, ast.Import) for a in n.names}
    names |= {(n.module or "").split(".")[0] for n in top if isinstance(n, ast.ImportFrom)}
    assert names and names <= set(sys.stdlib_module_names) | {"__future__"}, names
    everywhere = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert not [n for n in everywhere if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("kvtune")]
    assert not [a for n in everywhere if isinstance(n, ast.Import) for a in n.names if a.name.startswith("kvtune")]


def test_the_converting_python_is_the_flag_then_the_vllm_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rest of the order (this interpreter, the CPU venv beside it) depends on what is
    installed where, so it is tested with those facts injected, in test_vllm_python.py."""
    monkeypatch.setenv("KVTUNE_VLLM_PYTHON", "/venv-vllm/bin/python")
    assert converter_python("/given/python") == "/given/python"
    assert converter_python() == "/venv-vllm/bin/python"
