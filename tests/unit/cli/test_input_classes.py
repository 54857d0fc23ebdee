"""Every setting checked by class of mistake (issue 41), generated over the declarations: each
property iterates `all_settings()` (and the flags of `kvtune run` and `kvtune bench` that set
one), so a new setting is covered the day it is declared. The classes: a number that is
negative, zero, past its declared most or not finite; a value of the wrong type; an empty value;
text that is not text (a byte that was not UTF-8, a control character); a setting given without
the one it applies beside (a trace's keys without a trace). Each goes through the
real path a user takes: `--set KEY=VALUE`, the study file, and the front-door flag where the
setting has one (`run_options` for kvtune run, `bench_workload` for kvtune bench: what the CLI
calls before anything starts). The refusal must be a `KvtuneError` (one line, exit 2) that opens
with what the user typed: the key when they wrote the key, the flag when they typed the flag.
No server, no process: these read and check only.

The table rows of tests/integration/cli/test_bad_input*.py stay as examples run end to end;
`benchmarks/bad_input.py` times them by class."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvtune.cli.bench import bench_workload
from kvtune.cli.bench_flags import BenchFlags
from kvtune.cli.flag_record import with_defaults
from kvtune.cli.run import run_options
from kvtune.cli.run_flags import RunFlags
from kvtune.errors import KvtuneError
from kvtune.study.settings import Setting, all_settings, of_field
from kvtune.tuner.multi_backend import parse_backends
from kvtune.tuner.session import study_spec

#: Where a setting is read at all: the settings it needs beside it (a trace's keys need a trace,
#: multi-turn's need conversations). Without them the refusal is the clash, not the value.
APPLIES_WITH: dict[str, list[str]] = {
    "workload.rate": ["workload.mode=open"],
    "workload.burstiness": ["workload.mode=open", "workload.rate=1", "workload.arrival=gamma"],
    "workload.shared_prefix_fraction": ["workload.shared_prefix_tokens=16"],
    "workload.shared_prefix_tokens": ["workload.shared_prefix_fraction=0.5"],
    "workload.shared_prefix_groups": ["workload.shared_prefix_fraction=0.5", "workload.shared_prefix_tokens=16"],
    "workload.think_spread": ["workload.multiturn=true", "workload.think_time_s=2"],
    "cpus_per_trial": ["setup_only=true"],
    "warm_start_storage": ["warm_start=earlier"],
    **{
        s.key: ["workload.trace=azure-conv"]
        for s in all_settings()
        if s.key.startswith("workload.trace_") and s.key != "workload.trace_speed"
    },
    "workload.trace_speed": ["workload.trace=azure-conv"],
    **{
        f"workload.{name}": ["workload.multiturn=true"] for name in ("turns", "think_time_s", "conversation_max_tokens")
    },
}
#: Past this, a number declared without a most must still be refused (by its own check).
HUGE = 10**12
NUMBER_TYPES = ("integer", "number", "duration")


def numeric(s: Setting) -> bool:
    return s.type_name.startswith(NUMBER_TYPES)


def textual(s: Setting) -> bool:
    return s.type_name.startswith(("string", "list of strings"))


NUMBERS = [s for s in all_settings() if numeric(s)]
INTEGERS = [s for s in NUMBERS if s.type_name.startswith("integer")]
TEXTS = [s for s in all_settings() if textual(s)]
#: The flags of kvtune run / kvtune bench that set a setting: (record, field name, setting).
RUN_FLAGS = [(f.name, of_field(*f.metadata["setting"])) for f in fields(RunFlags) if f.metadata.get("setting")]
BENCH_FLAGS = [(f.name, of_field(*f.metadata["setting"])) for f in fields(BenchFlags) if f.metadata.get("setting")]
#: Examples per setting and class: every setting is drawn for every class on every run.
EXAMPLES = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def each(settings_: list[Setting]) -> Any:
    return pytest.mark.parametrize("s", settings_, ids=[s.key for s in settings_])


def as_yaml(value: Any) -> str:
    """`value` as `--set KEY=VALUE` writes it (YAML, one line)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, allow_unicode=True)
    return text.removesuffix("\n...\n").strip()


def context(s: Setting) -> list[str]:
    return [item for item in APPLIES_WITH.get(s.key, []) if not item.startswith(f"{s.key}=")]


def via_set(tmp: Path, s: Setting, value: Any, text: str | None = None) -> Any:
    """`kvtune run --set KEY=VALUE` up to the point where anything would start."""
    item = f"{s.key}={as_yaml(value) if text is None else text}"
    return run_options(with_defaults(RunFlags, runs_dir=str(tmp), set=[*context(s), item]), parse_backends([]))


def via_file(tmp: Path, s: Setting, value: Any) -> Any:
    """`kvtune run --study-file F`, F setting the key (under `workload:` for a workload key)."""
    data: dict[str, Any] = {}
    for item in [*context(s), f"{s.key}=PLACE"]:
        key, _, raw = item.partition("=")
        v = value if raw == "PLACE" else yaml.safe_load(raw)
        if key.startswith("workload."):
            data.setdefault("workload", {})[key.removeprefix("workload.")] = v
        else:
            data[key] = v
    f = tmp / "study.yaml"
    f.write_text(yaml.safe_dump(data, allow_unicode=True))
    return run_options(with_defaults(RunFlags, runs_dir=str(tmp), study_file=str(f)), parse_backends([]))


def via_run_flag(tmp: Path, name: str, s: Setting, value: Any) -> Any:
    given = str(value) if s.doc.duration else value  # typer hands a duration flag its text
    flags = with_defaults(RunFlags, **{"runs_dir": str(tmp), "set": context(s), name: given})
    return run_options(flags, parse_backends([]))


def via_bench_flag(name: str, s: Setting, value: Any) -> Any:
    return bench_workload(with_defaults(BenchFlags, url="http://127.0.0.1:9", **{name: value}))


def refusal(route: Any, *args: Any) -> str:
    """The one line a route refuses with (a KvtuneError: kvtune prints it, exit 2)."""
    with pytest.raises(KvtuneError) as e:
        route(*args)
    message = str(e.value)
    assert e.value.exit_code == 2 and "\n" not in message, message
    return message


def opens_with(message: str, name: str) -> bool:
    """`message` opens with the key or flag `name` (then a space, a colon, '=' or its end)."""
    return message.startswith(name) and message[len(name) : len(name) + 1] in ("", " ", ":", "=", ",")


def refused_by_name(route: Any, name: str, *args: Any) -> str:
    message = refusal(route, *args)
    assert opens_with(message, name) or opens_with(message, f"--set {name}"), (name, message)
    return message


def number_of(s: Setting, draw: Any, low: float, high: float) -> Any:
    """A value between `low` and `high` of the setting's own kind (an integer for an integer)."""
    if s.type_name.startswith("integer"):
        return draw(st.integers(math.ceil(low), math.floor(high)))
    return draw(st.floats(low, high, allow_nan=False, allow_infinity=False))


ROUTES = ["set", "file"]


def through(route: str, tmp: Path, s: Setting, value: Any) -> Any:
    return (via_set if route == "set" else via_file)(tmp, s, value)


# ---- numbers: negative, zero, past the most, not finite -------------------------------------


@each(NUMBERS)
@EXAMPLES
@given(route=st.sampled_from(ROUTES), data=st.data())
def test_a_negative_number_is_refused_under_its_key(tmp_path, s, route, data):
    value = number_of(s, data.draw, -(10**9), -1e-3)
    refused_by_name(through, s.key, route, tmp_path, s, value)


@each(NUMBERS)
@EXAMPLES
@given(route=st.sampled_from(ROUTES), data=st.data())
def test_a_number_past_its_most_is_refused_under_its_key(tmp_path, s, route, data):
    most = s.doc.most if s.doc.most is not None else HUGE
    value = number_of(s, data.draw, most + 1, max(most * 10**6, HUGE * 10))
    refused_by_name(through, s.key, route, tmp_path, s, value)


@each([s for s in NUMBERS if not s.type_name.startswith("integer")])
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_a_number_that_is_not_finite_is_refused_under_its_key(tmp_path, value, s, route):
    refused_by_name(through, s.key, route, tmp_path, s, value)


@pytest.mark.parametrize("s", NUMBERS, ids=[s.key for s in NUMBERS])
@pytest.mark.parametrize("route", ROUTES)
def test_zero_is_refused_under_its_key_or_kept_never_a_default(tmp_path, s, route):
    """0 is either a refusal naming the key (opening with it, or naming it in a clash with the
    setting it needs beside it), or the value the study runs with: never silently the default
    (a `value or default` would make `--set warmup_requests=0` mean 8)."""
    try:
        opts = through(route, tmp_path, s, 0)
    except KvtuneError as e:
        assert s.name in str(e) and "\n" not in str(e), str(e)
        return
    if s.section == "run":
        assert getattr(opts, s.field) == 0, s.key
        return
    spec = study_spec(opts)
    record = spec.workload if s.section == "workload" else spec
    assert getattr(record, s.field) == 0, f"{s.key}=0 became {getattr(record, s.field)!r}"


# ---- the same numbers typed as a flag: refused under the flag ----------------------------------

RUN_NUMBER_FLAGS = [(name, s) for name, s in RUN_FLAGS if numeric(s)]
BENCH_NUMBER_FLAGS = [(name, s) for name, s in BENCH_FLAGS if numeric(s)]


@pytest.mark.parametrize("name,s", RUN_NUMBER_FLAGS, ids=[n for n, _ in RUN_NUMBER_FLAGS])
@EXAMPLES
@given(data=st.data())
def test_a_bad_number_typed_as_a_run_flag_is_refused_under_the_flag(tmp_path, name, s, data):
    most = s.doc.most if s.doc.most is not None else HUGE
    value = data.draw(
        st.one_of(
            st.just(number_of(s, data.draw, -(10**9), -1e-3)), st.just(number_of(s, data.draw, most + 1, most * 100))
        )
    )
    refused_by_name(via_run_flag, s.doc.run_flag, tmp_path, name, s, value)


@pytest.mark.parametrize("name,s", BENCH_NUMBER_FLAGS, ids=[n for n, _ in BENCH_NUMBER_FLAGS])
@EXAMPLES
@given(data=st.data())
def test_a_bad_number_typed_as_a_bench_flag_is_refused_under_the_flag(name, s, data):
    most = s.doc.most if s.doc.most is not None else HUGE
    value = data.draw(
        st.one_of(
            st.just(number_of(s, data.draw, -(10**9), -1)), st.just(number_of(s, data.draw, most + 1, most * 100))
        )
    )
    refused_by_name(via_bench_flag, s.doc.bench_flag, name, s, value)


# ---- the wrong type, an empty value, text that is not text -------------------------------------


def wrong_values(s: Setting) -> st.SearchStrategy:
    """Values no setting of `s`'s type takes: a mapping, always; a list for a single value; a
    word for a number or a switch; a number for text or a switch."""
    out = [st.dictionaries(st.sampled_from(["a", "x", "value"]), st.integers(), min_size=1)]
    if not s.type_name.startswith("list"):
        out.append(st.lists(st.integers(), min_size=2, max_size=3))
    if numeric(s):
        out.append(st.sampled_from(["many", "ten", "1,000", "fast", "yes please"]))
    if s.type_name == "true/false":
        out += [st.integers(2, 100), st.sampled_from(["maybe", "on-ish", "2"])]
    if textual(s):
        out.append(st.integers(1, 10**6))
    return st.one_of(*out)


@each(list(all_settings()))
@EXAMPLES
@given(route=st.sampled_from(ROUTES), data=st.data())
def test_a_value_of_the_wrong_type_is_refused_under_its_key(tmp_path, s, route, data):
    value = data.draw(wrong_values(s))
    if s.key == "repeats" and value == "auto":  # not drawn: a word repeats takes
        return
    refused_by_name(through, s.key, route, tmp_path, s, value)


@pytest.mark.parametrize("s", all_settings(), ids=[s.key for s in all_settings()])
@pytest.mark.parametrize("blank", ["", " ", "\t"], ids=["empty", "space", "tab"])
def test_an_empty_value_is_refused_under_its_key(tmp_path, s, blank):
    message = refusal(via_set, tmp_path, s, None, blank)
    assert opens_with(message, f"--set {s.key}") or opens_with(message, s.key), message
    message = refusal(via_file, tmp_path, s, " ")
    assert opens_with(message, s.key), message


@pytest.mark.parametrize("name,s", [(n, s) for n, s in RUN_FLAGS if textual(s) or s.doc.duration])
def test_an_empty_value_typed_as_a_run_flag_is_refused_under_the_flag(tmp_path, name, s):
    value = [" "] if s.type_name.startswith("list") else " "
    message = refusal(via_run_flag, tmp_path, name, s, value)
    assert opens_with(message, s.doc.run_flag), message


NOT_TEXT = st.one_of(
    st.integers(0x80, 0xFF).map(lambda b: chr(0xDC00 + b)),  # a byte that was not UTF-8, as argv hands it on
    st.sampled_from(["\x00", "\x07", "\x1b", "\x7f"]),
)


@each(TEXTS)
@EXAMPLES
@given(around=st.text(st.characters(min_codepoint=0x61, max_codepoint=0x7A), max_size=8), bad=NOT_TEXT)
def test_text_that_is_not_text_is_refused_under_its_key(tmp_path, s, around, bad):
    value = f"{around[:4]}{bad}{around[4:]}"
    refused_by_name(via_set, s.key, tmp_path, s, None, value)
    if not "\udc80" <= bad <= "\udcff":  # a study file is UTF-8: no lone surrogate in it
        refused_by_name(via_file, s.key, tmp_path, s, [value] if s.type_name.startswith("list") else value)


def test_every_setting_is_in_a_class():
    """Each declared setting is a number, text or a switch: a new kind needs its classes here."""
    kinds = (
        {s.key for s in NUMBERS}
        | {s.key for s in TEXTS}
        | {s.key for s in all_settings() if s.type_name == "true/false"}
    )
    assert kinds == {s.key for s in all_settings()}


# ---- a setting given without the one it applies beside: refused, naming it -------------------

#: A value each setting of APPLIES_WITH takes beside its context (numbers: the default plus one).
BESIDE = {
    "workload.trace_time_unit": "s",
    "workload.trace_model": "ChatGPT",
    "workload.trace_log_type": "Conversation log",
    "warm_start_storage": "sqlite:///earlier.db",
    "workload.shared_prefix_fraction": 0.5,
    "workload.trace_length_scale": 0.5,
    "workload.conversation_max_tokens": 4096,
}


def beside(s: Setting) -> Any:
    if s.key in BESIDE:
        return BESIDE[s.key]
    return (s.default or 1) + 1


#: shared_prefix_tokens alone is a unique system prompt of that length for every request: taken.
ALONE = [s for s in all_settings() if s.key in APPLIES_WITH and s.key != "workload.shared_prefix_tokens"]


@each(ALONE)
def test_a_setting_without_the_one_it_applies_beside_is_refused_naming_it(tmp_path, s):
    via_set(tmp_path, s, beside(s))  # taken beside its context
    with pytest.raises(KvtuneError) as e:
        run_options(
            with_defaults(RunFlags, runs_dir=str(tmp_path), set=[f"{s.key}={as_yaml(beside(s))}"]), parse_backends([])
        )
    assert s.name in str(e.value) and "\n" not in str(e.value), str(e.value)
