"""`kvtune export-workers`: the scheduler file that places a set-up study's workers.

The study was created in shared storage by `kvtune run ... --storage URL --setup-only`; this
reads it back (its spec, its GPUs per trial, the threads its space tries) and writes an sbatch
job array (slurm) or a Kubernetes Indexed Job (k8s-job) of N `kvtune worker` processes. The
storage URL never goes into either file: Slurm's script sources it from an env file (mode 0600)
written beside it, Kubernetes pods read it from a Secret. Rendering lives in
artifacts/cluster/; this module gathers the options and the stored study, checks every option
before anything is written, and writes the files.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
import shlex
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from kvtune.artifacts.cluster.job import CLUSTER_FORMATS, WorkerJob, parse_memory, space_cpus
from kvtune.artifacts.cluster.k8s import render_k8s_job, secret_command
from kvtune.artifacts.cluster.slurm import render_env_file, render_slurm
from kvtune.cli.app import app, err_console, say_wait
from kvtune.cli.cluster_flags import ONLY_FOR, ExportFlags
from kvtune.cli.flag_names import flag_of
from kvtune.cli.flag_record import command_signature
from kvtune.cli.flag_values import plain_text
from kvtune.errors import SpecError
from kvtune.readable import special_kind
from kvtune.tuner.cluster_seam import PLACEMENT_ATTR, read_set_up
from kvtune.tuner.store import storage as fleet_storage


def default_command(format: str) -> tuple[str, ...]:
    """Slurm: the kvtune beside this Python (its venv's bin/), which the nodes must see at that
    path (a shared file system). Kubernetes: the image's `kvtune` on its PATH."""
    if format == "k8s-job":
        return ("kvtune", "worker")
    return (str(Path(sys.executable).parent / "kvtune"), "worker")


def refuse_other_formats_flags(f: ExportFlags) -> None:
    """A flag of the other format is refused, not ignored: the user meant it to do something."""
    for other, flags in ONLY_FOR.items():
        for name, flag in flags if other != f.format else ():
            if getattr(f, name) is not None:
                raise SpecError(f"{flag} is for --format {other}, not {f.format}: drop it")


#: `kvtune worker` flags that name a program on the workers' hosts.
WORKER_PATH_FLAGS = ("--llama-server", "--vllm-python")


def worker_flags() -> dict[str, bool]:
    """`kvtune worker`'s flags -> whether each takes a value, read from the command itself (a
    flag added to the worker is taken here as it is); --help is none of them: a worker that
    prints its help runs no trial."""
    import typer.main

    command = typer.main.get_command(app).commands["worker"]  # type: ignore[attr-defined]
    return {
        name: not getattr(p, "is_flag", False)
        for p in command.params
        if p.param_type_name == "option"
        for name in (*p.opts, *p.secondary_opts)
    }


def check_worker_args(args: Sequence[str], flags: Mapping[str, bool]) -> None:
    """The --worker-arg words as `kvtune worker` (its flags: `flags`) will read them: each a
    flag it takes, with a value when it takes one (`--flag=VALUE`, or the next --worker-arg)
    and none when it is a switch, and the path of --llama-server or --vllm-python not empty
    and on one line. Checked here, before the storage is read or anything written: each worker
    checks them only when it starts, so a mistake would write a job file whose every worker
    fails. The path itself is not looked up here: it names a program on the workers' hosts (a
    compute node, a container's image), which this host may lack at that path or have where
    they do not; export-workers checks the other paths the workers read (--runs-dir,
    --model-mount, the worker command) the same way, by their form, never on this disk."""
    words = list(args)
    while words:
        arg = words.pop(0)
        flag, eq, value = arg.partition("=")
        if not flag.startswith("-"):
            raise SpecError(f"--worker-arg {arg!r} is not a `kvtune worker` flag, nor the value of one before it")
        if flag == "--help":
            raise SpecError(f"--worker-arg {arg!r}: a worker given --help prints it and runs no trial")
        if flag not in flags:
            near = difflib.get_close_matches(flag, list(flags), n=1)
            raise SpecError(
                f"--worker-arg {arg!r}: `kvtune worker` takes no {flag}"
                + (f"; did you mean {near[0]}?" if near else "")
            )
        if not flags[flag]:
            if eq:
                raise SpecError(f"--worker-arg {arg!r}: {flag} is a switch, it takes no value")
            continue
        if not eq:
            if not words:
                raise SpecError(f"--worker-arg {arg!r}: {flag} needs a value, e.g. --worker-arg={flag}=VALUE")
            value = words.pop(0)
        if flag in WORKER_PATH_FLAGS and not value.strip():
            raise SpecError(
                f"--worker-arg {arg!r}: {flag} is empty: give its path on the workers' hosts, or leave it out"
            )
        if flag in WORKER_PATH_FLAGS and re.search(r"[\x00-\x1f]", value):
            raise SpecError(f"--worker-arg {arg!r}: {flag} must be a path on one line, got {value!r}")


def stored_cpus(study: str, url: str) -> tuple[int | None, int | None]:
    """(CPUs the set-up stored per trial, the most threads the study's space tries); None where
    the study does not say."""
    attrs = fleet_storage.load_study(study, url, read_only=True).user_attrs
    placed = (attrs.get(PLACEMENT_ATTR) or {}).get("cpus_per_trial")
    space = (attrs.get("identity") or {}).get("space") or []
    return (int(placed) if placed else None), space_cpus([str(k) for k in space])


def worker_cpus(given: int | None, study: str, url: str) -> int | None:
    """--cpus-per-worker, or what the study says one trial uses. Fewer CPUs than the space's
    threads would make its top configs meaningless (threads fighting over fewer cores)."""
    if given is not None and given < 1:
        raise SpecError(f"--cpus-per-worker must be at least 1, got {given}")
    placed, threads = stored_cpus(study, url)
    if given is None:
        return placed or threads
    if threads is not None and given < threads:
        raise SpecError(
            f"--cpus-per-worker {given} is fewer than the {threads} threads the study's space may give a server: "
            f"give at least {threads}, or set the study up for smaller workers"
        )
    return given


def check_writable(path: Path, what: str) -> None:
    """The file can be written where asked: its folder exists and it is not a folder itself."""
    if path.is_dir():
        raise SpecError(f"{what} {path} is a folder: name a file")
    kind = special_kind(path)  # /dev/null would be replaced by the env file's rename, chmod-ed by the script's
    if kind is not None:
        raise SpecError(f"{what} {path} is {kind}, not a file: name a file")
    if not path.parent.is_dir():
        raise SpecError(f"{what} {path}: folder {path.parent} does not exist")


def write_private(path: Path, text: str) -> None:
    """Write `text` readable by its owner alone (0600 from its first byte: a temporary file
    created with that mode, then renamed over the target)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode())
    finally:
        os.close(fd)
    os.replace(tmp, path)


def env_file_for(output: Path | None, given: Path | None, job_name: str) -> Path:
    """Where the Slurm script's storage URL goes: --env-file, else beside the script
    (FILE.env), else (the script printed) ./<job name>.env. Absolute: the job reads it from
    wherever Slurm starts it."""
    path = given or (output.with_name(output.name + ".env") if output else Path(f"{job_name}.env"))
    path = path.absolute()
    if output is not None and path == output.absolute():
        raise SpecError(f"--env-file {path} is the script itself: name another file")
    check_writable(path, "--env-file")
    return path


#: Flags of words written into the job file or naming a file to write: given blank, --runs-dir
#: and --env-file were a folder and a file named ' ', and a newline in --worker-command reached
#: the script as a command on two lines.
WORD_FLAGS: dict[str, str] = {
    "worker_command": "the program that starts one worker",
    "runs_dir": "the workers' runs folder",
    "env_file": "a file for the storage URL",
    "output": "a file to write",
}


def check_words(f: ExportFlags) -> None:
    """Each flag of `WORD_FLAGS` given: not blank, plain text (cli/flag_values.py)."""
    for name, what in WORD_FLAGS.items():
        value = getattr(f, name)
        if value is not None:
            plain_text(flag_of(ExportFlags, name), str(value), what)


def worker_job(f: ExportFlags) -> tuple[WorkerJob, str | None]:
    """The job the flags and the stored study describe (checked by its renderer), and the model
    path the study's set-up resolved. Every check that needs no storage comes first."""
    if f.format not in CLUSTER_FORMATS:
        raise SpecError(f"unknown --format {f.format!r}: use one of {', '.join(CLUSTER_FORMATS)}")
    refuse_other_formats_flags(f)
    check_worker_args(f.worker_arg, worker_flags())
    check_words(f)
    try:
        command = tuple(shlex.split(f.worker_command)) if f.worker_command is not None else default_command(f.format)
    except ValueError as e:
        raise SpecError(f"--worker-command {f.worker_command!r} does not parse as a command line: {e}") from None
    memory_mib = parse_memory(f.mem) if f.mem is not None else None
    if f.output is not None:
        check_writable(f.output, "--output")
    if f.env_file is not None:  # checked with the script, before the storage is read
        env_file_for(f.output, f.env_file, job_name="")
    stored = read_set_up(f.study, f.storage, on_wait=say_wait)
    job = WorkerJob(
        study=f.study,
        workers=f.workers,
        gpus_per_trial=stored.gpus_per_trial if f.gpus_per_trial is None else f.gpus_per_trial,
        cpus=worker_cpus(f.cpus, f.study, f.storage),
        memory_mib=memory_mib,
        command=command,
        worker_args=tuple(f.worker_arg),
        runs_dir=f.runs_dir,
        partition=f.partition,
        time_limit=f.time_limit,
        image=f.image,
        namespace=f.namespace or "default",
        storage_secret=f.secret or "kvtune-storage",
        storage_secret_key=f.secret_key or "url",
        model_pvc=f.model_pvc,
        model_mount=f.model_mount,
        runs_pvc=f.runs_pvc,
    )
    return job, stored.model_path


def export_workers(**flags: Any) -> None:
    """Write the Slurm or Kubernetes file that runs a set-up study's workers."""
    f = ExportFlags(**flags)
    job, model_path = worker_job(f)
    if f.format == "slurm":
        _write_slurm(job, f.storage, f.output, f.env_file)
    else:
        _write_k8s(job, model_path, f.output)


export_workers.__signature__, export_workers.__annotations__ = command_signature(ExportFlags)  # type: ignore[attr-defined]
app.command("export-workers")(export_workers)


def _write_slurm(job: WorkerJob, storage_url: str, output: Path | None, env_file: Path | None) -> None:
    """The script and its env file, both rendered (and so checked) before either is written."""
    env_path = env_file_for(output, env_file, job.job_name)
    job = dataclasses.replace(job, env_file=str(env_path))
    script, env_text = render_slurm(job), render_env_file(storage_url)
    write_private(env_path, env_text)
    where = f"the storage URL to {env_path} (mode 0600, sourced by the script; the nodes must see it there)"
    if output is None:
        print(script, end="")
        err_console.print(f"wrote {where}")
        return
    output.write_text(script)
    output.chmod(0o755)
    err_console.print(
        f"wrote {output} ({job.workers} workers for study {job.study}) and {where}: submit with `sbatch {output}`"
    )


def _write_k8s(job: WorkerJob, model_path: str | None, output: Path | None) -> None:
    text = render_k8s_job(job, model_path)
    if output is None:
        print(text, end="")
        return
    output.write_text(text)
    err_console.print(
        f"wrote {output} ({job.workers} workers for study {job.study}): first `{secret_command(job)}` "
        f"(the storage URL for URL), then `kubectl apply -f {output}`"
    )
