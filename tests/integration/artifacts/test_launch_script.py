"""The launch script: exact argv, every argument quoted, exec, executable, header.

Here the tests that start processes; the rest are in tests/unit/artifacts/test_launch_script.py."""

import os
import subprocess

from kvtune.artifacts import launch_script
from kvtune.knobs import Candidate
from kvtune.launchers.llama_server import LlamaServerLauncher

NASTY = '/tmp/my models/it\'s "$(touch /tmp/pwned)"; rm -rf ~ `id`.gguf'


def test_bash_passes_exactly_the_argv(tmp_path):
    """Run the script with bash, its exec target replaced by a program printing its argv."""
    printer = tmp_path / "printargs"
    printer.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        "print(json.dumps({'argv': sys.argv[1:], 'weird': os.environ.get('WEIRD')}))\n"
    )
    printer.chmod(0o755)
    launcher = LlamaServerLauncher(binary=str(printer), model_path=NASTY)
    c = Candidate(flags={"parallel": 2, "flash-attn": "on"}, env={"WEIRD": "a b;$(x)"})
    argv = launcher.command(c, 8080)
    path = launch_script.write(tmp_path / "launch.sh", argv, c.env, [])
    out = subprocess.run(["bash", str(path)], capture_output=True, text=True, check=True).stdout
    import json

    got = json.loads(out)
    assert got == {"argv": argv[1:], "weird": "a b;$(x)"}
    assert not os.path.exists("/tmp/pwned")
