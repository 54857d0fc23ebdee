"""A study file's bytes -> its YAML data, read strictly, before any key is looked at.

A study file is a few dozen keys of UTF-8 YAML. What is not that is refused here in one line
that names the file: anything over `MAX_BYTES` (read no further: a model or a log passed by
mistake costs no seconds of parsing), a GGUF model or other binary file, text that is not UTF-8,
YAML whose aliases expand past `MAX_NODES` values (a "billion laughs" file) or refer to
themselves, and a key written twice in one mapping (YAML keeps the last silently: a second
`targets:` would drop the first one's SLOs). Merge keys (``<<: *base``) still override as YAML
means them. `study_file.load_study_file` checks the keys and values of what comes back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from kvtune.errors import SpecError

MAX_BYTES = 1 << 20  # 1 MiB: the largest study file shipped is under 2 KiB
MAX_NODES = 10_000  # values once every alias is expanded; a shipped study file holds under 100
_MERGE = "tag:yaml.org,2002:merge"
_GGUF_MAGIC = b"GGUF"  # gguf_file.GGUF_MAGIC (a leaf below `study`; said again to keep this module pure)


class _TooLarge(Exception):
    pass


class _Circular(Exception):
    pass


class _Twice(Exception):
    def __init__(self, key: Any, first: int, second: int) -> None:
        super().__init__(key)
        self.key, self.first, self.second = key, first, second


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader (plain data only); the checks run on the composed nodes before any
    value is constructed. Composing stops past `MAX_NODES` nodes, so a long file of values is
    refused in a fraction of a second, not after all of it was read into nodes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.composed = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        self.composed += 1
        if self.composed > MAX_NODES:
            raise _TooLarge
        return super().compose_node(parent, index)


def read_study_bytes(path: Path) -> bytes:
    """At most `MAX_BYTES` + 1 bytes of the file (OSError for the caller to word)."""
    with open(path, "rb") as f:
        return f.read(MAX_BYTES + 1)


def parse_study_yaml(raw: bytes, name: str) -> Any:
    """`raw` (a study file's bytes; `name` how errors name it, e.g. "study file 'x.yaml'") -> the
    YAML document's data (None when empty). Every refusal is a one-line SpecError."""
    if raw.startswith(_GGUF_MAGIC):
        raise SpecError(f"{name} is a GGUF model, not a YAML study file: pass it as --model")
    if len(raw) > MAX_BYTES:
        raise SpecError(f"{name} is over {MAX_BYTES // (1 << 20)} MiB: a study file is a few dozen YAML keys")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16's byte-order marks (Windows' "Unicode")
        raise SpecError(f"{name} is UTF-16 text: a study file is YAML text; save it as UTF-8")
    if b"\0" in raw:
        raise SpecError(f"{name} is a binary file (it holds NUL bytes), not a YAML study file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SpecError(
            f"{name} is not UTF-8 text (byte 0x{raw[e.start]:02x} at offset {e.start}): "
            "a study file is YAML text; save it as UTF-8"
        ) from None
    return _load(text, name)


def _load(text: str, name: str) -> Any:
    loader: _Loader | None = None
    try:
        loader = _Loader(text)  # its reader refuses control characters at once
        node = loader.get_single_node()
        if node is None:
            return None
        _check(node, loader)
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        line = getattr(getattr(e, "problem_mark", None), "line", None)
        at = f" at line {line + 1}" if line is not None else ""
        raise SpecError(f"{name} is not valid YAML{at}") from e
    except _TooLarge:
        raise SpecError(
            f"{name} holds more than {MAX_NODES} values once its aliases are expanded: a study file is a few dozen keys"
        ) from None
    except _Circular:
        raise SpecError(f"{name} has an alias that refers to itself: write the value out") from None
    except RecursionError:
        raise SpecError(f"{name} nests too deep to be a study file") from None
    except _Twice as e:
        raise SpecError(
            f"{name} gives the key {e.key!r} twice (lines {e.first} and {e.second}): "
            "YAML would keep only the second; give it once"
        ) from None
    finally:
        if loader is not None:
            loader.dispose()


def _check(root: yaml.Node, loader: _Loader) -> None:
    """Count the values of the document with every alias expanded (a node reached twice counts
    twice; each node is visited once), and refuse a key given twice in one mapping."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if id(node) in open_nodes:
            raise _Circular
        open_nodes.add(id(node))
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(size(child) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            _refuse_twice(node, loader)
            total += sum(size(k) + size(v) for k, v in node.value)
        if total > MAX_NODES:
            raise _TooLarge
        open_nodes.discard(id(node))
        sizes[id(node)] = total
        return total

    size(root)


def _refuse_twice(node: yaml.MappingNode, loader: _Loader) -> None:
    """A plain key (a scalar) written twice in `node`: the first two lines that give it."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE:
            continue
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: the constructor refuses it
            continue
        if first is not None:
            raise _Twice(key, first, line)
        seen[key] = line
