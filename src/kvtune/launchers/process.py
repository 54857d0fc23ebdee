"""Starting and stopping a server process: the only subprocess code of the tuner.

Each server runs in its own process group (so stopping it also stops the children vLLM forks)
under a guard (`guard.py`) that has the kernel's parent-death signal set and takes the whole
group down when kvtune dies, even by SIGKILL. Readiness polls the health endpoint while checking
that the process we started is still alive: a crash (the process exited) and a timeout (alive but
not healthy: its log stopped making progress, or the start-up cap passed; see `startup.py`) are
different outcomes, and another server answering on the port is never mistaken for ours: the
port is checked free before launch, our process must be alive, and once health answers, the
listener must not be another process (`listeners.py`). A failure says whether it is `transient`
(the port was taken, the start-up timed out: nothing the config caused) or a verdict on the config.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import httpx

from kvtune.clock import REAL_CLOCK, Clock
from kvtune.commands import child_environment
from kvtune.kinds import FailureKind
from kvtune.launchers.listeners import other_listener
from kvtune.launchers.startup import DEFAULT_LIMITS, LogProgress, StartupLimits, give_up_reason

PR_SET_PDEATHSIG = 1
# Seconds between health polls while a server starts.
HEALTH_POLL_S = 0.25


class ServerStartError(Exception):
    """The server did not become ready. ``kind`` is START_FAILED (it exited), START_TIMEOUT
    (alive but not healthy: its log stalled, or the cap passed) or PORT_BUSY (something else has
    the port: before the launch, in the server's log as an address already in use, or answering
    in its place). ``transient``: the failure says nothing about the config (a port clash, a
    start-up that may only have been slow because the host was busy), so the caller may retry it
    on a fresh port."""

    def __init__(self, kind: FailureKind, reason: str, returncode: int | None = None, transient: bool = False):
        super().__init__(reason)
        self.kind = kind
        self.reason = reason
        self.returncode = returncode
        self.transient = transient


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS says is free now (bind to 0). The launch re-checks it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def die_with_parent() -> None:
    """Runs in the child before exec: SIGKILL this process when kvtune dies."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def _child_setup(cpus: set[int] | None) -> None:
    die_with_parent()
    if cpus:
        os.sched_setaffinity(0, cpus)


# A server that exited because its port was taken (llama-server: "couldn't bind HTTP server
# socket"; vLLM/uvicorn and Python servers: "[Errno 98] ... Address already in use").
# Narrow on purpose: "could not bind" alone also means thread-to-core binding in some logs.
_ADDRESS_IN_USE = re.compile(r"address already in use|EADDRINUSE|couldn't bind HTTP server socket", re.I)


def address_in_use(log_text: str) -> str | None:
    """The log line saying the server could not bind its port, or None."""
    return next((ln.strip()[:400] for ln in log_text.splitlines() if _ADDRESS_IN_USE.search(ln)), None)


_ERROR_LINE = re.compile(r"error|failed|invalid|unknown|cannot|exception|abort|fatal", re.I)


def last_error_line(log_text: str) -> str:
    """The log's last line that looks like an error, else its last non-empty line."""
    lines = [ln.strip() for ln in log_text.splitlines() if ln.strip()]
    for ln in reversed(lines):
        if _ERROR_LINE.search(ln):
            return ln[:400]
    return lines[-1][:400] if lines else "(empty log)"


@dataclass
class ServerProcess:
    """One running server. Use as a context manager so it is always stopped."""

    argv: list[str]
    env: dict[str, str]
    log_path: Path
    port: int
    host: str = "127.0.0.1"
    health_path: str = "/health"
    # Where the running server's PID/process group is recorded, so a later kvtune can stop a
    # server that a killed kvtune left behind (see `reap_leftovers`).
    pid_file: Path | None = None
    # CPUs the server may run on (a worker's device slot); None: no pinning.
    cpus: set[int] | None = None
    proc: subprocess.Popen | None = None
    # The clock the readiness wait reads and sleeps on (tests: a virtual one, so a start-up
    # timeout is reached at once and exactly).
    clock: Clock = REAL_CLOCK
    # The health client's transport (tests: an httpx.MockTransport); None: the network.
    health_transport: httpx.BaseTransport | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def environment(self) -> dict[str, str]:
        """The server's environment: kvtune's, with the launcher's `env` over it, less kvtune's
        secrets (commands.py `child_environment`: the storage URL is no server's business)."""
        return child_environment(os.environ, self.env)

    def start(self) -> "ServerProcess":
        if port_in_use(self.port, self.host):
            raise ServerStartError(
                FailureKind.PORT_BUSY, f"port {self.port} is already in use on {self.host}", transient=True
            )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")  # noqa: SIM115 (handed to Popen, closed below)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "kvtune.launchers.guard", "--", *self.argv],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.environment(),
                start_new_session=True,
                preexec_fn=lambda: _child_setup(self.cpus),
            )
        except OSError as e:
            log.close()
            raise ServerStartError(FailureKind.START_FAILED, f"cannot execute {self.argv[0]}: {e}") from e
        log.close()
        if self.pid_file is not None:
            record = {
                "pid": self.proc.pid,
                "pgid": self.proc.pid,
                "argv0": self.argv[0],
                "start_ticks": process_start_ticks(self.proc.pid),
                "owner_pid": os.getpid(),
                "owner_start_ticks": process_start_ticks(os.getpid()),
            }
            tmp = self.pid_file.with_suffix(".tmp")
            tmp.write_text(json.dumps(record))
            tmp.replace(self.pid_file)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def exited_within(self, seconds: float) -> bool:
        """Has the server exited, waiting up to `seconds` for it (a crash takes a moment to
        reach the guard's exit)?"""
        if self.proc is None:
            return True
        try:
            self.proc.wait(timeout=seconds)
            return True
        except subprocess.TimeoutExpired:
            return False

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_ready(self, limits: StartupLimits | float = DEFAULT_LIMITS) -> float:
        """Poll health until 200; return seconds to ready. Raise ServerStartError otherwise: the
        process exited, or it gave up by `limits` (its log stalled, or the cap was reached; a
        bare number is a cap with no stall check)."""
        assert self.proc is not None
        if not isinstance(limits, StartupLimits):
            limits = StartupLimits(stall_s=None, cap_s=float(limits))
        clock = self.clock
        t0 = clock.monotonic()
        progress = LogProgress(self.log_path, clock)
        url = self.base_url + self.health_path
        with httpx.Client(timeout=2.0, transport=self.health_transport) as client:
            while True:
                rc = self.proc.poll()
                if rc is not None:
                    raise self._exited(rc)
                try:
                    if client.get(url).status_code == 200 and self.alive():
                        self._check_listener()
                        return clock.monotonic() - t0
                except httpx.HTTPError:
                    pass
                why = give_up_reason(limits, clock.monotonic() - t0, progress.silent_s(), self.log_text)
                if why is not None:
                    # transient: a busy host may only have been slow, worth one retry
                    raise ServerStartError(FailureKind.START_TIMEOUT, why, transient=True)
                clock.sleep(HEALTH_POLL_S)

    def _exited(self, rc: int) -> ServerStartError:
        """The error for a server that exited before it was ready: a port clash its log names, or
        a failed start with the log's last error line."""
        log = self.log_text()
        clash = address_in_use(log)
        if clash:
            return ServerStartError(
                FailureKind.PORT_BUSY,
                f"port {self.port} was taken (exited with status {rc}): {clash}",
                rc,
                transient=True,
            )
        return ServerStartError(FailureKind.START_FAILED, f"exited with status {rc}: {last_error_line(log)}", rc)

    def _check_listener(self) -> None:
        """Health answered: make sure it was our server, not another process on our port."""
        assert self.proc is not None
        other = other_listener(self.port, self.proc.pid)  # start_new_session: pid = group id
        if other is not None:
            raise ServerStartError(
                FailureKind.PORT_BUSY,
                f"port {self.port} is answered by another process, {other.describe()}, not the server started",
                transient=True,
            )

    def stop(self, grace_s: float = 10.0) -> int | None:
        """TERM the guard, which passes it on to the server once, then KILL the whole process
        group after `grace_s`. Returns the exit status.

        Why not TERM the group: the server would get the signal twice, from the group and again
        from the guard, and llama-server takes a second SIGTERM as "terminate immediately" (it
        exits from inside its signal handler): seen to abort, and once to hang until the KILL,
        10 s of a launch spent on nothing. The server stops its own children (vLLM's engine
        processes) on the one signal; the KILL of the group takes whatever outlives the grace."""
        if self.proc is None:
            return None
        pgid = self.proc.pid  # start_new_session: the leader's pid is the group id
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                pass
        # Children may outlive the leader; KILL whatever is left in the group.
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None
        if self.pid_file is not None:
            self.pid_file.unlink(missing_ok=True)
        return rc

    def __enter__(self) -> "ServerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def process_start_ticks(pid: int) -> int | None:
    """The process's start time (clock ticks since boot): tells a PID apart from a reused one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def reap_leftovers(pid_file: Path, clock: Clock = REAL_CLOCK) -> str | None:
    """Stop a server recorded in `pid_file` by an earlier kvtune that did not stop it (killed
    with SIGKILL, power loss of the parent only, ...). Only the recorded process group is
    signalled, and only if its leader is the same process (same start time), never by name.
    Returns a description of what was stopped, or None."""
    try:
        record = json.loads(pid_file.read_text())
    except (OSError, ValueError):
        return None
    pid, pgid = int(record.get("pid", 0)), int(record.get("pgid", 0))
    owner = record.get("owner_pid")
    if (
        owner
        and process_start_ticks(int(owner)) is not None
        and process_start_ticks(int(owner)) == record.get("owner_start_ticks")
    ):
        return None  # its kvtune worker is alive and owns it
    stopped = None
    if (
        pid > 0
        and pgid > 0
        and process_start_ticks(pid) is not None
        and process_start_ticks(pid) == record.get("start_ticks")
    ):
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break
            clock.sleep(1.0)
        stopped = f"stopped server pid {pid} ({record.get('argv0')}) left by an earlier run"
    pid_file.unlink(missing_ok=True)
    return stopped
