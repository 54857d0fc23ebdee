"""Every export format carries exactly the winning argv: parsed back with each format's own rules.

bash through the launch script's parser (and bash itself), systemd through a parser of systemd's
quoting (plus `systemd-analyze verify` where it exists), compose and Kubernetes through a YAML
parser plus structural schema checks. Only --host/--port change, and inside containers the model
path (mounted read-only at /models); a model path full of shell syntax arrives byte-identical.

Here the tests that start processes; the rest are in tests/unit/artifacts/test_export.py.
"""

import copy
import json
import os
import re
import shutil
import subprocess

import pytest

from kvtune.artifacts import export, launch_script
from kvtune.artifacts import overview as ov
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
NASTY = '/tmp/my models/it\'s "$(touch /tmp/pwned)"; rm -rf ~ `id` 100%h \\x $HOME ${PATH}.gguf'
NASTY_ENV = {"WEIRD": "a b;$(x) \"q\" 's' %h \\ $HOME\tnext\nline", "LLAMA_ARG_N": "1"}
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def results() -> dict:
    return json.loads((DATA / "results_small.json").read_text())


def best() -> dict:
    return ov.pick_trial(results()).to_dict()


def nasty_trial(binary: str = "/opt/llama server/bin/llama-server") -> dict:
    t = copy.deepcopy(best())
    argv = list(t["argv"])
    argv[0] = binary
    argv[argv.index("--model") + 1] = NASTY
    t["argv"], t["env"] = argv, dict(NASTY_ENV)
    return t


# ---- bash ------------------------------------------------------------------------------------
def test_bash_carries_the_exact_argv_and_runs(tmp_path):
    printer = tmp_path / "print args"
    printer.write_text(
        "#!/usr/bin/env python3\nimport json, os, sys\n"
        "print(json.dumps({'argv': sys.argv[1:], 'weird': os.environ.get('WEIRD')}))\n"
    )
    printer.chmod(0o755)
    t = nasty_trial(str(printer))
    path = export.write(tmp_path / "launch.sh", "bash", t, results(), "0.0.0.0", 9000)
    text = path.read_text()
    want = export.deploy_argv(t["argv"], "0.0.0.0", 9000)
    assert launch_script.parse_exec_argv(text) == want
    assert os.access(path, os.X_OK) and "# study: s2, trial 3" in text
    got = json.loads(subprocess.run(["bash", str(path)], capture_output=True, text=True, check=True).stdout)
    assert got == {"argv": want[1:], "weird": NASTY_ENV["WEIRD"]}
    assert not os.path.exists("/tmp/pwned")


# ---- systemd ---------------------------------------------------------------------------------
_C_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze not installed")
def test_systemd_analyze_verify_accepts_the_unit(tmp_path):
    bindir = tmp_path / "bin dir"
    bindir.mkdir()
    exe = bindir / "llama-server"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    unit = tmp_path / "kvtune-test.service"
    unit.write_text(export.render("systemd", nasty_trial(str(exe)), results(), "0.0.0.0", 9000))
    proc = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True)
    complaints = [ln for ln in (proc.stdout + proc.stderr).splitlines() if unit.name in ln]
    assert proc.returncode == 0 and not complaints, proc.stdout + proc.stderr


# ---- docker compose --------------------------------------------------------------------------
SERVICE_KEYS = {"image", "entrypoint", "command", "ports", "environment", "volumes", "restart", "ipc", "deploy"}


# ---- GPUs: the trial's slot, from recorded NVML answers ------------------------------------------
NVML = DATA / "nvml"


INJECTED_CPU = "Injected Test CPU 9000"  # not any machine's name, so the assertion cannot pass vacuously
