"""Flag words -> typed values, each checked once with a one-line error (exit 2): the parsing the
commands share (`kvtune run` and `kvtune bench` read --workload alike)."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from kvtune.errors import SpecError
from kvtune.kinds import ProgressMode
from kvtune.study.settings import not_plain_text


def trace_of(workload: str | None) -> str | None:
    """--workload trace:FILE (a trace file or a shipped excerpt's name) -> FILE; multiturn -> None."""
    if workload is None or workload == "multiturn":
        return None
    kind, _, where = workload.partition(":")
    if kind != "trace" or not where.strip():
        raise SpecError(
            f"--workload takes multiturn or trace:FILE (a trace file, or azure-conv, azure-code, mooncake-conv), "
            f"got {workload!r}"
        )
    return where.strip()


def progress_mode(text: str) -> str:
    """--progress, checked: a misspelt mode was silently plain."""
    if text not in ProgressMode.values():
        raise SpecError(f"--progress must be one of {', '.join(ProgressMode.values())}, got {text!r}")
    return text


def plain_text(flag: str, value: str, what: str) -> str:
    """A flag's words as typed, checked: not blank (given empty, a flag that names a file, a
    model or a key would silently mean its default) and plain text, no control character or
    byte that was not UTF-8 (a newline would reach a request header, a path or a file name and
    fail there, after the work began; the settings refuse the same, study/settings.py)."""
    if not value.strip():
        raise SpecError(f"{flag} is empty: give {what}, or leave the flag out")
    problem = not_plain_text(value)
    if problem:
        raise SpecError(f"{flag} holds {problem}: retype it as plain text")
    return value


def server_url(url: str) -> str:
    """`kvtune bench URL`: a server's base URL, checked before any request (a port out of range
    or a bracket left open was httpx's traceback; port 0 a "cannot reach" that blamed the
    server), without its trailing slash. The base is the server's root: kvtune adds /v1/...
    itself, so an OpenAI-style base URL ending in /v1 is refused with the root to give."""
    example = "e.g. http://127.0.0.1:8080"
    if not url.strip():
        raise SpecError(f"the URL is empty: give the server's base URL, {example}")
    plain_text("URL", url, "")
    base = url.rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise SpecError(f"URL {url!r} must start with http:// or https://")
    try:
        parts = urlsplit(base)
        port = parts.port
    except ValueError as e:  # an IPv6 bracket left open, a port of words or past 65535
        if "port" in str(e).lower():
            typed = urlsplit(base).netloc.rpartition(":")[2]
            raise SpecError(f"URL {url!r} has port {typed!r}: a TCP port is 1..65535") from None
        raise SpecError(f"URL {url!r} is not a URL ({e}): give the server's base URL, {example}") from None
    if not parts.hostname or any(ch.isspace() for ch in parts.netloc):
        raise SpecError(f"URL {url!r} names no host: give the server's base URL, {example}")
    if port is not None and not 1 <= port <= 65535:
        raise SpecError(f"URL {url!r} has port {port}: a TCP port is 1..65535")
    if parts.path.rstrip("/").endswith("/v1") or "/v1/" in parts.path:
        root = f"{parts.scheme}://{parts.netloc}{parts.path.split('/v1')[0]}"
        raise SpecError(
            f"URL {url!r} holds the API path {parts.path}: give the server's base URL, {root} "
            f"(kvtune adds /v1/chat/completions or /v1/completions itself)"
        )
    return base


_HOST_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")


def listen_host(host: str, flag: str = "--host") -> str:
    """An address to bind (`kvtune proxy --host`, `kvtune export --host`): an IP address (IPv6
    bare or in brackets) or a host name, checked by its form before anything binds: ' ', 'a b',
    '999.1.1.1' or 'http://0.0.0.0' reached gRPC, whose own log line and 'cannot listen ...: pick
    another --port' blamed the port. No lookup: the name is resolved where it is used."""
    plain_text(flag, host, "an address to listen on, e.g. 0.0.0.0 or 127.0.0.1")
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(bare)
        return host
    except ValueError:
        pass
    labels = bare.split(".")
    named = len(bare) <= 253 and all(_HOST_LABEL.match(label) for label in labels)
    if named and not all(label.isdigit() for label in labels):  # 999.1.1.1 is no IPv4 address nor a name
        return host
    raise SpecError(f"{flag} {host!r} is not an address: give an IP address or a host name, e.g. 0.0.0.0 or 127.0.0.1")
