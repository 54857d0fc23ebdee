"""`kvtune run --backend llama-server --backend vllm` end to end on the demo model (GGUF for
llama-server, its HF folder for vLLM): three trials split 2 + 1, each backend its own study, one
after the other, then the side-by-side table and compare.json, and `kvtune compare` of the two
studies agrees with it. With no confirmation (SMALL's confirm_top 0) each best is its search's top,
measured once: the verdict's test has no fresh runs to compare, so both say "no winner" and why
(tests/integration/cli/test_multi.py has the winner named on fresh runs, with a fake server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import SMALL, kvtune

pytestmark = pytest.mark.usefixtures("vllm_importable")


def test_both_backends_in_one_run(tmp_path, llama_server):
    r = kvtune(
        "run",
        "--backend",
        "llama-server",
        "--backend",
        "vllm",
        "--trials",
        "3",
        "--target",
        "ttft<120s",
        "--study",
        "b",
        "--runs-dir",
        str(tmp_path),
        "--set",
        "llama_server=" + str(llama_server),
        "--progress",
        "plain",
        *SMALL,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    trials = {
        b: json.loads((tmp_path / f"b-{b}" / "results.json").read_text())["trials"] for b in ("llama-server", "vllm")
    }
    assert {b: len(t) for b, t in trials.items()} == {"llama-server": 2, "vllm": 1}
    model = {b: Path(t[0]["argv"][t[0]["argv"].index("--model") + 1]) for b, t in trials.items()}
    assert model["llama-server"].suffix == ".gguf"  # the same demo model in both forms
    assert (model["vllm"] / "config.json").is_file()
    compared = json.loads((tmp_path / "b" / "compare.json").read_text())
    assert compared["backends"] == ["llama-server", "vllm"]
    assert compared["best"]["study"] is None and compared["best"]["why"].startswith(
        "no winner: not measured the same way"
    )
    assert all(r["output_throughput"] for r in compared["rows"] if r["trial"] is not None)
    assert "Which backend?" in r.stdout and "No best overall" in r.stdout and compared["best"]["why"] in r.stdout
    again = kvtune("compare", "b-llama-server", "b-vllm", "--runs-dir", str(tmp_path), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "No best overall" in again.stdout and "no winner: not measured the same way" in again.stdout
