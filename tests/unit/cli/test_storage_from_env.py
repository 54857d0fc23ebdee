"""The storage URL holds the database password, and a command line is readable by every user of
the host (/proc/PID/cmdline, ps): every command that takes `--storage` reads KVTUNE_STORAGE when
the flag is not given, and no program kvtune starts that is not kvtune (a server, a helper
command) inherits it. Read from click's parser and the environment a server would get; nothing
is run (tests/integration/tuner/fleet/test_no_password_in_argv.py inspects real processes)."""

from __future__ import annotations

import pytest
import typer

from kvtune import cli
from kvtune.commands import STORAGE_ENV, child_environment
from kvtune.launchers.process import ServerProcess

URL = "postgresql://kvtune:s3cret@db-host:5432/kvtune"


def parsed(command: str, *args: str) -> dict:
    """What `kvtune COMMAND ARGS` parses (click's parser, nothing run)."""
    click_command = typer.main.get_command(cli.app).commands[command]
    return click_command.make_context(command, list(args)).params


@pytest.mark.parametrize(
    "command, args",
    [
        ("proxy", ()),
        ("run", ()),
        ("worker", ("--study", "s")),
        ("confirm", ("--study", "s")),
        ("show", ("s",)),
        ("report", ("s",)),
        ("export", ("s",)),
        ("export-workers", ("--format", "slurm", "--study", "s", "--workers", "2")),
    ],
)
def test_every_command_that_takes_a_storage_reads_it_from_kvtune_storage(monkeypatch, command, args):
    monkeypatch.setenv(STORAGE_ENV, URL)
    assert parsed(command, *args)["storage"] == URL
    monkeypatch.delenv(STORAGE_ENV)
    if command in ("run", "show", "report", "export"):  # optional there: without either, none
        assert parsed(command, *args)["storage"] is None


def test_a_storage_flag_given_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv(STORAGE_ENV, URL)
    assert parsed("show", "s", "--storage", "sqlite:///other.db")["storage"] == "sqlite:///other.db"


def test_a_server_never_inherits_the_storage_url():
    env = {"PATH": "/bin", STORAGE_ENV: URL, "HOME": "/root"}
    child = child_environment(env, {"LLAMA_ARG_THREADS": "2"})
    assert child == {"PATH": "/bin", "HOME": "/root", "LLAMA_ARG_THREADS": "2"}
    assert STORAGE_ENV not in child_environment(env, {STORAGE_ENV: URL})  # not even when a launcher passes it


def test_the_server_process_gets_the_launchers_environment_less_the_storage_url(monkeypatch, tmp_path):
    monkeypatch.setenv(STORAGE_ENV, URL)
    monkeypatch.setenv("KVTUNE_KEEP_ME", "1")
    server = ServerProcess(argv=["llama-server"], env={"LLAMA_ARG_N_GPU_LAYERS": "0"}, log_path=tmp_path / "l", port=1)
    env = server.environment()
    assert STORAGE_ENV not in env and URL not in env.values()
    assert env["LLAMA_ARG_N_GPU_LAYERS"] == "0" and env["KVTUNE_KEEP_ME"] == "1"
