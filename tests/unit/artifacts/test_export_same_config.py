"""Issue 41, "artifacts that run as written": the printed best command line, the launch script and
every export carry the same argv and the same environment (a vLLM config's tuned
VLLM_CPU_OMP_THREADS_BIND was printed nowhere but in the script), and the container exports
reserve the CPUs the config was tuned on, saying where the figure came from.

Each format is parsed back with its own rules (the helpers of test_export.py). No process starts.
"""

from __future__ import annotations

import copy
import shlex

import pytest
import yaml

from kvtune.artifacts import export, launch_script
from kvtune.artifacts.cpu_resources import cpu_ranges, tuned_cpus
from kvtune.study.outcome import TrialOutcome
from tests.unit.artifacts.test_export import (
    NASTY_ENV,
    best,
    check_compose,
    check_k8s,
    parse_unit,
    results,
    sd_specifiers,
    sd_words,
    unescape_dollars,
    vllm_results,
)

VLLM_ENV = {"VLLM_CPU_OMP_THREADS_BIND": "0-1", "VLLM_CPU_KVCACHE_SPACE": "4", **NASTY_ENV}
DEVICE_ENV = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1"}


def vllm_trial() -> dict:
    t = copy.deepcopy(best())
    t["argv"] = ["/venv/bin/vllm", "serve", "/data/m", "--host", "127.0.0.1", "--port", "4000", "--max-num-seqs", "8"]
    t["env"] = dict(VLLM_ENV)
    return t


def split_command_line(line: str) -> tuple[dict[str, str], list[str]]:
    """A `VAR=value ... argv` line as bash reads it: the leading assignments, then the argv."""
    words = shlex.split(line)
    env: dict[str, str] = {}
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return env, words


def script_env(script: str) -> dict[str, str]:
    """The variables a launch script exports (shlex reads the quoting bash would)."""
    out = {}
    for line in script.replace("\\\n", " ").split("\nexport ")[1:]:
        (word,) = shlex.split(line.split("\nexec ", 1)[0])
        key, value = word.split("=", 1)
        out[key] = value
    return out


def every_format(t: dict, r: dict, host: str, port: int) -> dict[str, tuple[dict[str, str], list[str]]]:
    """(environment, argv) of the printed command line and of each export, parsed back."""
    got = {"command line": split_command_line(export.command_line(TrialOutcome.from_dict(t), host, port))}
    script = export.render("bash", t, r, host, port)
    got["bash"] = script_env(script), launch_script.parse_exec_argv(script)
    svc = parse_unit(export.render("systemd", t, r, host, port))["Service"]
    sd_env = dict(sd_specifiers(w).split("=", 1) for v in svc.get("Environment", []) for w in sd_words(v))
    got["systemd"] = sd_env, [unescape_dollars(sd_specifiers(w)) for w in sd_words(svc["ExecStart"][0])]
    compose = check_compose(yaml.safe_load(export.render("compose", t, r, host, port)))
    got["compose"] = {k: unescape_dollars(v) for k, v in (compose.get("environment") or {}).items()}, compose["command"]
    dep, _ = check_k8s(list(yaml.safe_load_all(export.render("k8s", t, r, host, port))), port)
    c = dep["spec"]["template"]["spec"]["containers"][0]
    got["k8s"] = {e["name"]: unescape_dollars(e["value"]) for e in c.get("env", [])}, c["args"]
    return got


def test_every_format_and_the_printed_command_line_carry_the_tuned_environment():
    t, r = vllm_trial(), vllm_results(results())
    got = every_format(t, r, "0.0.0.0", 8000)
    want_argv = export.deploy_argv(t["argv"], "0.0.0.0", 8000)
    for fmt, (env, argv) in got.items():
        assert env == VLLM_ENV, fmt
        if fmt in ("compose", "k8s"):  # the image's entrypoint is `vllm serve`; the model under /models
            assert [a.replace("/models/m", "/data/m") for a in argv] == want_argv[2:], fmt
        else:
            assert argv == want_argv, fmt
    line = export.command_line(TrialOutcome.from_dict(t), "0.0.0.0", 8000)
    assert line.startswith("LLAMA_ARG_N=1 VLLM_CPU_KVCACHE_SPACE=4 VLLM_CPU_OMP_THREADS_BIND=0-1 WEIRD=")


def test_the_gpu_pinning_is_on_the_command_line_as_in_the_launch_script_and_not_in_containers():
    t, r = vllm_trial(), vllm_results(results())
    t["device_env"] = dict(DEVICE_ENV)
    got = every_format(t, r, "0.0.0.0", 8000)
    for fmt in ("command line", "bash", "systemd"):  # the same GPU numbers on the same host
        assert got[fmt][0] == {**VLLM_ENV, **DEVICE_ENV}, fmt
    for fmt in ("compose", "k8s"):  # a container sees its reserved GPUs as its own 0..G-1
        assert got[fmt][0] == VLLM_ENV, fmt


def test_a_config_without_environment_prints_the_bare_argv():
    t = best()
    assert export.command_line(TrialOutcome.from_dict(t), "127.0.0.1", 8080) == shlex.join(
        export.deploy_argv(t["argv"], "127.0.0.1", 8080)
    )


# ---- CPUs ---------------------------------------------------------------------------------------
def compose_and_k8s(t: dict, r: dict) -> tuple[dict, dict, str, str]:
    compose_text = export.render("compose", t, r, "0.0.0.0", 8080)
    k8s_text = export.render("k8s", t, r, "0.0.0.0", 8080)
    dep, _ = check_k8s(list(yaml.safe_load_all(k8s_text)), 8080)
    return (
        check_compose(yaml.safe_load(compose_text)),
        dep["spec"]["template"]["spec"]["containers"][0].get("resources"),
        compose_text,
        k8s_text,
    )


def test_containers_reserve_the_cpus_of_the_studys_hardware_and_say_so():
    svc, res, compose_text, k8s_text = compose_and_k8s(best(), results())  # hardware.cpus: 2
    assert svc["cpus"] == 2 and "cpuset" not in svc
    assert res == {"limits": {"cpu": "2"}, "requests": {"cpu": "2"}}
    where = "as tuned: the study's hardware fingerprint (results.json hardware.cpus: 2)"
    assert f"# CPUs: cpus 2, {where}\n" in compose_text
    assert f"# CPUs: cpu requests = limits = 2, {where}\n" in k8s_text


def test_a_trial_pinned_to_a_cpu_set_reserves_that_set():
    t = copy.deepcopy(best())
    t["cpus"] = [4, 5, 6, 7]  # a worker's slot on a bigger host than the fingerprint's 2
    svc, res, compose_text, k8s_text = compose_and_k8s(t, results())
    assert svc["cpus"] == 4 and svc["cpuset"] == "4-7"
    assert res["limits"]["cpu"] == res["requests"]["cpu"] == "4"
    assert "pinned to CPUs 4-7 (results.json trial 3 'cpus')" in compose_text
    assert "cpuset 4-7 (the tuning host's CPU numbers: drop it on another host)" in compose_text
    assert "pinned to CPUs 4-7" in k8s_text


def test_a_cgroup_quota_below_the_cpu_count_is_what_the_server_had():
    r = results()
    r["hardware"]["cpu_quota"] = 1.5
    svc, res, compose_text, _ = compose_and_k8s(best(), r)
    assert svc["cpus"] == 1.5 and res["limits"]["cpu"] == res["requests"]["cpu"] == "1500m"
    assert "capped by the cgroup CPU quota it ran under (hardware.cpu_quota: 1.5)" in compose_text


def test_a_study_set_up_for_workers_reserves_the_cpus_per_trial():
    r = results()
    r["hardware"].update(cpus=8, host_cpus=64)
    svc, res, compose_text, _ = compose_and_k8s(best(), r)
    assert svc["cpus"] == 8 and res["limits"]["cpu"] == "8"
    assert "hardware.cpus: 8 per trial (a study set up for workers)" in compose_text


def test_gpus_and_cpus_share_the_limits():
    t, r = best(), results()
    r["hardware"] = {**r["hardware"], "accelerator": "NVIDIA H100 80GB HBM3", "gpus": ["H100"]}
    _, res, _, _ = compose_and_k8s(t, r)
    assert res == {"limits": {"cpu": "2", "nvidia.com/gpu": 1}, "requests": {"cpu": "2"}}


def test_results_that_do_not_say_reserve_no_cpus():
    r = results()
    del r["hardware"]["cpus"]
    svc, res, compose_text, _ = compose_and_k8s(best(), r)
    assert "cpus" not in svc and "cpu" not in (res or {}).get("limits", {}) and "# CPUs:" not in compose_text
    assert tuned_cpus(TrialOutcome.from_dict(best()), {}) is None


@pytest.mark.parametrize(
    "cpus, text", [([3], "3"), ([0, 1, 2, 3], "0-3"), ([8, 0, 2, 1, 3, 10, 9], "0-3,8-10"), ([1, 3, 5], "1,3,5")]
)
def test_cpu_ranges(cpus, text):
    assert cpu_ranges(cpus) == text
