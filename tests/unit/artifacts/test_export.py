"""Every export format carries exactly the winning argv: parsed back with each format's own rules.

bash through the launch script's parser (and bash itself), systemd through a parser of systemd's
quoting (plus `systemd-analyze verify` where it exists), compose and Kubernetes through a YAML
parser plus structural schema checks. Only --host/--port change, and inside containers the model
path (mounted read-only at /models); a model path full of shell syntax arrives byte-identical.

The tests here start no process; those that do are in tests/integration/artifacts/test_export.py.
"""

import copy
import json
import posixpath
import re
from pathlib import Path

import pytest
import yaml

from kvtune.artifacts import export, launch_script
from kvtune.artifacts import overview as ov
from kvtune.errors import SpecError
from kvtune.launchers import llama_server
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
NASTY = '/tmp/my models/it\'s "$(touch /tmp/pwned)"; rm -rf ~ `id` 100%h \\x $HOME ${PATH}.gguf'
NASTY_ENV = {"WEIRD": "a b;$(x) \"q\" 's' %h \\ $HOME\tnext\nline", "LLAMA_ARG_N": "1"}
DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def results() -> dict:
    return json.loads((DATA / "results_small.json").read_text())


def best() -> dict:
    return ov.pick_trial(results()).to_dict()


def nasty_trial(binary: str = "/opt/llama server/bin/llama-server") -> dict:
    t = copy.deepcopy(best())
    argv = list(t["argv"])
    argv[0] = binary
    argv[argv.index("--model") + 1] = NASTY
    t["argv"], t["env"] = argv, dict(NASTY_ENV)
    return t


def gpu_results() -> dict:
    r = results()
    r["hardware"] = {**r["hardware"], "accelerator": "NVIDIA H100 80GB HBM3", "gpus": ["H100"]}
    return r


def vllm_results(r: dict) -> dict:
    r["spec"]["backend"] = "vllm"
    return r


def containerized(argv: list[str], port: int) -> list[str]:
    """What a container must run: the deploy argv (0.0.0.0, port) with the model under /models."""
    out = export.deploy_argv(argv, "0.0.0.0", port)
    i = out.index("--model") + 1
    out[i] = "/models/" + posixpath.basename(out[i])
    return out


def unescape_dollars(s: str) -> str:
    # compose ($VAR) and Kubernetes ($(VAR)) both read $$ as a literal $; a lone $ would expand
    assert re.search(r"(?<!\$)\$(?!\$)", s.replace("$$", "")) is None, s
    return s.replace("$$", "$")


# ---- deploy_argv -------------------------------------------------------------------------------
def test_deploy_argv_changes_only_host_and_port():
    argv = best()["argv"]
    out = export.deploy_argv(argv, "0.0.0.0", 9000)
    assert len(out) == len(argv)
    changed = [i for i, (a, b) in enumerate(zip(argv, out)) if a != b]
    assert [out[i - 1] for i in changed] == ["--host", "--port"]
    assert out[out.index("--host") + 1] == "0.0.0.0" and out[out.index("--port") + 1] == "9000"


def test_deploy_argv_equals_form_and_missing_flags():
    assert export.deploy_argv(["srv", "--host=127.0.0.1", "--port=1", "-x"], "h", 2) == [
        "srv",
        "--host=h",
        "--port=2",
        "-x",
    ]
    assert export.deploy_argv(["srv", "--model", "m"], "h", 2) == ["srv", "--model", "m", "--host", "h", "--port", "2"]


# ---- systemd ---------------------------------------------------------------------------------
_C_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
    "s": " ",
}


def sd_words(value: str) -> list[str]:
    """systemd's extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE), word by word."""
    words, i, n = [], 0, len(value)
    while True:
        while i < n and value[i] in " \t\n":
            i += 1
        if i >= n:
            return words
        word, quote = [], None
        while i < n and (quote or value[i] not in " \t\n"):
            c = value[i]
            if c == "\\":
                e = value[i + 1]
                if e == "x":
                    word.append(chr(int(value[i + 2 : i + 4], 16)))
                    i += 4
                    continue
                assert e in _C_ESCAPES, f"systemd ignores the unknown escape \\{e}"
                word.append(_C_ESCAPES[e])
                i += 2
            elif quote is None and c in "'\"":
                quote, i = c, i + 1
            elif c == quote:
                quote, i = None, i + 1
            else:
                word.append(c)
                i += 1
        assert quote is None, "unbalanced quoting"
        words.append("".join(word))


def sd_specifiers(word: str) -> str:
    """Resolve %% (any other specifier would be expanded by systemd: fail)."""
    assert re.search(r"%[^%]|%$", word.replace("%%", "")) is None, word
    return word.replace("%%", "%")


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in text.replace("\\\n", " ").splitlines():
        if not line.strip() or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip()[1:-1], {})
            continue
        key, _, value = line.partition("=")
        current.setdefault(key, []).append(value)
    return sections


def test_systemd_unit_carries_the_exact_argv_and_environment():
    t = nasty_trial()
    unit = parse_unit(export.render("systemd", t, results(), "0.0.0.0", 9000))
    assert set(unit) == {"Unit", "Service", "Install"}
    svc = unit["Service"]
    argv = [unescape_dollars(sd_specifiers(w)) for w in sd_words(svc["ExecStart"][0])]
    assert argv == export.deploy_argv(t["argv"], "0.0.0.0", 9000)
    env = dict(sd_specifiers(w).split("=", 1) for v in svc["Environment"] for w in sd_words(v))
    assert env == NASTY_ENV
    assert svc["Restart"] == ["on-failure"] and unit["Install"]["WantedBy"] == ["multi-user.target"]
    assert "trial 3" in unit["Unit"]["Description"][0]


def test_systemd_header_comment():
    text = export.render("systemd", best(), results(), "127.0.0.1", 8080)
    assert text.startswith("# Generated by kvtune.")
    assert "# tuned on 127.0.0.1 (a free port per trial); this serves on 127.0.0.1:8080" in text


def test_systemd_refuses_a_binary_path_it_cannot_express():
    with pytest.raises(SpecError, match="systemd"):
        export.render("systemd", nasty_trial("/opt/$x/llama-server"), results())


# ---- docker compose --------------------------------------------------------------------------
SERVICE_KEYS = {
    "image",
    "entrypoint",
    "command",
    "ports",
    "environment",
    "volumes",
    "restart",
    "ipc",
    "deploy",
    "cpus",
    "cpuset",
}


def check_compose(doc: dict) -> dict:
    assert set(doc) == {"services"} and len(doc["services"]) == 1
    ((name, svc),) = doc["services"].items()
    assert DNS1123.match(name)
    assert set(svc) <= SERVICE_KEYS and {"image", "command", "ports", "restart"} <= set(svc)
    assert isinstance(svc["image"], str) and all(isinstance(a, str) for a in svc["command"])
    for p in svc["ports"]:
        assert set(p) <= {"target", "published", "host_ip", "protocol"} and isinstance(p["target"], int)
        assert isinstance(p["published"], str) and p["protocol"] == "tcp"
    for v in svc.get("volumes", []):
        assert v["type"] == "bind" and v["read_only"] is True and v["target"] == "/models"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in svc.get("environment", {}).items())
    assert svc["restart"] in ("no", "always", "on-failure", "unless-stopped")
    assert isinstance(svc.get("cpus", 1), (int, float)) and isinstance(svc.get("cpuset", ""), str)
    return svc


def test_compose_llama_server_on_cpu():
    t = nasty_trial()
    svc = check_compose(yaml.safe_load(export.render("compose", t, results(), "127.0.0.1", 9000)))
    assert svc["image"] == llama_server.IMAGE and "entrypoint" not in svc and "deploy" not in svc
    assert svc["cpus"] == 2 and "cpuset" not in svc  # the study's 2 CPUs; the trial was not pinned
    assert [unescape_dollars(a) for a in svc["command"]] == containerized(t["argv"], 9000)[1:]
    assert svc["ports"] == [{"target": 9000, "published": "9000", "protocol": "tcp", "host_ip": "127.0.0.1"}]
    assert [unescape_dollars(v["source"]) for v in svc["volumes"]] == [posixpath.dirname(NASTY)]
    assert {k: unescape_dollars(v) for k, v in svc["environment"].items()} == NASTY_ENV


def test_compose_reserves_the_gpu_when_the_study_had_one():
    svc = check_compose(yaml.safe_load(export.render("compose", best(), gpu_results(), "0.0.0.0", 8080)))
    assert svc["image"] == llama_server.IMAGE_GPU
    (dev,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert dev["driver"] == "nvidia" and dev["count"] == 1 and dev["capabilities"] == ["gpu"]
    assert "host_ip" not in svc["ports"][0]


@pytest.mark.parametrize(
    "head, skip, entrypoint",
    [
        (["/venv/bin/vllm", "serve", "/data/llama 3/"], 2, None),
        (["/venv/bin/python3", "-m", "vllm.entrypoints.cli.main", "serve", "/data/llama 3/"], 4, None),
        (
            ["/venv/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/data/llama 3/"],
            3,
            ["python3", "-m", "vllm.entrypoints.openai.api_server"],
        ),
    ],
)
def test_compose_and_k8s_for_vllm(head, skip, entrypoint):
    t = copy.deepcopy(best())
    t["argv"] = [*head, "--host", "127.0.0.1", "--port", "41234", "--max-num-seqs", "64", "--enforce-eager"]
    r = vllm_results(gpu_results())
    r["backend_version"] = "vllm 0.11.0"
    want = export.deploy_argv(t["argv"], "0.0.0.0", 8000)
    want[want.index("/data/llama 3/")] = "/models/llama 3"
    svc = check_compose(yaml.safe_load(export.render("compose", t, r, "0.0.0.0", 8000)))
    assert svc["image"] == "vllm/vllm-openai:v0.11.0" and svc.get("entrypoint") == entrypoint
    assert svc["command"] == want[skip:] and svc["ipc"] == "host"
    assert svc["volumes"][0]["source"] == "/data"
    dep, _ = check_k8s(list(yaml.safe_load_all(export.render("k8s", t, r, "0.0.0.0", 8000))), 8000)
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["args"] == want[skip:] and c.get("command") == entrypoint
    assert c["resources"] == {"limits": {"cpu": "2", "nvidia.com/gpu": 1}, "requests": {"cpu": "2"}}


def test_vllm_hugging_face_model_id_is_not_mounted():
    t = copy.deepcopy(best())
    t["argv"] = ["vllm", "serve", "Qwen/Qwen2.5-0.5B", "--port", "1"]
    r = vllm_results(results())
    r["backend_version"] = None
    svc = check_compose(yaml.safe_load(export.render("compose", t, r, "0.0.0.0", 8000)))
    assert svc["command"][0] == "Qwen/Qwen2.5-0.5B" and "volumes" not in svc
    assert svc["image"] == "vllm/vllm-openai:latest"  # no version recorded: no tag to pin


def test_the_backend_comes_from_the_results_not_from_the_argv():
    # a llama-server binary renamed "vllm" is still llama-server: its image, its argv tail
    t = copy.deepcopy(best())
    t["argv"] = ["/opt/vllm", *t["argv"][1:]]
    svc = check_compose(yaml.safe_load(export.render("compose", t, results(), "0.0.0.0", 9000)))
    assert svc["image"] == llama_server.IMAGE and "ipc" not in svc
    assert [unescape_dollars(a) for a in svc["command"]] == containerized(t["argv"], 9000)[1:]
    r = results()
    del r["spec"]["backend"]  # hand-written results: llama-server, the default backend
    assert export.backend(r) == "llama-server"


def test_containers_need_a_known_server():
    t = copy.deepcopy(best())
    r = results()
    r["spec"]["backend"] = "some-server"
    for fmt in ("compose", "k8s"):
        with pytest.raises(SpecError, match="cannot containerize: unknown backend 'some-server'"):
            export.render(fmt, t, r)
    t["argv"] = ["/usr/bin/some-server", "--port", "1"]  # vLLM knows its own argv forms only
    with pytest.raises(SpecError, match="cannot containerize '/usr/bin/some-server'"):
        export.render("compose", t, vllm_results(results()))
    t["argv"] = ["/usr/bin/llama-server", "--port", "1"]
    with pytest.raises(SpecError, match="no model argument"):
        export.render("k8s", t, results())


# ---- Kubernetes -------------------------------------------------------------------------------
def check_k8s(docs: list, port: int) -> tuple[dict, dict]:
    assert [d["kind"] for d in docs] == ["Deployment", "Service"]
    dep, svc = docs
    assert dep["apiVersion"] == "apps/v1" and svc["apiVersion"] == "v1"
    for d in docs:
        assert DNS1123.match(d["metadata"]["name"]) and isinstance(d["metadata"]["labels"], dict)
    spec = dep["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert isinstance(spec["replicas"], int)
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["selector"].items() <= labels.items()
    pod = spec["template"]["spec"]
    (c,) = pod["containers"]
    assert DNS1123.match(c["name"]) and isinstance(c["image"], str)
    assert all(isinstance(a, str) for a in c["args"])
    (cport,) = c["ports"]
    (sport,) = svc["spec"]["ports"]
    assert cport["containerPort"] == sport["targetPort"] == port and sport["port"] == port
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for m in c.get("volumeMounts", []):
        assert m["name"] in volumes
        if m["mountPath"] == "/models":
            assert m["readOnly"] is True
            assert volumes[m["name"]]["hostPath"]["path"].startswith("/")
    for e in c.get("env", []):
        assert set(e) == {"name", "value"} and isinstance(e["value"], str)
    return dep, svc


def test_k8s_llama_server():
    t = nasty_trial()
    text = export.render("k8s", t, results(), "0.0.0.0", 9000)
    dep, svc = check_k8s(list(yaml.safe_load_all(text)), 9000)
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["image"] == llama_server.IMAGE and "command" not in c
    assert c["resources"] == {"limits": {"cpu": "2"}, "requests": {"cpu": "2"}}  # no GPU: CPUs only
    assert [unescape_dollars(a) for a in c["args"]] == containerized(t["argv"], 9000)[1:]
    assert {e["name"]: unescape_dollars(e["value"]) for e in c["env"]} == NASTY_ENV
    assert pod["volumes"] == [{"name": "model", "hostPath": {"path": posixpath.dirname(NASTY), "type": "Directory"}}]
    assert svc["spec"]["type"] == "ClusterIP"


def test_k8s_gpu_limit():
    dep, _ = check_k8s(list(yaml.safe_load_all(export.render("k8s", best(), gpu_results(), "0.0.0.0", 8080))), 8080)
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 1 and c["image"] == llama_server.IMAGE_GPU


# ---- all formats ------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", export.FORMATS)
def test_every_format_names_the_study_and_changes_nothing_else(fmt):
    t = best()
    text = export.render(fmt, t, results(), "0.0.0.0", 9000)
    assert "study: s2, trial 3" in text
    for a in t["argv"][t["argv"].index("--parallel") :]:  # every tuned flag and value, verbatim
        assert a in text


def test_unknown_format():
    with pytest.raises(SpecError, match="unknown export format 'helm'"):
        export.render("helm", best(), results())


# ---- GPUs: the trial's slot, from recorded NVML answers ------------------------------------------
NVML = DATA / "nvml"


INJECTED_CPU = "Injected Test CPU 9000"  # not any machine's name, so the assertion cannot pass vacuously


def recorded_results(name: str, backend: str = "llama-server") -> dict:
    """results() as measured on a host whose GPUs are the recording `name` (tests/unit/data/nvml)."""
    from kvtune import hardware
    from kvtune.testing.nvml_recorded import Recorded

    r = results()
    r["hardware"] = hardware.fingerprint(
        Recorded(json.loads((NVML / f"{name}.json").read_text())), cgroup=Path("/nonexistent-cgroup")
    )
    r["hardware"]["cpu"] = INJECTED_CPU  # the fingerprint read this host's CPU: never assert on that
    r["spec"]["backend"] = backend
    return r


def slot_trial(gpus: str) -> dict:
    t = copy.deepcopy(best())
    t["device_env"] = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": gpus}
    return t


def test_a_trial_on_two_of_eight_h100s_reserves_two_and_the_script_pins_them():
    r, t = recorded_results("h100_sxm_x8_nvlink"), slot_trial("2,3")
    svc = check_compose(yaml.safe_load(export.render("compose", t, r, "0.0.0.0", 8080)))
    (dev,) = svc["deploy"]["resources"]["reservations"]["devices"]
    assert dev["count"] == 2 and "CUDA_VISIBLE_DEVICES" not in (svc.get("environment") or {})
    dep, _ = check_k8s(list(yaml.safe_load_all(export.render("k8s", t, r, "0.0.0.0", 8080))), 8080)
    c = dep["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == 2 and "env" not in c
    script = export.render("bash", t, r, "0.0.0.0", 8080)
    assert "export CUDA_VISIBLE_DEVICES=2,3\n" in script and "export CUDA_DEVICE_ORDER=PCI_BUS_ID\n" in script
    assert launch_script.parse_exec_argv(script) == export.deploy_argv(t["argv"], "0.0.0.0", 8080)
    assert f"# hardware: {INJECTED_CPU}" in script and "none (CPU)" not in script  # the recorded GPUs
    assert "8 x NVIDIA H100 80GB HBM3 over NVLink, compute 9.0, CUDA 12.2, driver 535.129.03" in script
    assert "# GPUs: measured with CUDA_VISIBLE_DEVICES=2,3" in script
    unit = parse_unit(export.render("systemd", t, r, "0.0.0.0", 8080))
    env = dict(sd_specifiers(w).split("=", 1) for v in unit["Service"]["Environment"] for w in sd_words(v))
    assert env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "2,3"}


@pytest.mark.parametrize(
    "name, count", [("h100_sxm_x1", 1), ("h100_sxm_x8_nvlink", 8), ("rtx4090_x2_pcie", 2), ("a100_70pct_used", 1)]
)
def test_a_trial_without_a_slot_reserves_every_gpu_of_the_study(name, count):
    r = recorded_results(name, "vllm")
    r["backend_version"] = "vllm 0.11.0"
    t = copy.deepcopy(best())
    t["argv"] = ["/venv/bin/vllm", "serve", "/data/m", "--host", "127.0.0.1", "--port", "4000"]
    svc = check_compose(yaml.safe_load(export.render("compose", t, r, "0.0.0.0", 8000)))
    assert svc["deploy"]["resources"]["reservations"]["devices"][0]["count"] == count
    script = export.render("bash", t, r, "0.0.0.0", 8000)
    assert "CUDA_VISIBLE_DEVICES" not in script and f"{count} x NVIDIA" in script


def test_a_cpu_study_reserves_no_gpu_and_sets_no_device():
    script = export.render("bash", best(), results(), "0.0.0.0", 8000)
    assert "CUDA_VISIBLE_DEVICES" not in script and "# hardware: AMD EPYC, 2 CPUs, 23.5 GiB RAM, none (CPU)" in script
