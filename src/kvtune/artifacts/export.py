"""Deployment artifacts for one trial: bash script, systemd unit, docker compose, Kubernetes.

Every format is rendered from the trial's own benchmarked argv and environment, so what was
measured is what gets deployed; only the listen address and port change (tuning binds
127.0.0.1 on a free port), and, inside containers, the model path, which becomes
/models/<name> on a read-only mount of the model's directory. Each format has its own quoting
rules and they differ from the shell's: systemd unescapes C escapes and expands ``%``
specifiers and ``$VAR``, docker compose interpolates ``$VAR`` and Kubernetes ``$(VAR)``; the
renderers escape for exactly those, so an argument with spaces, quotes, ``$()`` or ``;``
arrives byte-identical. What a container runs (image, entrypoint, model mount, GPUs) is the
backend's knowledge: its launcher class's `container_spec`, looked up by the backend name the
results record. GPUs: a trial measured on a worker slot's GPUs (`device_env`:
CUDA_VISIBLE_DEVICES=2,3) reserves that many in compose and Kubernetes (the container sees them
as its own 0..G-1, so the variable is not passed in) and carries the variable in bash and systemd,
where the indices mean the same GPUs; a trial without one reserves every GPU the study ran on.
CPUs: containers get the CPUs the measurement ran on (cpu_resources.py), limits and requests.
Every format carries the trial's environment (`command_line` puts it before the argv on one
line, as the summary prints it), containers without the GPU pinning. Rendering is pure (strings in, strings out); `write` is the only I/O.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from kvtune import __version__, hardware
from kvtune.artifacts import bench_script, csv_export, launch_script
from kvtune.artifacts.cpu_resources import tuned_cpus
from kvtune.artifacts.deployable import Deployable
from kvtune.errors import BackendError, SpecError
from kvtune.launchers.base import MODELS_DIR, ContainerSpec
from kvtune.launchers.registry import launcher_class
from kvtune.study import unconfirmed
from kvtune.study.outcome import TrialOutcome
from kvtune.study.spec import StudySpec

FORMATS = ("bash", "systemd", "compose", "k8s")
# Every format `kvtune export` writes: the deployments, the verification script (bench_script.py)
# and the whole study as CSV (csv_export.py, about every trial rather than one).
ALL_FORMATS = (*FORMATS, "bench", "csv")
STUDY_FORMATS = ("csv",)
EXECUTABLE = ("bash", "bench")
CONTAINER_HOST = "0.0.0.0"  # inside a container the server must listen on all interfaces


# ---- argv ------------------------------------------------------------------------------------
def _replace_opt(argv: list[str], names: tuple[str, ...], value: str) -> tuple[list[str], bool]:
    out, found, i = list(argv), False, 1
    while i < len(out):
        a = out[i]
        if a in names and i + 1 < len(out):
            out[i + 1], found = value, True
            i += 2
            continue
        for n in names:
            if n.startswith("--") and a.startswith(n + "="):
                out[i], found = f"{n}={value}", True
        i += 1
    return out, found


def deploy_argv(trial_argv: list[str], host: str, port: int) -> list[str]:
    """The trial's argv with the values of --host and --port replaced (added if absent);
    every other argument is kept byte-identical."""
    argv, has_host = _replace_opt(trial_argv, ("--host",), host)
    argv, has_port = _replace_opt(argv, ("--port",), str(port))
    return argv + ([] if has_host else ["--host", host]) + ([] if has_port else ["--port", str(port)])


def backend(results: dict) -> str:
    """The study's backend as its results record it (results without a spec were written by
    llama-server studies, the only backend then)."""
    return StudySpec.from_dict(results.get("spec") or {}).backend


def container_spec(d: Deployable, port: int) -> ContainerSpec:
    """What a container runs for this trial: the backend's own `container_spec` of the deploy
    argv (listening on all interfaces), on the GPUs the study ran on."""
    try:
        cls = launcher_class(d.spec.backend)
    except BackendError as e:
        raise SpecError(f"cannot containerize: {e}") from e
    argv = deploy_argv(d.trial.argv, CONTAINER_HOST, port)
    return cls.container_spec(argv, d.gpus_to_reserve, d.backend_version)


# ---- facts for headers ---------------------------------------------------------------------
def deploy_env(trial: TrialOutcome) -> dict[str, str]:
    """The environment a bash script or systemd unit sets: the candidate's own, then the GPU
    pinning the trial was measured with."""
    return {**(trial.env or {}), **(trial.device_env or {})}


def command_line(trial: TrialOutcome, host: str, port: int) -> str:
    """The best command line as the summary prints it: ``VAR=value ... argv``, the launch
    script's environment and argv on one line."""
    return launch_script.command_line(deploy_argv(trial.argv, host, port), deploy_env(trial))


def _hardware_line(hw: Mapping[str, Any]) -> str:
    if all(k in hw for k in ("cpu", "cpus", "memory_gib", "accelerator")):
        return "hardware: " + hardware.describe(dict(hw))
    return "hardware: " + ", ".join(
        f"{k}={v}" for k, v in hw.items() if k in ("cpu", "cpus", "memory_gib", "accelerator", "gpus")
    )


def _clean(line: str) -> str:
    """One comment line: no control characters (a newline would end the comment)."""
    return re.sub(r"[\x00-\x1f\x7f]", "?", line).rstrip("\\ ")


def header_lines(d: Deployable, host: str, port: int) -> list[str]:
    trial, results = d.trial, d.results
    w, flags = d.spec.workload, trial.candidate.flags
    which = "the best" if d.named_best else "a feasible"
    lines = [
        f"study: {results.get('study')}, trial {trial.number} ({which} trial"
        + (", the server's defaults)" if trial.baseline else ")"),
        _hardware_line(d.hardware),
        f"versions: kvtune {__version__}; {results.get('backend_version')}",
        "targets: " + ", ".join(results.get("targets") or []),
        f"workload: {w.concurrency} users, {w.prompt_tokens} prompt / {w.output_tokens} output tokens",
        "flags: " + (" ".join(f"{k}={v}" for k, v in flags.items()) or "none (the server's defaults)"),
    ]
    lines += d.measured_lines()
    if d.pinned_gpus:
        lines.append(
            f"GPUs: measured with CUDA_VISIBLE_DEVICES={','.join(d.pinned_gpus)} (a worker's "
            f"slot, in PCI bus order); bash and systemd keep it, containers reserve "
            f"{len(d.pinned_gpus)} GPU(s)"
        )
    lines.append(f"tuned on 127.0.0.1 (a free port per trial); this serves on {host}:{port}")
    note = unconfirmed.line(results)  # searched by workers, confirmed by nobody yet
    if note:
        lines.append(note)
    return [_clean(x) for x in lines]


# ---- bash and systemd ------------------------------------------------------------------------
def render_bash(d: Deployable, host: str, port: int) -> str:
    return launch_script.render(deploy_argv(d.trial.argv, host, port), deploy_env(d.trial), header_lines(d, host, port))


def _sd_escape(s: str, dollars: bool) -> str:
    """A systemd double-quoted word: C escapes, %% for specifiers, $$ where $VAR expands."""
    out = []
    for ch in s:
        if ch in '\\"':
            out.append("\\" + ch)
        elif ch == "%":
            out.append("%%")
        elif ch == "$" and dollars:
            out.append("$$")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def render_systemd(d: Deployable, host: str, port: int) -> str:
    argv = deploy_argv(d.trial.argv, host, port)
    if "$" in argv[0] or argv[0][:1] in "-@:+!":
        # systemd reads a leading -@:+! as a prefix, and $ in the executable cannot be escaped
        # the same way for the path it runs and the argv[0] it passes.
        raise SpecError(
            f"the server binary path {argv[0]!r} cannot be written into a systemd "
            f"unit (a $ or a leading -@:+!); move or link it to a plain path"
        )
    groups: list[list[str]] = []
    for a in argv[1:]:
        if a.startswith("-") or not groups:
            groups.append([a])
        else:
            groups[-1].append(a)
    exec_start = _sd_escape(argv[0], True) + "".join(
        " \\\n    " + " ".join(_sd_escape(a, True) for a in g) for g in groups
    )
    desc = f"kvtune-tuned {posixpath.basename(argv[0])} (study {d.results.get('study')}, trial {d.trial.number})"
    lines = ["# Generated by kvtune. A systemd unit that starts the tuned server."]
    lines += [f"# {h}" for h in header_lines(d, host, port)]
    lines += [
        "# Install: copy to /etc/systemd/system/<name>.service, then",
        "#   systemctl daemon-reload && systemctl enable --now <name>",
        "",
        "[Unit]",
        "Description=" + _clean(desc).replace("%", "%%"),
        "After=network-online.target",
        "Wants=network-online.target",
        "",
        "[Service]",
        "Type=simple",
    ]
    for key, value in sorted(deploy_env(d.trial).items()):
        lines.append("Environment=" + _sd_escape(f"{key}={value}", False))
    lines += [
        "ExecStart=" + exec_start,
        "Restart=on-failure",
        "RestartSec=5",
        "TimeoutStartSec=600",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n"


# ---- containers ----------------------------------------------------------------------------
def _dollars(s: str) -> str:
    """Compose interpolates $VAR and Kubernetes $(VAR); in both, $$ is a literal $."""
    return s.replace("$", "$$")


def _name(results: Mapping[str, Any]) -> str:
    """A DNS-1123 label from the study name (Kubernetes object and compose service names)."""
    base = re.sub(r"[^a-z0-9-]+", "-", f"kvtune-{results.get('study') or 'server'}".lower())
    return base[:63].strip("-") or "kvtune"


def _yaml(doc: dict) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)


def _comment(d: Deployable, host: str, port: int, what: str, image: str, cpus: str) -> str:
    lines = [
        f"Generated by kvtune. {what}",
        *header_lines(d, host, port),
        f"image {image}: pin a tag matching the benchmarked build ({d.results.get('backend_version')})",
        f"the model's directory is mounted read-only at {MODELS_DIR}",
        *([cpus] if cpus else []),
    ]
    return "".join(f"# {_clean(x)}\n" for x in lines)


def render_compose(d: Deployable, host: str, port: int) -> str:
    spec, env = container_spec(d, port), d.trial.env
    svc: dict = {"image": spec.image}
    if spec.entrypoint:
        svc["entrypoint"] = list(spec.entrypoint)
    svc["command"] = [_dollars(a) for a in spec.args]
    published = {"target": port, "published": str(port), "protocol": "tcp"}
    if host not in ("0.0.0.0", "", "::"):
        published["host_ip"] = host
    svc["ports"] = [published]
    if env:
        svc["environment"] = {k: _dollars(str(v)) for k, v in sorted(env.items())}
    if spec.model_dir:
        svc["volumes"] = [{"type": "bind", "source": _dollars(spec.model_dir), "target": MODELS_DIR, "read_only": True}]
    if spec.ipc_host:
        svc["ipc"] = "host"  # e.g. vLLM's workers share memory through /dev/shm
    cpus = tuned_cpus(d.trial, d.hardware)
    svc.update(cpus.compose_fields() if cpus else {})
    svc["restart"] = "on-failure"
    if spec.gpus:
        svc["deploy"] = {
            "resources": {
                "reservations": {"devices": [{"driver": "nvidia", "count": spec.gpus, "capabilities": ["gpu"]}]}
            }
        }
    note = cpus.compose_comment() if cpus else ""
    head = _comment(d, host, port, "A docker compose service: docker compose up -d", spec.image, note)
    return head + _yaml({"services": {_name(d.results): svc}})


def render_k8s(d: Deployable, host: str, port: int) -> str:
    spec, env = container_spec(d, port), d.trial.env
    name = _name(d.results)
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "kvtune"}
    container: dict = {"name": "server", "image": spec.image}
    if spec.entrypoint:
        container["command"] = list(spec.entrypoint)
    container["args"] = [_dollars(a) for a in spec.args]
    if env:
        container["env"] = [{"name": k, "value": _dollars(str(v))} for k, v in sorted(env.items())]
    container["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    container["readinessProbe"] = {"httpGet": {"path": spec.health_path, "port": port}, "periodSeconds": 10}
    cpus = tuned_cpus(d.trial, d.hardware)
    resources = cpus.k8s_resources() if cpus else {}
    if spec.gpus:
        resources.setdefault("limits", {})["nvidia.com/gpu"] = spec.gpus
    if resources:
        container["resources"] = resources
    mounts, volumes = [], []
    if spec.model_dir:
        if not spec.model_dir.startswith("/"):
            raise SpecError(
                f"the model directory {spec.model_dir!r} is relative; a Kubernetes hostPath needs an absolute path"
            )
        mounts.append({"name": "model", "mountPath": MODELS_DIR, "readOnly": True})
        volumes.append({"name": "model", "hostPath": {"path": spec.model_dir, "type": "Directory"}})
    if spec.ipc_host:
        mounts.append({"name": "shm", "mountPath": "/dev/shm"})
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory"}})
    if mounts:
        container["volumeMounts"] = mounts
    pod: dict = {"containers": [container]}
    if volumes:
        pod["volumes"] = volumes
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "type": "ClusterIP",
            "selector": dict(labels),
            "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }
    head = _comment(
        d,
        host,
        port,
        "A Kubernetes Deployment + Service: kubectl apply -f "
        "this file (the model comes from a hostPath; swap in a PVC for many nodes)",
        spec.image,
        cpus.k8s_comment() if cpus else "",
    )
    return head + _yaml(deployment) + "---\n" + _yaml(service)


def render_bench(d: Deployable, host: str, port: int) -> str:
    return bench_script.render(d, host, port, header_lines(d, host, port))


RENDERERS: dict[str, Callable[[Deployable, str, int], str]] = {
    "bash": render_bash,
    "systemd": render_systemd,
    "compose": render_compose,
    "k8s": render_k8s,
    "bench": render_bench,
}


def render(fmt: str, trial: dict, results: dict, host: str = "127.0.0.1", port: int = 8080) -> str:
    """Format `fmt` of `trial` (its results.json record) of the study `results` records."""
    if fmt not in ALL_FORMATS:
        raise SpecError(f"unknown export format {fmt!r}: use one of {', '.join(ALL_FORMATS)}")
    if fmt in STUDY_FORMATS:
        return csv_export.render(results)
    if not trial.get("argv"):
        raise SpecError(f"trial {trial.get('number')} has no recorded argv to export")
    return render_deployable(fmt, Deployable.read(trial, results), host, port)


def render_deployable(fmt: str, d: Deployable, host: str = "127.0.0.1", port: int = 8080) -> str:
    """Format `fmt` (one of `FORMATS` or "bench") of the trial `d`, already read."""
    if not d.trial.argv:
        raise SpecError(f"trial {d.trial.number} has no recorded argv to export")
    return RENDERERS[fmt](d, host, port)


def write(path: Path, fmt: str, trial: dict, results: dict, host: str = "127.0.0.1", port: int = 8080) -> Path:
    """Render and write one artifact (the scripts are made executable)."""
    return _write(Path(path), fmt, render(fmt, trial, results, host, port))


def write_deployable(path: Path, fmt: str, d: Deployable, host: str = "127.0.0.1", port: int = 8080) -> Path:
    """`write` for a trial already read (the run's own launch and verify scripts)."""
    return _write(Path(path), fmt, render_deployable(fmt, d, host, port))


def _write(path: Path, fmt: str, text: str) -> Path:
    path.write_text(text)
    if fmt in EXECUTABLE:
        os.chmod(path, 0o755)
    return path
