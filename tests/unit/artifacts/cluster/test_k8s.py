"""The Indexed Job, read back from its YAML field by field (Guaranteed QoS, /dev/shm, the runs
volume, the URL only from the Secret, the failure policy), and validated offline against the
Kubernetes API schemas of two versions (PyPI's kubernetes-validate; Indexed Jobs with
podFailurePolicy need 1.26+)."""

import kubernetes_validate
import pytest
import yaml

from kvtune.artifacts.cluster.job import WorkerJob
from kvtune.artifacts.cluster.k8s import job_manifest, render_k8s_job, secret_command
from kvtune.errors import SpecError

# The oldest version whose batch/v1 Job has podFailurePolicy, and the newest the package ships.
VERSIONS = ("1.26.0", "1.37.0")
MODEL = "/models/qwen/Qwen2.5-7B-Instruct-Q4_K_M.gguf"
PASSWORD = "pw-4f9x"


def gpu_job(**kw) -> WorkerJob:
    base = dict(
        study="qwen-h100",
        workers=4,
        gpus_per_trial=2,
        cpus=16,
        memory_mib=64 * 1024,
        command=("kvtune", "worker"),
        image="registry.example/kvtune:0.9",
        model_pvc="models",
        namespace="tuning",
    )
    return WorkerJob(**{**base, **kw})


def parsed(job: WorkerJob) -> dict:
    """The manifest as kubectl reads the file: the rendered YAML, parsed."""
    return yaml.safe_load(render_k8s_job(job, MODEL))


def the_container(m: dict) -> dict:
    (c,) = m["spec"]["template"]["spec"]["containers"]
    return c


def action_for(rules: list[dict], exit_code: int) -> str:
    """What the Job controller does with a pod whose worker container exited `exit_code` (no
    pod condition): the first rule that matches, else Count (against backoffLimit)."""
    for rule in rules:
        codes = rule.get("onExitCodes")
        if codes and codes["containerName"] == "worker":
            hit = exit_code in codes["values"]
            if hit == (codes["operator"] == "In"):
                return rule["action"]
    return "Count"


def test_an_indexed_job_of_workers_in_its_namespace():
    m = parsed(gpu_job())
    spec = m["spec"]
    assert (m["apiVersion"], m["kind"], m["metadata"]["namespace"]) == ("batch/v1", "Job", "tuning")
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 4)
    assert spec["template"]["spec"]["restartPolicy"] == "Never"  # podFailurePolicy requires it
    assert "--slot" not in the_container(m)["command"]  # JOB_COMPLETION_INDEX names it


def test_requests_equal_limits_for_guaranteed_qos():
    res = the_container(parsed(gpu_job()))["resources"]
    assert res["requests"] == res["limits"] == {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": 2}
    cpu_only = the_container(parsed(gpu_job(gpus_per_trial=0, cpus=3, memory_mib=1536)))["resources"]
    assert cpu_only["requests"] == cpu_only["limits"] == {"cpu": "3", "memory": "1536Mi"}


def test_dev_shm_is_a_memory_emptydir_mounted_there():
    m = parsed(gpu_job())
    volumes = {v["name"]: v for v in m["spec"]["template"]["spec"]["volumes"]}
    mounts = {v["mountPath"]: v for v in the_container(m)["volumeMounts"]}
    assert volumes[mounts["/dev/shm"]["name"]]["emptyDir"] == {"medium": "Memory"}


def test_the_runs_folder_is_an_emptydir_or_a_claim_with_a_folder_per_pod():
    m = parsed(gpu_job())
    c = the_container(m)
    runs = c["command"][c["command"].index("--runs-dir") + 1]
    volumes = {v["name"]: v for v in m["spec"]["template"]["spec"]["volumes"]}
    mount = {v["mountPath"]: v for v in c["volumeMounts"]}[runs]
    assert volumes[mount["name"]]["emptyDir"] == {} and "subPathExpr" not in mount

    m = parsed(gpu_job(runs_pvc="kvtune-runs", runs_dir="/runs"))
    c = the_container(m)
    volumes = {v["name"]: v for v in m["spec"]["template"]["spec"]["volumes"]}
    mount = {v["mountPath"]: v for v in c["volumeMounts"]}["/runs"]
    assert volumes[mount["name"]]["persistentVolumeClaim"] == {"claimName": "kvtune-runs"}
    var = mount["subPathExpr"].removeprefix("$(").removesuffix(")")
    (pod_name,) = [e for e in c["env"] if e["name"] == var]
    assert pod_name["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_the_storage_url_comes_only_from_the_secret_as_env():
    m = parsed(gpu_job())
    c = the_container(m)
    (storage,) = [e for e in c["env"] if e["name"] == "KVTUNE_STORAGE"]
    assert storage == {
        "name": "KVTUNE_STORAGE",
        "valueFrom": {"secretKeyRef": {"name": "kvtune-storage", "key": "url"}},
    }
    argv = [*c["command"], *c.get("args", [])]
    assert "--storage" not in argv and not [a for a in argv if "KVTUNE_STORAGE" in a or "$(" in a]
    assert PASSWORD not in yaml.safe_dump(m) and "postgresql" not in yaml.safe_dump(m)


def test_the_printed_secret_command_names_the_namespace():
    job = gpu_job(storage_secret="db-url", storage_secret_key="dsn")
    assert secret_command(job) == "kubectl create secret generic db-url -n tuning --from-literal=dsn=URL"
    head = render_k8s_job(job, MODEL).splitlines()[0]
    assert head.startswith("#") and secret_command(job) in head
    env = the_container(parsed(job))["env"][0]
    assert env["valueFrom"]["secretKeyRef"] == {"name": "db-url", "key": "dsn"}


def test_bad_input_fails_the_job_transient_errors_retry_other_failures_count():
    rules = parsed(gpu_job())["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert action_for(rules, 2) == "FailJob"
    assert action_for(rules, 75) == "Ignore"  # a new pod for that index, not counted
    assert [action_for(rules, code) for code in (1, 130, 137, 143)] == ["Count"] * 4
    assert parsed(gpu_job())["spec"]["backoffLimit"] == 4


def test_the_model_claim_is_mounted_read_only_at_the_models_directory():
    m = parsed(gpu_job())
    mounts = {v["name"]: v for v in the_container(m)["volumeMounts"]}
    assert mounts["model"] == {"name": "model", "mountPath": "/models/qwen", "readOnly": True}
    volumes = {v["name"]: v for v in m["spec"]["template"]["spec"]["volumes"]}
    assert volumes["model"]["persistentVolumeClaim"] == {"claimName": "models", "readOnly": True}


def test_a_cpu_study_requests_no_gpu_and_mounts_no_model_unasked():
    m = job_manifest(gpu_job(gpus_per_trial=0, model_pvc=None), MODEL)
    c = the_container(m)
    assert "nvidia.com/gpu" not in c["resources"]["limits"] and "--gpus-per-trial" not in c["command"]
    assert "model" not in {v["name"] for v in c["volumeMounts"]}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("gpus", [0, 1, 8])
def test_the_manifest_validates_against_the_api_schema(version, gpus):
    kw = {"model_mount": "/mnt/models", "runs_pvc": "runs"} if gpus == 8 else {}
    manifest = parsed(gpu_job(gpus_per_trial=gpus, **kw))
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
        ({"image": "reg/kvtune:1 --privileged"}, MODEL, "--image must be one word"),
        ({"model_mount": "models"}, MODEL, "--model-mount must be an absolute path"),
        ({}, "Qwen/Qwen2.5-7B", "--model-pvc needs --model-mount"),
        ({"runs_dir": "runs"}, MODEL, "--runs-dir must be an absolute path in the container"),
        ({"namespace": "Tuning_1"}, MODEL, "--namespace must be a Kubernetes namespace name"),
        ({"storage_secret": "My Secret"}, MODEL, "--secret must be a Kubernetes object name"),
        ({"runs_pvc": "runs/x"}, MODEL, "--runs-pvc must be a Kubernetes object name"),
        ({"storage_secret_key": "a b"}, MODEL, "--secret-key must be a Secret key"),
        ({"cpus": None}, MODEL, "--cpus-per-worker is needed"),
        ({"memory_mib": None}, MODEL, "--mem is needed"),
        ({"worker_args": ("--storage", "x")}, MODEL, "export-workers sets --storage itself"),
    ],
)
def test_missing_or_bad_options_are_one_line_errors(kw, model, message):
    with pytest.raises(SpecError, match=message):
        job_manifest(gpu_job(**kw), model)
