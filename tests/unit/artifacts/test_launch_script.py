"""The launch script: exact argv, every argument quoted, exec, executable, header.

The tests here start no process; those that do are in tests/integration/artifacts/test_launch_script.py."""

import os

from kvtune.artifacts import launch_script
from kvtune.knobs import Candidate
from kvtune.launchers.llama_server import LlamaServerLauncher

NASTY = '/tmp/my models/it\'s "$(touch /tmp/pwned)"; rm -rf ~ `id`.gguf'


def test_script_argv_round_trips_nasty_paths(tmp_path):
    launcher = LlamaServerLauncher(binary="/opt/llama server/llama-server", model_path=NASTY)
    c = Candidate(flags={"parallel": 4, "ctx-per-slot": 1024, "cont-batching": True}, env={"WEIRD": "a b;$(x)"})
    argv = launcher.command(c, 8080)
    path = launch_script.write(tmp_path / "launch.sh", argv, launcher.environment(c), ["study: s"])
    text = path.read_text()
    assert launch_script.parse_exec_argv(text) == argv
    assert os.access(path, os.X_OK)
    assert text.startswith("#!/usr/bin/env bash\n") and "# study: s" in text
