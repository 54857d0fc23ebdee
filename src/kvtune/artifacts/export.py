"""Deployment artifacts for one trial: bash script, systemd unit, docker compose, Kubernetes.

Every format is rendered from the trial's own benchmarked argv and environment, so what was
measured is what gets deployed; only the listen address and port change (tuning binds
127.0.0.1 on a free port), and, inside containers, the model path, which becomes
/models/<name> on a read-only mount of the model's directory. Each format has its own quoting
rules and they differ from the shell's: systemd unescapes C escapes and expands ``%``
specifiers and ``$VAR``, docker compose interpolates ``$VAR`` and Kubernetes ``$(VAR)``; the
renderers escape for exactly those, so an argument with spaces, quotes, ``$()`` or ``;``
arrives byte-identical. Rendering is pure (strings in, strings out); `write` is the only I/O.
"""

from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

import yaml

from kvtune import __version__
from kvtune.artifacts import launch_script
from kvtune.errors import SpecError

FORMATS = ("bash", "systemd", "compose", "k8s")
LLAMA_IMAGE = "ghcr.io/ggml-org/llama.cpp:server"
LLAMA_IMAGE_GPU = "ghcr.io/ggml-org/llama.cpp:server-cuda"
VLLM_IMAGE = "vllm/vllm-openai"
VLLM_API_MODULE = "vllm.entrypoints.openai.api_server"
MODELS_DIR = "/models"
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


VLLM_CLI_MODULE = "vllm.entrypoints.cli.main"
# backend -> how many leading argv words the container image's own entrypoint replaces.
SKIP = {"llama-server": 1, "vllm": 2, "vllm-cli": 4, "vllm-api": 3}


def backend_of(argv: list[str]) -> str:
    """'llama-server', 'vllm' (vllm serve MODEL), 'vllm-cli' (python -m vllm.entrypoints.cli.main
    serve MODEL) or 'vllm-api' (python -m vllm.entrypoints.openai.api_server --model MODEL)."""
    exe = posixpath.basename(argv[0]) if argv else ""
    if exe.startswith("llama-server"):
        return "llama-server"
    if exe == "vllm" and argv[1:2] == ["serve"]:
        return "vllm"
    if exe.startswith("python") and argv[1:4] == ["-m", VLLM_CLI_MODULE, "serve"]:
        return "vllm-cli"
    if exe.startswith("python") and argv[1:3] == ["-m", VLLM_API_MODULE]:
        return "vllm-api"
    raise SpecError(f"cannot containerize {argv[0] if argv else 'an empty argv'!r}: compose and k8s "
                    f"exports know llama-server, `vllm serve` and `python -m {VLLM_API_MODULE}`")


def _model_index(argv: list[str], backend: str) -> tuple[int, str]:
    """(index of the model argument, prefix before the path inside that argument)."""
    start = SKIP[backend]
    if backend in ("vllm", "vllm-cli") and len(argv) > start and not argv[start].startswith("-"):
        return start, ""
    names = ("-m", "--model") if backend == "llama-server" else ("--model",)
    for i in range(start, len(argv)):
        if argv[i] in names and i + 1 < len(argv):
            return i + 1, ""
        if argv[i].startswith("--model="):
            return i, "--model="
    raise SpecError(f"no model argument in the trial's argv ({' '.join(argv[:4])} ...)")


def _is_local(path: str, backend: str) -> bool:
    # llama-server always loads a file; vLLM may name a Hugging Face repo id instead of a path.
    return backend == "llama-server" or path.startswith(("/", "./", "../", "~"))


def container_command(argv: list[str], host: str = CONTAINER_HOST, port: int = 8080) -> dict:
    """What a container runs: {'image_kind', 'entrypoint' (None = the image's own), 'args',
    'model_dir' (host directory to mount read-only at /models, or None)}."""
    backend = backend_of(argv)
    argv = deploy_argv(argv, host, port)
    idx, prefix = _model_index(argv, backend)
    model = argv[idx][len(prefix):]
    model_dir = None
    if _is_local(model, backend):
        model_dir = posixpath.dirname(model.rstrip("/")) or "."
        argv[idx] = prefix + f"{MODELS_DIR}/{posixpath.basename(model.rstrip('/'))}"
    skip = SKIP[backend]
    entrypoint = ["python3", "-m", VLLM_API_MODULE] if backend == "vllm-api" else None
    return {"backend": backend, "entrypoint": entrypoint, "args": argv[skip:], "model_dir": model_dir}


# ---- facts for headers ---------------------------------------------------------------------
def gpu_count(hardware: dict) -> int:
    """GPUs the study ran on: a 'gpus' list or count, else 1 when an accelerator is named."""
    gpus = hardware.get("gpus")
    if isinstance(gpus, (list, tuple)):
        return len(gpus)
    if isinstance(gpus, int) and not isinstance(gpus, bool):
        return max(gpus, 0)
    acc = str(hardware.get("accelerator") or "none").strip().lower()
    return 0 if acc.startswith("none") or acc in ("", "cpu") else 1


def _clean(line: str) -> str:
    """One comment line: no control characters (a newline would end the comment)."""
    return re.sub(r"[\x00-\x1f\x7f]", "?", line).rstrip("\\ ")


def header_lines(trial: dict, results: dict, host: str, port: int) -> list[str]:
    hw, m = results.get("hardware") or {}, trial.get("metrics") or {}
    w = (results.get("spec") or {}).get("workload") or {}
    flags = (trial.get("candidate") or {}).get("flags") or {}
    which = "the best" if trial.get("number") == results.get("best_trial") else "a feasible"
    lines = [
        f"study: {results.get('study')}, trial {trial.get('number')} ({which} trial"
        + (", the server's defaults)" if trial.get("baseline") else ")"),
        "hardware: " + ", ".join(f"{k}={v}" for k, v in hw.items() if k in
                                 ("cpu", "cpus", "memory_gib", "accelerator", "gpus")),
        f"versions: kvtune {__version__}; {results.get('backend_version')}",
        "targets: " + ", ".join(results.get("targets") or []),
        f"workload: {w.get('concurrency')} users, {w.get('prompt_tokens')} prompt / "
        f"{w.get('output_tokens')} output tokens",
        "flags: " + (" ".join(f"{k}={v}" for k, v in flags.items()) or "(server defaults)"),
    ]
    if m:
        def ms(k: str) -> str:
            return f"{m[k]:.0f} ms" if isinstance(m.get(k), (int, float)) else "n/a"
        lines.append(f"measured: output {m.get('output_throughput') or 0:.1f} tok/s, TTFT p95 "
                     f"{ms('p95_ttft_ms')}, TPOT p95 {ms('p95_tpot_ms')}, E2EL p95 {ms('p95_e2el_ms')}")
    lines.append(f"tuned on 127.0.0.1 (a free port per trial); this serves on {host}:{port}")
    return [_clean(x) for x in lines]


# ---- bash and systemd ------------------------------------------------------------------------
def render_bash(trial: dict, results: dict, host: str, port: int) -> str:
    return launch_script.render(deploy_argv(trial["argv"], host, port), trial.get("env") or {},
                                header_lines(trial, results, host, port))


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


def render_systemd(trial: dict, results: dict, host: str, port: int) -> str:
    argv = deploy_argv(trial["argv"], host, port)
    if "$" in argv[0] or argv[0][:1] in "-@:+!":
        # systemd reads a leading -@:+! as a prefix, and $ in the executable cannot be escaped
        # the same way for the path it runs and the argv[0] it passes.
        raise SpecError(f"the server binary path {argv[0]!r} cannot be written into a systemd "
                        f"unit (a $ or a leading -@:+!); move or link it to a plain path")
    groups: list[list[str]] = []
    for a in argv[1:]:
        if a.startswith("-") or not groups:
            groups.append([a])
        else:
            groups[-1].append(a)
    exec_start = _sd_escape(argv[0], True) + "".join(
        " \\\n    " + " ".join(_sd_escape(a, True) for a in g) for g in groups)
    desc = f"kvtune-tuned {posixpath.basename(argv[0])} (study {results.get('study')}, trial {trial.get('number')})"
    lines = ["# Generated by kvtune. A systemd unit that starts the tuned server."]
    lines += [f"# {h}" for h in header_lines(trial, results, host, port)]
    lines += ["# Install: copy to /etc/systemd/system/<name>.service, then",
              "#   systemctl daemon-reload && systemctl enable --now <name>", "",
              "[Unit]", "Description=" + _clean(desc).replace("%", "%%"),
              "After=network-online.target", "Wants=network-online.target", "",
              "[Service]", "Type=simple"]
    for key, value in sorted((trial.get("env") or {}).items()):
        lines.append("Environment=" + _sd_escape(f"{key}={value}", False))
    lines += ["ExecStart=" + exec_start, "Restart=on-failure", "RestartSec=5",
              "TimeoutStartSec=600", "", "[Install]", "WantedBy=multi-user.target"]
    return "\n".join(lines) + "\n"


# ---- containers ----------------------------------------------------------------------------
def _dollars(s: str) -> str:
    """Compose interpolates $VAR and Kubernetes $(VAR); in both, $$ is a literal $."""
    return s.replace("$", "$$")


def _image(backend: str, results: dict, gpus: int) -> str:
    if backend == "llama-server":
        return LLAMA_IMAGE_GPU if gpus else LLAMA_IMAGE
    m = re.search(r"\b(\d+\.\d+\.\d+)\b", str(results.get("backend_version") or ""))
    return f"{VLLM_IMAGE}:v{m.group(1)}" if m else f"{VLLM_IMAGE}:latest"


def _name(results: dict) -> str:
    """A DNS-1123 label from the study name (Kubernetes object and compose service names)."""
    base = re.sub(r"[^a-z0-9-]+", "-", f"kvtune-{results.get('study') or 'server'}".lower())
    return base[:63].strip("-") or "kvtune"


def _yaml(doc: dict) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)


def _comment(trial: dict, results: dict, host: str, port: int, what: str, image: str) -> str:
    lines = [f"Generated by kvtune. {what}", *header_lines(trial, results, host, port),
             f"image {image}: pin a tag matching the benchmarked build "
             f"({results.get('backend_version')})",
             f"the model's directory is mounted read-only at {MODELS_DIR}"]
    return "".join(f"# {_clean(x)}\n" for x in lines)


def render_compose(trial: dict, results: dict, host: str, port: int) -> str:
    cmd = container_command(trial["argv"], CONTAINER_HOST, port)
    gpus = gpu_count(results.get("hardware") or {})
    image = _image(cmd["backend"], results, gpus)
    svc: dict = {"image": image}
    if cmd["entrypoint"]:
        svc["entrypoint"] = cmd["entrypoint"]
    svc["command"] = [_dollars(a) for a in cmd["args"]]
    published = {"target": port, "published": str(port), "protocol": "tcp"}
    if host not in ("0.0.0.0", "", "::"):
        published["host_ip"] = host
    svc["ports"] = [published]
    if trial.get("env"):
        svc["environment"] = {k: _dollars(str(v)) for k, v in sorted(trial["env"].items())}
    if cmd["model_dir"]:
        svc["volumes"] = [{"type": "bind", "source": _dollars(cmd["model_dir"]), "target": MODELS_DIR,
                           "read_only": True}]
    if cmd["backend"] != "llama-server":
        svc["ipc"] = "host"  # vLLM's workers share memory through /dev/shm
    svc["restart"] = "on-failure"
    if gpus:
        svc["deploy"] = {"resources": {"reservations": {"devices": [
            {"driver": "nvidia", "count": gpus, "capabilities": ["gpu"]}]}}}
    head = _comment(trial, results, host, port, "A docker compose service: docker compose up -d",
                    image)
    return head + _yaml({"services": {_name(results): svc}})


def render_k8s(trial: dict, results: dict, host: str, port: int) -> str:
    cmd = container_command(trial["argv"], CONTAINER_HOST, port)
    gpus = gpu_count(results.get("hardware") or {})
    image, name = _image(cmd["backend"], results, gpus), _name(results)
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "kvtune"}
    container: dict = {"name": "server", "image": image}
    if cmd["entrypoint"]:
        container["command"] = cmd["entrypoint"]
    container["args"] = [_dollars(a) for a in cmd["args"]]
    if trial.get("env"):
        container["env"] = [{"name": k, "value": _dollars(str(v))} for k, v in sorted(trial["env"].items())]
    container["ports"] = [{"name": "http", "containerPort": port, "protocol": "TCP"}]
    container["readinessProbe"] = {"httpGet": {"path": "/health", "port": port}, "periodSeconds": 10}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    mounts, volumes = [], []
    if cmd["model_dir"]:
        if not cmd["model_dir"].startswith("/"):
            raise SpecError(f"the model directory {cmd['model_dir']!r} is relative; a Kubernetes "
                            f"hostPath needs an absolute path")
        mounts.append({"name": "model", "mountPath": MODELS_DIR, "readOnly": True})
        volumes.append({"name": "model", "hostPath": {"path": cmd["model_dir"], "type": "Directory"}})
    if cmd["backend"] != "llama-server":
        mounts.append({"name": "shm", "mountPath": "/dev/shm"})
        volumes.append({"name": "shm", "emptyDir": {"medium": "Memory"}})
    if mounts:
        container["volumeMounts"] = mounts
    pod: dict = {"containers": [container]}
    if volumes:
        pod["volumes"] = volumes
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": name, "labels": labels},
                  "spec": {"replicas": 1, "selector": {"matchLabels": dict(labels)},
                           "template": {"metadata": {"labels": dict(labels)}, "spec": pod}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": labels},
               "spec": {"type": "ClusterIP", "selector": dict(labels),
                        "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}]}}
    head = _comment(trial, results, host, port, "A Kubernetes Deployment + Service: kubectl apply -f "
                    "this file (the model comes from a hostPath; swap in a PVC for many nodes)", image)
    return head + _yaml(deployment) + "---\n" + _yaml(service)


RENDERERS = {"bash": render_bash, "systemd": render_systemd, "compose": render_compose, "k8s": render_k8s}
SUFFIX = {"bash": ".sh", "systemd": ".service", "compose": ".compose.yaml", "k8s": ".k8s.yaml"}


def render(fmt: str, trial: dict, results: dict, host: str = "127.0.0.1", port: int = 8080) -> str:
    if fmt not in RENDERERS:
        raise SpecError(f"unknown export format {fmt!r}: use one of {', '.join(FORMATS)}")
    if not trial.get("argv"):
        raise SpecError(f"trial {trial.get('number')} has no recorded argv to export")
    return RENDERERS[fmt](trial, results, host, port)


def write(path: Path, fmt: str, trial: dict, results: dict, host: str = "127.0.0.1",
          port: int = 8080) -> Path:
    """Render and write one artifact (the bash script is made executable)."""
    path = Path(path)
    path.write_text(render(fmt, trial, results, host, port))
    if fmt == "bash":
        os.chmod(path, 0o755)
    return path
