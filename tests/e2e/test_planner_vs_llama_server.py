"""The planner's KV bytes match what a real llama-server allocates for the demo model.

Starts llama-server on the demo GGUF with a few --ctx-size/--parallel/cache-type combinations,
reads its `llama_kv_cache: size = ... MiB (N cells, L layers, S/S seqs), K (t): ... MiB, V (t):
... MiB` log line (printed at log verbosity 4), stops the server by its PID, and compares.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time

import pytest

from kvtune.errors import KvtuneError
from kvtune.planner import kv_bytes_per_sequence, llama_server_kv_tokens, slot_context

pytestmark = pytest.mark.e2e
MiB = 2**20
KV_LINE = re.compile(
    r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\), "
    r"K \((\w+)\):\s*([\d.]+) MiB, V \((\w+)\):\s*([\d.]+) MiB"
)


@pytest.fixture(scope="module")
def server_and_shape():
    from kvtune.launchers.llama_server import find_llama_server
    from kvtune.launchers.models import demo_model_path
    from kvtune.planner.shape import shape_from_gguf

    try:
        binary, model = find_llama_server(), demo_model_path()
    except KvtuneError as e:
        pytest.skip(f"no llama-server or demo model: {e}")
    pytest.importorskip("gguf")
    return binary, model, shape_from_gguf(model)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _kv_log_line(binary, model, log_path, ctx, parallel, k, v, fa) -> str:
    argv = [
        binary,
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(_free_port()),
        "--ctx-size",
        str(ctx),
        "--parallel",
        str(parallel),
        "--cache-type-k",
        k,
        "--cache-type-v",
        v,
        "--flash-attn",
        fa,
        "--threads",
        "1",
        "--log-verbosity",
        "4",
    ]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            text = log_path.read_text(errors="replace")
            m = KV_LINE.search(text)
            if m or proc.poll() is not None:
                break
            time.sleep(0.2)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # the group this test started
                proc.wait()
    text = log_path.read_text(errors="replace")
    m = KV_LINE.search(text)
    if not m:
        tail = "\n".join(text.splitlines()[-15:])
        pytest.fail(f"no KV cache size line from llama-server (rc {proc.returncode}):\n{tail}")
    return m


@pytest.mark.parametrize(
    "ctx,parallel,k,v,fa",
    [
        (4096, 2, "f16", "f16", "auto"),
        (4096, 2, "q8_0", "q8_0", "on"),
        (4096, 2, "q4_0", "q4_0", "on"),
        (4096, 1, "q8_0", "f16", "on"),
        (5000, 3, "f16", "f16", "auto"),  # llama.cpp pads each slot to 1792 cells
    ],
)
def test_predicted_kv_bytes_match_llama_server(server_and_shape, tmp_path, ctx, parallel, k, v, fa):
    binary, model, shape = server_and_shape
    m = _kv_log_line(binary, model, tmp_path / "server.log", ctx, parallel, k, v, fa)
    total_mib, cells, layers, seqs = float(m[1]), int(m[2]), int(m[3]), int(m[5])
    k_type, k_mib, v_type, v_mib = m[6], float(m[7]), m[8], float(m[9])
    assert (k_type, v_type, layers, seqs) == (k, v, shape.layers, parallel)
    assert cells == slot_context(ctx, parallel, pad=True)
    tokens = llama_server_kv_tokens(ctx, parallel)
    predicted = kv_bytes_per_sequence(shape, tokens, (k, v))
    assert predicted == pytest.approx(total_mib * MiB, rel=0.01)
    assert kv_bytes_per_sequence(shape, tokens, (k, k)) / 2 == pytest.approx(k_mib * MiB, rel=0.01)
    assert kv_bytes_per_sequence(shape, tokens, (v, v)) / 2 == pytest.approx(v_mib * MiB, rel=0.01)
