"""The Indexed Job: its fields, and the manifest validated offline against the Kubernetes API
schemas of two versions (PyPI's kubernetes-validate; Indexed Jobs with podFailurePolicy need 1.26+)."""

import kubernetes_validate
import pytest
import yaml

from kvtune.artifacts.cluster.job import WorkerJob
from kvtune.artifacts.cluster.k8s import job_manifest, render_k8s_job
from kvtune.errors import SpecError

# The oldest version whose batch/v1 Job has podFailurePolicy, and the newest the package ships.
VERSIONS = ("1.26.0", "1.37.0")
MODEL = "/models/qwen/Qwen2.5-7B-Instruct-Q4_K_M.gguf"


def gpu_job(**kw) -> WorkerJob:
    base = dict(
        study="qwen-h100",
        storage_url="postgresql://u:pw-4f9x@db/kvtune",
        workers=4,
        gpus_per_trial=2,
        command=("kvtune", "worker"),
        image="registry.example/kvtune:0.9",
        model_pvc="models",
        namespace="tuning",
    )
    return WorkerJob(**{**base, **kw})


def test_an_indexed_job_of_workers_with_gpus_secret_and_model():
    m = job_manifest(gpu_job(), MODEL)
    spec = m["spec"]
    assert (m["apiVersion"], m["kind"], m["metadata"]["namespace"]) == ("batch/v1", "Job", "tuning")
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 4)
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"  # podFailurePolicy requires it
    (c,) = pod["containers"]
    assert c["resources"]["requests"] == {"nvidia.com/gpu": 2} == c["resources"]["limits"]
    (env,) = c["env"]
    assert env["valueFrom"]["secretKeyRef"] == {"name": "kvtune-storage", "key": "url"}
    assert c["command"][c["command"].index("--storage") + 1] == "$(KVTUNE_STORAGE)"
    assert "pw-4f9x" not in yaml.safe_dump(m)  # the password stays in the Secret
    assert c["volumeMounts"] == [{"name": "model", "mountPath": "/models/qwen", "readOnly": True}]
    assert pod["volumes"][0]["persistentVolumeClaim"] == {"claimName": "models", "readOnly": True}
    assert "--slot" not in c["command"]  # JOB_COMPLETION_INDEX names it; the kubelet gives its GPUs


def test_an_evicted_pod_is_ignored_not_counted_and_bad_input_fails_the_job():
    rules = job_manifest(gpu_job(), MODEL)["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert rules[1]["action"] == "FailJob" and rules[1]["onExitCodes"]["values"] == [2]
    assert job_manifest(gpu_job(), MODEL)["spec"]["backoffLimit"] == 4


def test_a_cpu_study_requests_no_gpu_and_mounts_nothing_unasked():
    m = job_manifest(gpu_job(gpus_per_trial=0, model_pvc=None, namespace=None), MODEL)
    (c,) = m["spec"]["template"]["spec"]["containers"]
    assert "resources" not in c and "volumeMounts" not in c and "namespace" not in m["metadata"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("gpus", [0, 1, 8])
def test_the_manifest_validates_against_the_api_schema(version, gpus):
    text = render_k8s_job(gpu_job(gpus_per_trial=gpus, model_mount="/mnt/models" if gpus == 8 else None), MODEL)
    manifest = yaml.safe_load(text)
    # raises ValidationError on an invalid manifest, returns the version it checked against
    assert kubernetes_validate.validate(manifest, version, strict=True) == version.rsplit(".", 1)[0]


def test_the_schema_check_does_catch_a_broken_manifest():
    """The validation above can fail: a misspelled field (strict mode) and a count that is no
    integer are refused."""
    misspelled = job_manifest(gpu_job(), MODEL)
    misspelled["spec"]["podFailurePolicies"] = misspelled["spec"].pop("podFailurePolicy")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelled, VERSIONS[1], strict=True)
    broken = job_manifest(gpu_job(), MODEL)
    broken["spec"]["parallelism"] = "four"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, VERSIONS[0], strict=True)


@pytest.mark.parametrize(
    ("kw", "model", "message"),
    [
        ({"image": None}, MODEL, "needs --image"),
        ({"model_mount": "models"}, MODEL, "--model-mount must be an absolute path"),
        ({}, "Qwen/Qwen2.5-7B", "--model-pvc needs --model-mount"),
    ],
)
def test_missing_or_bad_options_are_one_line_errors(kw, model, message):
    with pytest.raises(SpecError, match=message):
        job_manifest(gpu_job(**kw), model)
