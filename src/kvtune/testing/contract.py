"""The launcher contract suite: the checks every backend must pass, as plain functions.

A backend is one `Launcher` subclass; this is its checklist. A test hands the suite a
`ContractCase` (a launcher built without starting anything, the argv its defaults must produce,
candidates it must accept and reject, real log excerpts and what they must be classified as), and
the checks assert that every contract method exists and returns the right type, that the empty
candidate renders the baseline argv, that every argv survives the launch script (rendered, then
parsed back with shlex), that precheck refuses what it must and accepts what it must, that the
informed start stays inside the search space, that the log excerpts are classified as expected,
and that the argv containerizes. All of it runs at unit-test speed: no server is started.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

from kvtune.artifacts import launch_script
from kvtune.kinds import KnobKind
from kvtune.knobs import Candidate, Knob
from kvtune.launchers.base import MODELS_DIR, ContainerSpec, Launcher
from kvtune.workload import Workload

ENV_PREFIX = "env:"  # as tuner.space spells environment knobs
PORT, HOST = 8000, "127.0.0.1"


@dataclass(frozen=True)
class LogCase:
    """A real log excerpt of a failed start and how the launcher must classify it."""

    path: Path
    returncode: int | None
    expected: str  # the one-line classification starts with this


@dataclass(frozen=True)
class ContractCase:
    """What a backend's test gives the suite. ``baseline_argv``: the argv of `Candidate()` on
    127.0.0.1:8000 (binary + model + host/port, plus the flags the backend always sets)."""

    launcher: Launcher
    baseline_argv: list[str]
    workload: Workload = field(default_factory=Workload)
    accepted: tuple[Candidate, ...] = ()
    rejected: tuple[tuple[Candidate, str], ...] = ()  # (candidate, a fragment of the reason)
    logs: tuple[LogCase, ...] = ()
    cpu_count: int = 2


def _who(launcher: Launcher) -> str:
    return f"{type(launcher).__name__}({launcher.name})"


def check_interface(case: ContractCase) -> None:
    """Every contract method exists and returns the right type."""
    lau, w, who = case.launcher, case.workload, _who(case.launcher)
    assert isinstance(lau, Launcher), f"{who} is not a Launcher"
    assert isinstance(lau.name, str) and lau.name, who
    assert isinstance(lau.health_path, str) and lau.health_path.startswith("/"), who
    assert isinstance(lau.model_path, str) and lau.model_path, who
    assert isinstance(lau.scrapes_metrics, bool), who
    assert isinstance(lau.version(), str) and lau.version(), who
    assert isinstance(lau.served_model_name(), str) and lau.served_model_name(), who
    assert isinstance(lau.request_extra_body(), dict), who
    assert isinstance(lau.startup_facts(""), dict), who
    assert lau.startup_split("") == {}, f"{who}: an empty log names no start-up phase"
    env = lau.server_environment()
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()), who
    reason = lau.classify_failure(1, "")
    assert isinstance(reason, str) and reason and "\n" not in reason, who
    knobs = lau.default_knobs(w, case.cpu_count)
    assert knobs and all(isinstance(k, Knob) and isinstance(k.kind, KnobKind) for k in knobs), who
    assert len({k.name for k in knobs}) == len(knobs), f"{who}: a knob is listed twice"
    for k in knobs:
        tune, _forced = lau.conditional(k.name, {})
        assert isinstance(tune, bool), (who, k.name)
    assert isinstance(lau.informed_start(knobs, w), dict), who
    assert lau.environment(Candidate(env={"KVTUNE_CONTRACT": "1"}))["KVTUNE_CONTRACT"] == "1", who
    spec = type(lau).container_spec(lau.command(Candidate(), PORT, "0.0.0.0"), 0, lau.version())
    assert isinstance(spec, ContainerSpec) and spec.image, who
    assert all(isinstance(a, str) for a in spec.args), who


def check_baseline(case: ContractCase) -> None:
    """The empty candidate is the server's defaults: the baseline argv, no environment of its
    own, and it always launches (precheck never refuses it)."""
    lau, who = case.launcher, _who(case.launcher)
    argv = lau.command(Candidate(), PORT, HOST)
    assert argv == case.baseline_argv, f"{who}: baseline argv {argv} != {case.baseline_argv}"
    assert lau.precheck(Candidate(), case.workload) is None, who


def _exports(script: str) -> dict[str, str]:
    """The `export K=V` lines of a rendered launch script, read back as a shell would."""
    head = script.split("\nset -euo pipefail\n", 1)[1].split("\nexec ", 1)[0]
    words = shlex.split(head)
    assert words[::2] == ["export"] * (len(words) // 2), words
    return dict(w.split("=", 1) for w in words[1::2])


def check_round_trip(launcher: Launcher, candidate: Candidate, port: int = PORT, host: str = HOST) -> list[str]:
    """command() is pure, names the port and host, and the launch script carries argv and
    environment byte-identical (parsed back with shlex). Returns the argv."""
    who = _who(launcher)
    argv = launcher.command(candidate, port, host)
    assert argv == launcher.command(candidate, port, host), f"{who}: command() is not pure"
    assert all(isinstance(a, str) and a for a in argv), (who, argv)
    assert argv[argv.index("--port") + 1] == str(port) and argv[argv.index("--host") + 1] == host, who
    env = launcher.environment(candidate)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()), (who, env)
    script = launch_script.render(argv, env, ["contract check"])
    assert launch_script.parse_exec_argv(script) == argv, f"{who}: the launch script changed argv"
    assert _exports(script) == env, f"{who}: the launch script changed the environment"
    return argv


def check_accepted(case: ContractCase) -> None:
    """Candidates the backend must accept pass precheck and round-trip."""
    for c in case.accepted:
        reason = case.launcher.precheck(c, case.workload)
        assert reason is None, f"{_who(case.launcher)} refused {c}: {reason}"
        check_round_trip(case.launcher, c)


def check_rejected(case: ContractCase) -> None:
    """precheck refuses what the server would refuse, in one line that says why."""
    for c, fragment in case.rejected:
        reason = case.launcher.precheck(c, case.workload)
        assert reason and fragment in reason, f"{_who(case.launcher)} on {c}: {reason!r}"
        assert "\n" not in reason, reason


def _alone(knob: Knob, value: object) -> Candidate:
    if knob.name.startswith(ENV_PREFIX):
        return Candidate(env={knob.name[len(ENV_PREFIX) :]: str(value)})
    return Candidate(flags={knob.name: value})


def _values(knob: Knob) -> tuple:
    if knob.kind == KnobKind.CHOICES:
        return tuple(knob.choices)
    if knob.kind == KnobKind.FIXED:
        return (knob.value,)
    return (knob.low, knob.high)


def check_default_space(case: ContractCase) -> None:
    """Every value of every default knob, set alone, passes precheck and round-trips: the
    search space never proposes what the backend itself refuses."""
    lau = case.launcher
    for knob in lau.default_knobs(case.workload, case.cpu_count):
        for value in _values(knob):
            c = _alone(knob, int(value) if knob.kind == KnobKind.INT else value)
            reason = lau.precheck(c, case.workload)
            assert reason is None, f"{_who(lau)}: default {knob.name}={value!r} refused: {reason}"
            check_round_trip(lau, c)


def check_server_defaults(case: ContractCase) -> None:
    """`server_defaults()` names only knobs the backend tunes (a tie counts the flags a config
    changes from them: a default of a flag nobody tunes would count nothing), and its baseline,
    which sets none of them, changes none."""
    lau = case.launcher
    defaults = lau.server_defaults()
    assert isinstance(defaults, dict), _who(lau)
    tuned = {k.name for k in lau.default_knobs(case.workload, case.cpu_count)}
    assert set(defaults) <= tuned, f"{_who(lau)}: server_defaults of untuned flags {sorted(set(defaults) - tuned)}"


def check_informed_start(case: ContractCase) -> None:
    """The informed start names only tuned knobs, with values inside their domains."""
    lau = case.launcher
    knobs = {k.name: k for k in lau.default_knobs(case.workload, case.cpu_count)}
    for name, value in lau.informed_start(list(knobs.values()), case.workload).items():
        k = knobs.get(name)
        assert k is not None and k.kind != KnobKind.FIXED, f"{_who(lau)}: guess for {name}"
        if k.kind == KnobKind.CHOICES:
            assert value in k.choices, (name, value, k.choices)
        else:
            assert k.low <= value <= k.high, (name, value, k.low, k.high)


def check_logs(case: ContractCase) -> None:
    """Real logs of failed starts are classified as one line with the expected text."""
    for log in case.logs:
        reason = case.launcher.classify_failure(log.returncode, log.path.read_text(errors="replace"))
        assert reason.startswith(log.expected), f"{log.path.name}: {reason!r}"
        assert "\n" not in reason and len(reason) <= 400, reason


def check_container(case: ContractCase) -> None:
    """The deployed argv containerizes: the container's args are the argv's tail word for word,
    except the model path, which (when mounted) becomes a path under `MODELS_DIR`."""
    lau = case.launcher
    for c in (Candidate(), *case.accepted):
        argv = lau.command(c, PORT, "0.0.0.0")
        spec = type(lau).container_spec(argv, 1, lau.version())
        assert spec.gpus == 1 and spec.health_path == lau.health_path, _who(lau)
        tail = list(spec.args)
        assert 0 < len(tail) <= len(argv), (argv, tail)
        diff = [(a, b) for a, b in zip(argv[-len(tail) :], tail) if a != b]
        if spec.model_dir is None:
            assert not diff, f"{_who(lau)}: container args differ from argv: {diff}"
        else:
            assert len(diff) == 1 and f"{MODELS_DIR}/" in diff[0][1], diff
            assert diff[0][0].startswith(spec.model_dir), (diff, spec.model_dir)


CHECKS = (
    check_interface,
    check_baseline,
    check_accepted,
    check_rejected,
    check_default_space,
    check_server_defaults,
    check_informed_start,
    check_logs,
    check_container,
)
