"""Choosing the search (tuner/samplers.py): names, the grid's finite space, per-worker seeds.

Here the tests that start processes; the rest are in tests/unit/tuner/search/test_samplers.py."""

import subprocess
import sys
from pathlib import Path

import pytest

import kvtune as kvtune_pkg
from kvtune.knobs import Knob

KNOBS = [
    Knob("parallel", "choices", choices=(1, 2, 4, 8)),
    Knob("threads", "int", low=1, high=4),
    Knob("flash-attn", "choices", choices=("on", "off")),
    Knob("ctx", "fixed", value=512),
]


def kvtune(*args, cwd):
    """The CLI of the kvtune under test (this checkout's, whatever is installed)."""
    src = str(Path(kvtune_pkg.__file__).resolve().parents[1])
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,  # a loaded 2-core machine: 30 s seen
        env={"PATH": "/usr/bin:/bin", "KVTUNE_CACHE": str(cwd / "cache"), "COLUMNS": "400", "PYTHONPATH": src},
    )


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--set", "sampler=nosuch"], "unknown sampler 'nosuch'"),
        (["--set", "sampler=grid", "--study-file", "wide.yaml"], "threads is a range of 64 values"),
        (["--set", "sampler=grid", "--workers", "2", "--target", "ttft<1s"], "use --workers 1"),
    ],
)
def test_cli_bad_sampler_is_one_line_exit_2_nothing_created(tmp_path, args, fragment):
    (tmp_path / "wide.yaml").write_text("space:\n  threads: {low: 1, high: 64}\n")
    r = kvtune("run", "--runs-dir", str(tmp_path / "runs"), *args, cwd=tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and fragment in lines[0], r.stderr
    assert not (tmp_path / "runs").exists()
