"""A real single-node Slurm for the e2e tests: munged, slurmctld and slurmd (Debian's slurm-wlm
and munge packages), each started here in the foreground as a child this process ends by PID.

Everything lives in one temporary folder: a generated munge key, slurm.conf, the state and spool
folders, the logs. sbatch, squeue and scancel find this cluster through SLURM_CONF (see `env`).

What works in a container without systemd or a writable cgroup tree: proctrack/linuxproc (a job's
processes are found through /proc parent links), TaskPlugin=task/affinity (each task bound to the
CPUs it was granted with sched_setaffinity, as a production cluster's task/affinity or
task/cgroup binds them; no cgroup.conf), no accounting, SlurmUser=root. The node has the CPUs
this process may run on, so a binding names CPUs that exist; it is given more memory than a
test asks for (SlurmdParameters=config_overrides: Slurm's default RealMemory is 1 MB).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from kvtune.launchers.process import free_port

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol")
# The CPUs this process may run on: task/affinity binds each task to some of them.
NODE_CPUS = len(os.sched_getaffinity(0))
# What the node says it has, whatever the machine has (config_overrides): sbatch refuses a
# job whose --mem exceeds it (Slurm's default RealMemory is 1 MB). Not consumable (CR_Core).
NODE_MEMORY_MB = 8192


def missing_programs() -> list[str]:
    """The Slurm and munge programs not installed here (Debian packages slurm-wlm and munge)."""
    found = {p: shutil.which(p) or shutil.which(p, path="/usr/sbin:/sbin") for p in PROGRAMS}
    return [p for p, where in found.items() if where is None]


def _program(name: str) -> str:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin") or name


def slurm_conf(base: Path, node: str, ctld_port: int, slurmd_port: int) -> str:
    """The smallest slurm.conf that runs batch jobs on this one node, everything under `base`."""
    return "\n".join(
        [
            "ClusterName=kvtune-test",
            f"SlurmctldHost={node}(127.0.0.1)",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            f"AuthInfo=socket={base / 'munge.socket'}",
            "MpiDefault=none",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/affinity",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=sched_interval=1",
            "AccountingStorageType=accounting_storage/none",
            "JobAcctGatherType=jobacct_gather/none",
            "JobCompType=jobcomp/none",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "KillWait=30",
            "MinJobAge=300",
            f"StateSaveLocation={base / 'state'}",
            f"SlurmdSpoolDir={base / 'spool'}",
            f"SlurmctldPidFile={base / 'slurmctld.pid'}",
            f"SlurmdPidFile={base / 'slurmd.pid'}",
            f"SlurmctldLogFile={base / 'slurmctld.log'}",
            f"SlurmdLogFile={base / 'slurmd.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            f"NodeName={node} NodeAddr=127.0.0.1 CPUs={NODE_CPUS} RealMemory={NODE_MEMORY_MB} State=UNKNOWN",
            "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


@dataclass
class SlurmCluster:
    """munged + slurmctld + slurmd under `base`; `env` points Slurm's commands at them."""

    base: Path
    node: str = field(default_factory=lambda: socket.gethostname().split(".")[0])
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.base / "slurm.conf")}

    def start(self, timeout_s: float = 60) -> None:
        """Write the key and the config, start the three daemons, wait until the node is idle."""
        for sub in ("state", "spool"):
            (self.base / sub).mkdir(mode=0o700)
        key = self.base / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        ctld_port = free_port()
        slurmd_port = free_port()
        while slurmd_port == ctld_port:  # each call frees its port: the OS may hand it out twice
            slurmd_port = free_port()
        conf = slurm_conf(self.base, self.node, ctld_port, slurmd_port)
        (self.base / "slurm.conf").write_text(conf)
        self._daemon(
            [
                _program("munged"),
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={self.base / 'munge.socket'}",
                f"--pid-file={self.base / 'munged.pid'}",
                f"--log-file={self.base / 'munged.log'}",
                f"--seed-file={self.base / 'munged.seed'}",
            ],
            "munged.out",
        )
        self._wait(lambda: (self.base / "munge.socket").exists(), timeout_s, "munged")
        self._daemon([_program("slurmctld"), "-D", "-i", "-f", str(self.base / "slurm.conf")], "slurmctld.out")
        self._daemon([_program("slurmd"), "-D", "-N", self.node, "-f", str(self.base / "slurm.conf")], "slurmd.out")
        self._wait(self._node_idle, timeout_s, "the Slurm node")

    def _daemon(self, argv: list[str], out: str) -> None:
        with open(self.base / out, "ab") as log:
            self.procs.append(
                subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    start_new_session=True,  # its own group: ended with everything it forked
                )
            )

    def _node_idle(self) -> bool:
        out = self.command("sinfo", "-h", "-N", "-o", "%T", check=False)
        return out.strip().lower().startswith("idle")

    def _wait(self, ready, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for p in self.procs:
                if p.poll() is not None:
                    raise RuntimeError(f"{p.args[0]} exited with {p.returncode}: {self.logs()}")
            if ready():
                return
            time.sleep(0.5)
        raise RuntimeError(f"{what} not ready after {timeout_s:.0f} s: {self.logs()}")

    def command(self, *argv: str, check: bool = True) -> str:
        """A Slurm client command (sbatch, squeue, scancel, sinfo) against this cluster."""
        done = subprocess.run([_program(argv[0]), *argv[1:]], capture_output=True, text=True, env=self.env, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
        return done.stdout

    def logs(self) -> str:
        """The last lines of each daemon's log (what a failure message shows)."""
        parts = []
        for name in ("munged.log", "slurmctld.log", "slurmd.log", "slurmctld.out", "slurmd.out"):
            path = self.base / name
            if path.exists():
                tail = path.read_text(errors="replace").splitlines()[-8:]
                parts.append(f"--- {name}\n" + "\n".join(tail))
        return "\n".join(parts)

    def stop(self) -> None:
        """End slurmd, slurmctld and munged (in that order) and every process they started."""
        for p in reversed(self.procs):
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        self.procs.clear()


def start_cluster() -> SlurmCluster:
    """A started cluster in a fresh temporary folder (outside pytest's tree: munged checks
    the permissions of every folder above its socket)."""
    cluster = SlurmCluster(Path(tempfile.mkdtemp(prefix="kvtune-slurm-")))
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster
