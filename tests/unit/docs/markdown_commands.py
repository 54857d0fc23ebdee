"""The command lines and links of the user's manual (README.md, docs/*.md), read as a reader sees them.

Which lines are command lines, the rule the docs are written to:

- Only code blocks are read: fenced blocks (``` or ~~~) and indented ones (4 spaces after a blank
  line). A fence tagged `bash`, `sh`, `shell`, `console` or `zsh` holds commands, and so does an
  untagged fence or an indented block (ambiguous, so read); a fence tagged anything else (`text`,
  `yaml`, `json`, ...) is output or a file and is never read: that is how a page shows output.
- In a `console` block only lines after a `$ ` prompt are commands; the lines between are output.
- Elsewhere a line is a command when, after its `$ ` prompt and `VAR=value` prefixes, its first
  word is `kvtune` (or a path ending in /kvtune) or `make`; other programs (pip, sbatch, kubectl)
  are the reader's business. In a shell-tagged block a later command on the line counts too
  (`cd x && kvtune doctor`); in an untagged or indented block only a line that starts with one
  does, since output may hold `...; kvtune run exited 0` further on.
- A line ending in a backslash continues on the next; a `#` comment ends it; `&&`, `||`, `;`,
  `|` and `&` separate commands on one line.
- A command followed by an output line `kvtune: error: ...` is one the docs show being refused.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

SHELL_TAGS = {"bash", "sh", "shell", "console", "zsh", ""}
SEPARATORS = {"&&", "||", ";", "|", "&"}
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([^\s`]*)")


@dataclass(frozen=True)
class CodeLine:
    lineno: int  # 1-based line in the file
    text: str  # without the block's indentation


@dataclass
class Block:
    tag: str  # the fence's info string; "" for an untagged fence, "indented" for an indented block
    lines: list[CodeLine] = field(default_factory=list)


@dataclass(frozen=True)
class Command:
    """One command line of a page: `argv[0]` is `kvtune` or `make`."""

    path: Path
    lineno: int
    text: str  # the logical line as written (continuations joined)
    env: dict[str, str]
    argv: list[str]
    refused_with: str | None = None  # the `kvtune: error: ...` line shown after it, if any
    problem: str | None = None  # a line that cannot be read as the shell would (quoting, a `<` redirect)

    def where(self) -> str:
        return f"{self.path.name}:{self.lineno}: {self.text}"


def code_blocks(text: str) -> list[Block]:
    """The fenced and indented code blocks of a markdown page, with their line numbers."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    previous_blank = True
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            indent, marker, tag = fence.group(1), fence.group(2), fence.group(3).lower()
            block = Block(tag)
            i += 1
            while i < len(lines) and not lines[i].strip().startswith(marker):
                block.lines.append(CodeLine(i + 1, _dedent(lines[i], len(indent))))
                i += 1
            blocks.append(block)
            i += 1
            previous_blank = False
            continue
        if previous_blank and line.startswith("    ") and line.strip():
            block = Block("indented")
            while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                if lines[i].strip():
                    block.lines.append(CodeLine(i + 1, lines[i][4:]))
                i += 1
            blocks.append(block)
            previous_blank = False
            continue
        previous_blank = not line.strip()
        i += 1
    return blocks


def _dedent(line: str, n: int) -> str:
    return line[n:] if line[:n].strip() == "" else line.lstrip()


def commands(path: Path) -> list[Command]:
    """Every `kvtune ...` and `make ...` command line in the page's shell blocks."""
    found: list[Command] = []
    for block in code_blocks(path.read_text(encoding="utf-8")):
        if block.tag not in SHELL_TAGS and block.tag != "indented":
            continue
        found.extend(_block_commands(path, block))
    return found


def _block_commands(path: Path, block: Block) -> list[Command]:
    found: list[Command] = []
    lines = block.lines
    i = 0
    while i < len(lines):
        start = lines[i]
        text = start.text.strip()
        prompted = text.startswith("$ ")
        if block.tag == "console" and not prompted:
            i += 1
            continue
        if prompted:
            text = text[2:]
        # Continuations: a trailing backslash joins the next physical line.
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1].rstrip() + " " + lines[i].text.strip()
        i += 1
        refused = None
        if i < len(lines) and lines[i].text.strip().startswith("kvtune: error:"):
            refused = lines[i].text.strip()
        commands_here = _commands_of(path, start.lineno, text, refused)
        if block.tag in ("", "indented") and not prompted and not _starts_with_command(text):
            commands_here = []  # output that merely holds `; kvtune ...` further on
        found.extend(commands_here)
    return found


def _starts_with_command(text: str) -> bool:
    """Whether the line's first word, after `VAR=value` prefixes, is kvtune or make."""
    words = text.split()
    while words and _ENV.match(words[0]):
        words.pop(0)
    return bool(words) and _program(words[0]) is not None


def _commands_of(path: Path, lineno: int, text: str, refused: str | None) -> list[Command]:
    try:
        lexer = shlex.shlex(_uncommented(text), posix=True, punctuation_chars=";&|<>")
        lexer.whitespace_split = True
        lexer.commenters = ""
        tokens = list(lexer)
    except ValueError as e:  # an unclosed quote
        first = text.split()[0] if text.split() else ""
        if _program(first) is None:
            return []
        return [Command(path, lineno, text, {}, [first], refused, f"not a shell line: {e}")]
    found: list[Command] = []
    for words in _split(tokens):
        env: dict[str, str] = {}
        while words and _ENV.match(words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        if not words or _program(words[0]) is None:
            continue
        argv, problem = _drop_redirects(words)
        argv[0] = _program(argv[0]) or argv[0]
        found.append(Command(path, lineno, text, env, argv, refused, problem))
    return found


def _uncommented(text: str) -> str:
    """The line before its `#` comment: a `#` that starts a word outside quotes, as the shell
    reads one (an apostrophe in the comment is no quote)."""
    quote = ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1].isspace()):
            return text[:i]
    return text


def _program(word: str) -> str | None:
    name = word.rsplit("/", 1)[-1]
    return name if name in ("kvtune", "make") else None


def _split(tokens: list[str]) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in SEPARATORS:
            parts.append([])
        else:
            parts[-1].append(token)
    return [p for p in parts if p]


def _drop_redirects(words: list[str]) -> tuple[list[str], str | None]:
    """The words without output redirections (`> file`, `2> file`); an input redirection `<` is
    what an unquoted target (`--target ttft<1s`) becomes in a shell, so it is a problem."""
    argv: list[str] = []
    problem = None
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in (">", ">>"):
            if argv and argv[-1] in ("1", "2"):
                argv.pop()
            skip = True
            continue
        if word.startswith("<"):
            problem = "an unquoted '<' is a shell redirection: quote the argument (e.g. --target 'ttft<1s')"
            skip = True
            continue
        argv.append(word)
    return argv, problem


_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE_SPAN = re.compile(r"`[^`]*`")


@dataclass(frozen=True)
class Link:
    path: Path
    lineno: int
    target: str


def links(path: Path) -> list[Link]:
    """The page's markdown links and images outside code blocks and code spans."""
    text = path.read_text(encoding="utf-8")
    in_code = {line.lineno for block in code_blocks(text) for line in block.lines}
    fences = {i + 1 for i, line in enumerate(text.splitlines()) if _FENCE.match(line)}
    found = []
    for i, line in enumerate(text.splitlines(), start=1):
        if i in in_code or i in fences:
            continue
        for match in _LINK.finditer(_CODE_SPAN.sub("", line)):
            found.append(Link(path, i, match.group(1)))
    return found


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated heading numbered (-1, -2, ...)."""
    text = path.read_text(encoding="utf-8")
    in_code = {line.lineno for block in code_blocks(text) for line in block.lines}
    seen: dict[str, int] = {}
    found: set[str] = set()
    for i, line in enumerate(text.splitlines(), start=1):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not heading or i in in_code:
            continue
        title = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))
        slug = re.sub(r"[^\w\- ]", "", title.lower().replace("`", "")).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else f"{slug}-{n}")
    return found
