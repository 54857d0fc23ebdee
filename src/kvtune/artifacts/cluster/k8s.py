"""The Kubernetes Indexed Job of a study's workers (batch/v1, Kubernetes 1.26 or later).

- `completionMode: Indexed`, `completions` = `parallelism` = N workers: pod i gets
  JOB_COMPLETION_INDEX=i, the worker's name and sampler seed (never a device slot: the kubelet
  gives the container its own GPUs, which it sees as 0..G-1).
- Resources: cpu and memory requests equal to their limits (Guaranteed QoS: the pod's cores are
  its own, not shared with whatever else lands on the node while it measures), and
  `nvidia.com/gpu: G` for a study whose trials use G GPUs.
- `/dev/shm` is a memory-backed emptyDir (a container's default is 64 MiB; vLLM's tensor-parallel
  workers talk through it). Its pages count against the memory limit.
- The runs folder (server logs, the pid file) is a volume: an emptyDir by default, or a
  PersistentVolumeClaim (`--runs-pvc`) in which each pod writes a folder of its own, named after
  the pod, so pods sharing the claim never reap each other's servers.
- The storage URL (it holds the database password) comes from a Secret as the environment
  variable KVTUNE_STORAGE (`env.valueFrom.secretKeyRef`), which `kvtune worker` reads. It is
  never in the container's command: `$(VAR)` there would be expanded into argv, visible in every
  process listing on the node.
- The model comes from a PersistentVolumeClaim the user names, mounted read-only where the
  study's spec says the model is (its directory, unless told otherwise).
- `podFailurePolicy`, first matching rule wins: a pod with the DisruptionTarget condition
  (evicted, preempted, its node drained) is ignored, not counted against `backoffLimit` (the
  study has re-queued its trial: SIGTERM -> re-queue, or the heartbeats for a pod killed
  outright); exit status 2 (bad input: the study or the flags) fails the Job at once; exit 75
  (transient: storage unreachable after the worker's own retries) is ignored too, so the Job
  starts a new pod for that index; any other failure counts against `backoffLimit`.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

import yaml

from kvtune.artifacts.cluster.job import STORAGE_ENV, WorkerJob, check_plain, k8s_memory
from kvtune.errors import EXIT_BAD_INPUT, EXIT_TRANSIENT, SpecError

MODEL_VOLUME = "model"
SHM_VOLUME = "dshm"
RUNS_VOLUME = "runs"
DEFAULT_RUNS_DIR = "/kvtune-runs"
POD_ENV = "KVTUNE_POD"
# Time between SIGTERM and SIGKILL: the worker stops its server and re-queues its trial.
GRACE_S = 120
# RFC 1123 names, as the API server checks them: a label (namespaces) and a subdomain (Secrets, claims).
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")


def _check_names(job: WorkerJob) -> None:
    """The names the API server would refuse, refused here with the flag that gave them."""
    if not _LABEL.match(job.namespace):
        raise SpecError(
            f"--namespace must be a Kubernetes namespace name (lower case, digits, '-'), got {job.namespace!r}"
        )
    for flag, name in (("--secret", job.storage_secret), ("--model-pvc", job.model_pvc), ("--runs-pvc", job.runs_pvc)):
        if name is not None and not _SUBDOMAIN.match(name):
            raise SpecError(f"{flag} must be a Kubernetes object name (lower case, digits, '-', '.'), got {name!r}")
    if not _SECRET_KEY.match(job.storage_secret_key):
        raise SpecError(
            f"--secret-key must be a Secret key (letters, digits, '-', '_', '.'), got {job.storage_secret_key!r}"
        )


def check_k8s(job: WorkerJob, model_path: str | None) -> tuple[WorkerJob, str | None]:
    """The shared checks, then Kubernetes' own; returns the job and where the model is mounted."""
    job = job.validate()
    if not job.image:
        raise SpecError("--format k8s-job needs --image: an image with kvtune and the study's backend installed")
    check_plain("--image", job.image)
    _check_names(job)
    if job.runs_dir is not None and not job.runs_dir.startswith("/"):
        raise SpecError(f"--runs-dir must be an absolute path in the container for k8s-job, got {job.runs_dir!r}")
    model_dir = None
    if job.model_pvc:
        model_dir = job.model_mount or (
            posixpath.dirname(model_path) if model_path and model_path.startswith("/") else None
        )
        if not model_dir:
            raise SpecError(
                "--model-pvc needs --model-mount: the study's spec names no absolute model path to mount it at"
            )
    if model_dir and not model_dir.startswith("/"):
        raise SpecError(f"--model-mount must be an absolute path in the container, got {model_dir!r}")
    return job, model_dir


def _resources(job: WorkerJob) -> dict[str, Any]:
    """Requests = limits for every resource: Guaranteed QoS (and GPUs must be equal anyway)."""
    assert job.cpus is not None and job.memory_mib is not None  # validated
    amounts: dict[str, Any] = {"cpu": str(job.cpus), "memory": k8s_memory(job.memory_mib)}
    if job.gpus_per_trial:
        amounts["nvidia.com/gpu"] = job.gpus_per_trial
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _container(job: WorkerJob, model_dir: str | None) -> dict[str, Any]:
    runs_dir = job.runs_dir or DEFAULT_RUNS_DIR
    env: list[dict[str, Any]] = [
        {
            "name": STORAGE_ENV,
            "valueFrom": {"secretKeyRef": {"name": job.storage_secret, "key": job.storage_secret_key}},
        }
    ]
    runs_mount: dict[str, Any] = {"name": RUNS_VOLUME, "mountPath": runs_dir}
    if job.runs_pvc:  # a claim shared by every pod: each writes under a folder named after itself
        env.append({"name": POD_ENV, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
        runs_mount["subPathExpr"] = f"$({POD_ENV})"
    mounts = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}, runs_mount]
    if model_dir:
        mounts.append({"name": MODEL_VOLUME, "mountPath": model_dir, "readOnly": True})
    return {
        "name": "worker",
        "image": job.image,
        "command": job.worker_argv(runs_dir),
        "env": env,
        "resources": _resources(job),
        "volumeMounts": mounts,
    }


def _volumes(job: WorkerJob) -> list[dict[str, Any]]:
    runs: dict[str, Any] = {"persistentVolumeClaim": {"claimName": job.runs_pvc}} if job.runs_pvc else {"emptyDir": {}}
    volumes = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory"}}, {"name": RUNS_VOLUME, **runs}]
    if job.model_pvc:
        volumes.append({"name": MODEL_VOLUME, "persistentVolumeClaim": {"claimName": job.model_pvc, "readOnly": True}})
    return volumes


def failure_rules() -> list[dict[str, Any]]:
    """podFailurePolicy's rules, in order (the first that matches a failed pod decides)."""

    def on_exit(action: str, status: int) -> dict[str, Any]:
        return {
            "action": action,
            "onExitCodes": {"containerName": "worker", "operator": "In", "values": [status]},
            # Kubernetes 1.26's schema wants the field in every rule (kubectl's validation
            # refuses the rule without it); empty means "no condition".
            "onPodConditions": [],
        }

    return [
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
        on_exit("FailJob", EXIT_BAD_INPUT),
        on_exit("Ignore", EXIT_TRANSIENT),
    ]


def job_manifest(job: WorkerJob, model_path: str | None = None) -> dict[str, Any]:
    """The Job object. `model_path`: the model the study's spec names (its directory is where
    the claim is mounted, unless `job.model_mount` says where)."""
    job, model_dir = check_k8s(job, model_path)
    labels = {"app.kubernetes.io/name": "kvtune-worker", "kvtune/study": job.job_name, **job.labels}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",  # podFailurePolicy requires it
        "terminationGracePeriodSeconds": GRACE_S,
        "containers": [_container(job, model_dir)],
        "volumes": _volumes(job),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job.job_name, "namespace": job.namespace, "labels": dict(labels)},
        "spec": {
            "completionMode": "Indexed",
            "completions": job.workers,
            "parallelism": job.workers,
            "backoffLimit": job.workers,
            "podFailurePolicy": {"rules": failure_rules()},
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},  # a copy: no YAML anchors
        },
    }


def secret_command(job: WorkerJob) -> str:
    """The `kubectl create secret` line to run first, in the Job's namespace."""
    return (
        f"kubectl create secret generic {job.storage_secret} -n {job.namespace} "
        f"--from-literal={job.storage_secret_key}=URL"
    )


def render_k8s_job(job: WorkerJob, model_path: str | None = None) -> str:
    """The Job as YAML (apply it with `kubectl apply -f FILE` after creating the Secret)."""
    manifest = job_manifest(job, model_path)
    head = f"# kvtune workers for study {job.study}: {job.workers} pod(s). First: {secret_command(job)}\n"
    return head + yaml.safe_dump(manifest, sort_keys=False)
