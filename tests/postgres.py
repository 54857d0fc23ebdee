"""A real PostgreSQL server a test owns, so it may stop and start it (tests/conftest.py's
`postgres_url` is shared by the session and never restarted). Debian's postgresql package:
initdb/pg_ctl from /usr/lib/postgresql/*/bin; as root, the server runs as the postgres user."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from kvtune.launchers.process import free_port


class PostgresServer:
    """initdb'd in a fresh folder on a free port; `start`, `stop` (fast: connections are
    terminated, as an operator's restart does), `remove`. `url`: its database `kvtune`."""

    def __init__(self) -> None:
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        if not bins:
            pytest.skip("PostgreSQL is not installed (Debian package postgresql)")
        self.bin = Path(bins[-1])
        self.base = Path(tempfile.mkdtemp(prefix="kvtune-pg-"))  # outside pytest's 0700 tmp tree
        self.data = self.base / "data"
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root
            if shutil.which("runuser") is None:
                pytest.skip("running as root without runuser")
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.base, "postgres")
        self.port = free_port()
        self._pg("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres")
        self.start()
        subprocess.run(
            [str(self.bin / "createdb"), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "kvtune"],
            check=True,
            capture_output=True,
        )
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/kvtune"

    def _pg(self, tool: str, *args: str) -> None:
        subprocess.run([*self.as_user, str(self.bin / tool), *args], check=True, capture_output=True)

    def start(self) -> None:
        opts = f"-h 127.0.0.1 -p {self.port} -k {self.data}"
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.data / "server.log"), "-w", "-o", opts, "start")

    def stop(self) -> None:
        self._pg("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        subprocess.run(
            [*self.as_user, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "stop"], capture_output=True
        )
        shutil.rmtree(self.base, ignore_errors=True)
