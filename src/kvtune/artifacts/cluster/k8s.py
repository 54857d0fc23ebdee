"""The Kubernetes Indexed Job of a study's workers (batch/v1, Kubernetes 1.26 or later).

- `completionMode: Indexed`, `completions` = `parallelism` = N workers: pod i gets
  JOB_COMPLETION_INDEX=i, the worker's name and sampler seed (never a device slot: the kubelet
  gives the container its own GPUs, which it sees as 0..G-1).
- `nvidia.com/gpu: G` in requests and limits for a study whose trials use G GPUs.
- The storage URL (it holds the database password) comes from a Secret through
  `env.valueFrom.secretKeyRef`, and reaches the worker's argv as `$(KVTUNE_STORAGE)`.
- The model comes from a PersistentVolumeClaim the user names, mounted read-only where the
  study's spec says the model is (its directory, unless told otherwise).
- `podFailurePolicy`: a pod with the DisruptionTarget condition (evicted, preempted, its node
  drained) is ignored, not counted against `backoffLimit`: the Job starts a new pod for that
  index, and the study has already re-queued the interrupted trial (SIGTERM -> re-queue; a pod
  killed outright leaves a trial the heartbeats re-queue). Exit status 2 (bad input: the
  study or the flags) fails the Job at once instead of retrying.
"""

from __future__ import annotations

import posixpath
from typing import Any

import yaml

from kvtune.artifacts.cluster.job import WorkerJob
from kvtune.errors import SpecError

STORAGE_ENV = "KVTUNE_STORAGE"
MODEL_VOLUME = "model"
# Time between SIGTERM and SIGKILL: the worker stops its server and re-queues its trial.
GRACE_S = 120


def _container(job: WorkerJob, model_dir: str | None) -> dict[str, Any]:
    gpus = {"nvidia.com/gpu": job.gpus_per_trial} if job.gpus_per_trial else {}
    container: dict[str, Any] = {
        "name": "worker",
        "image": job.image,
        "command": list(job.worker_argv(f"$({STORAGE_ENV})")),
        "env": [
            {
                "name": STORAGE_ENV,
                "valueFrom": {"secretKeyRef": {"name": job.storage_secret, "key": job.storage_secret_key}},
            }
        ],
    }
    if gpus:
        container["resources"] = {"requests": dict(gpus), "limits": dict(gpus)}
    if model_dir:
        container["volumeMounts"] = [{"name": MODEL_VOLUME, "mountPath": model_dir, "readOnly": True}]
    return container


def job_manifest(job: WorkerJob, model_path: str | None = None) -> dict[str, Any]:
    """The Job object. `model_path`: the model the study's spec names (its directory is where
    the claim is mounted, unless `job.model_mount` says where)."""
    job = job.validate()
    if not job.image:
        raise SpecError("--format k8s-job needs --image: an image with kvtune and the study's backend installed")
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
    labels = {"app.kubernetes.io/name": "kvtune-worker", "kvtune/study": job.job_name, **job.labels}
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": GRACE_S,
        "containers": [_container(job, model_dir)],
    }
    if job.model_pvc:
        pod_spec["volumes"] = [
            {"name": MODEL_VOLUME, "persistentVolumeClaim": {"claimName": job.model_pvc, "readOnly": True}}
        ]
    metadata: dict[str, Any] = {"name": job.job_name, "labels": dict(labels)}
    if job.namespace:
        metadata["namespace"] = job.namespace
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "completionMode": "Indexed",
            "completions": job.workers,
            "parallelism": job.workers,
            "backoffLimit": job.workers,
            "podFailurePolicy": {
                "rules": [
                    {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]},
                    {
                        "action": "FailJob",
                        "onExitCodes": {"containerName": "worker", "operator": "In", "values": [2]},
                        # Kubernetes 1.26's schema wants the field in every rule (kubectl's
                        # validation refuses the rule without it); empty means "no condition".
                        "onPodConditions": [],
                    },
                ]
            },
            "template": {"metadata": {"labels": dict(labels)}, "spec": pod_spec},  # a copy: no YAML anchors
        },
    }


def render_k8s_job(job: WorkerJob, model_path: str | None = None) -> str:
    """The Job as YAML (apply it with `kubectl apply -f FILE` after creating the Secret)."""
    manifest = job_manifest(job, model_path)
    secret = f"kubectl create secret generic {job.storage_secret} --from-literal={job.storage_secret_key}=URL"
    head = f"# kvtune workers for study {job.study}: {job.workers} pod(s). First: {secret}\n"
    return head + yaml.safe_dump(manifest, sort_keys=False)
