"""What a scheduler needs to place a study's workers, whichever scheduler it is.

The study already lives in shared storage with its spec (`kvtune run --setup-only`), so each
worker needs only the study name and the storage URL, and the URL (it holds the database
password) reaches it as the environment variable KVTUNE_STORAGE, never on a command line: from a
Secret on Kubernetes, from a file only its owner can read on Slurm. The scheduler starts N copies
of one `kvtune worker` command line and gives each the CPUs, memory and GPUs a trial needs. The
worker pins nothing itself under a scheduler: it runs its servers on what the scheduler granted
and takes its array index only as its name and sampler seed.

Every value that lands in a job file is checked here first, so a typo is a one-line `SpecError`
at export time, not a job the scheduler refuses (or, worse, runs wrongly) hours later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kvtune.errors import SpecError

CLUSTER_FORMATS = ("slurm", "k8s-job")
STORAGE_ENV = "KVTUNE_STORAGE"
# A scheduler's job name: DNS-1123 for Kubernetes, and a safe file name for Slurm's logs.
_NAME_UNSAFE = re.compile(r"[^a-z0-9-]+")
# Flags export-workers sets on every worker itself: one given again through --worker-arg would
# contradict it (the storage URL, worse, would land on the command line).
RESERVED_WORKER_FLAGS = ("--storage", "--study", "--runs-dir", "--gpus-per-trial", "--slot", "--slots")
# Sizes in binary units, as Slurm reads --mem (64G = 64 GiB) and Kubernetes writes them (64Gi).
_SIZE = re.compile(r"^([0-9]+)\s*([MGT])(?:i|iB|B)?$", re.IGNORECASE)
_MIB_PER = {"M": 1, "G": 1024, "T": 1024 * 1024}
SIZE_FORMS = "a whole number of M, G or T (binary units, as Slurm reads them), e.g. 64G or 512M"
#: The most a count of export-workers may be: past these no scheduler places it (10**30 workers
#: was written as `#SBATCH --array=0-999...`, 10**30 GPUs as a --gres). Workers: a Kubernetes
#: Indexed Job's most completions; GPUs and CPUs: past any one node; memory: 1 PiB.
MOST = {"--workers": 100_000, "--gpus-per-trial": 1024, "--cpus-per-worker": 100_000}
MOST_MEMORY_MIB = 1024**3


def parse_memory(text: str) -> int:
    """`64G` / `64Gi` / `512M` as MiB. A bare number is refused: Slurm would read it as MB and
    Kubernetes as bytes, so whichever the user meant, one of them would be wrong."""
    m = _SIZE.match(text.strip())
    mib = int(m.group(1)) * _MIB_PER[m.group(2).upper()] if m else 0
    if mib < 1:
        raise SpecError(f"--mem must be {SIZE_FORMS}, got {text!r}")
    if mib > MOST_MEMORY_MIB:
        raise SpecError(f"--mem must be at most 1024T (1 PiB per worker), got {text!r}")
    return mib


def slurm_memory(mib: int) -> str:
    """Slurm's --mem value (G when whole gibibytes, else M)."""
    return f"{mib // 1024}G" if mib % 1024 == 0 else f"{mib}M"


def k8s_memory(mib: int) -> str:
    """A Kubernetes quantity in the same binary unit (Gi / Mi)."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def check_plain(flag: str, value: str | None) -> None:
    """A value that goes into a job file as one word: no blanks, quotes or control characters
    (a newline in an #SBATCH line would start a shell command)."""
    if value is not None and (not value or re.search(r"[\s\"'`$\\#;]|[^\x20-\x7e]", value)):
        raise SpecError(f"{flag} must be one word without blanks, quotes or shell characters, got {value!r}")


@dataclass(frozen=True)
class WorkerJob:
    """One study's workers as a scheduler job. `command` is what starts one worker (default the
    kvtune beside this Python, which must exist at the same path on the nodes, e.g. a venv on a
    shared file system); `worker_args` are extra `kvtune worker` flags (--llama-server PATH).
    `cpus` and `memory_mib` are what one worker (one trial: its server and its load client)
    gets; the renderers refuse a job without them."""

    study: str
    workers: int
    gpus_per_trial: int = 0
    cpus: int | None = None
    memory_mib: int | None = None
    command: tuple[str, ...] = ("kvtune", "worker")
    worker_args: tuple[str, ...] = ()
    runs_dir: str | None = None
    # Slurm
    partition: str | None = None
    time_limit: str | None = None
    env_file: str | None = None  # the 0600 file holding KVTUNE_STORAGE that the script sources
    # Kubernetes
    image: str | None = None
    namespace: str = "default"
    storage_secret: str = "kvtune-storage"
    storage_secret_key: str = "url"
    model_pvc: str | None = None
    model_mount: str | None = None
    runs_pvc: str | None = None
    labels: dict[str, str] = field(default_factory=dict)

    def validate(self) -> "WorkerJob":
        """The checks both schedulers share; each renderer adds its own."""
        if not self.study or re.search(r"[\x00-\x1f\x7f]", self.study):
            raise SpecError(f"--study must be a study name on one line, got {self.study!r}")
        if self.workers < 1:
            raise SpecError(f"--workers must be at least 1, got {self.workers}")
        if self.gpus_per_trial < 0:
            raise SpecError(f"--gpus-per-trial must be 0 or more, got {self.gpus_per_trial}")
        for flag, value in (
            ("--workers", self.workers),
            ("--gpus-per-trial", self.gpus_per_trial),
            ("--cpus-per-worker", self.cpus),
        ):
            if value is not None and value > MOST[flag]:
                shown = str(value) if value < 10**18 else f"{value:.3g}"
                raise SpecError(f"{flag} must be at most {MOST[flag]}, got {shown}")
        if not self.command:
            raise SpecError("--worker-command must name a program")
        if self.cpus is None:
            raise SpecError(
                "--cpus-per-worker is needed: the CPUs one trial uses (its server's threads and the load "
                "client); the study's space does not say"
            )
        if self.cpus < 1:
            raise SpecError(f"--cpus-per-worker must be at least 1, got {self.cpus}")
        if self.memory_mib is None:
            raise SpecError(f"--mem is needed: the memory one worker's server gets, {SIZE_FORMS}")
        if self.memory_mib < 1:
            raise SpecError(f"--mem must be {SIZE_FORMS}, got {self.memory_mib} MiB")
        for arg in self.worker_args:
            flag = arg.split("=", 1)[0]
            if flag in RESERVED_WORKER_FLAGS:
                raise SpecError(
                    f"--worker-arg {arg!r}: export-workers sets {flag} itself"
                    + (
                        f" (the URL reaches workers as {STORAGE_ENV}, never on a command line)"
                        if flag == "--storage"
                        else ""
                    )
                )
        if self.runs_dir is not None and (not self.runs_dir or re.search(r"[\x00-\x1f]", self.runs_dir)):
            raise SpecError(f"--runs-dir must be a folder path, got {self.runs_dir!r}")
        return self

    @property
    def job_name(self) -> str:
        """`kvtune-<study>` made safe for both schedulers (lower case, digits, dashes)."""
        safe = _NAME_UNSAFE.sub("-", self.study.lower()).strip("-") or "study"
        return f"kvtune-{safe}"[:52].rstrip("-")

    def worker_argv(self, runs_dir: str) -> list[str]:
        """One worker's command line. No storage URL: the worker reads it from KVTUNE_STORAGE."""
        return [
            *self.command,
            "--study",
            self.study,
            *(["--gpus-per-trial", str(self.gpus_per_trial)] if self.gpus_per_trial else []),
            "--runs-dir",
            runs_dir,
            *self.worker_args,
        ]


_THREADS = re.compile(r"^threads (?:in \[([^\]]*)\]|= (\d+)$)")


def space_cpus(space: list[str]) -> int | None:
    """The CPUs a study's trials need, read from its stored space (`Knob.describe()` lines):
    the most threads any trial may ask its server for. None when the space has no threads knob
    (a vLLM study): the user must say."""
    for line in space:
        m = _THREADS.match(line)
        counts = [int(n) for n in re.findall(r"\d+", m.group(1) or m.group(2))] if m else []
        if counts:
            return max(1, *counts)
    return None
