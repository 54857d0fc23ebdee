"""Every command line of the user's manual parses against the real command line, and every link
in it leads somewhere.

README.md and docs/*.md are read as a reader reads them (tests/unit/docs/markdown_commands.py
says which lines are commands): each `kvtune ...` line is parsed by the click command built from
kvtune's typer app, the subcommand's `make_context` with `resilient_parsing=False`, so an unknown
flag, a bad choice, a value of the wrong type or a missing argument fails here, naming the page,
the line and the command. Nothing runs: no server, no process, no file written. A command the docs
show being refused (`kvtune: error: ...` on the next line) must be refused with that line when the
refusal is click's. Each `make TARGET` names a target of the Makefile.
"""

from __future__ import annotations

import functools
import io
import os
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import typer

from kvtune.errors import KvtuneError
from tests.paths import REPO
from tests.unit.docs.markdown_commands import Command, anchors, code_blocks, commands, links

README = REPO / "README.md"
PAGES = [README, *sorted((REPO / "docs").glob("*.md"))]
README_MAX_LINES = 300


def _all_commands() -> list[Command]:
    return [c for page in PAGES for c in commands(page)]


@functools.cache
def _click_app():  # type: ignore[no-untyped-def]
    import kvtune.cli  # noqa: F401  (the command modules register themselves on the app)
    from kvtune.cli.app import app

    return typer.main.get_command(app)


def _makefile_targets() -> set[str]:
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    return {m.group(1) for m in re.finditer(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.M)}


def parse(command: Command) -> str | None:
    """None when the command line parses; else kvtune's one-line refusal of it (what
    `kvtune.cli.main` prints after `kvtune: error: `)."""
    from kvtune.cli.app import clickx, usage_error_line

    root = _click_app()
    args = command.argv[1:]
    saved = {k: os.environ.get(k) for k in command.env}
    os.environ.update(command.env)
    try:
        with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
            with root.make_context("kvtune", list(args), resilient_parsing=False) as ctx:
                # What follows the group's own options: the command and its arguments (click keeps
                # the command's name apart, as `_protected_args`, from click 8.2 on).
                pending = [*(ctx._protected_args if hasattr(ctx, "_protected_args") else ctx.protected_args), *ctx.args]
                if not pending:
                    return None
                name, sub, rest = root.resolve_command(ctx, pending)
                with sub.make_context(name, rest, parent=ctx, resilient_parsing=False) as sub_ctx:
                    _check_sets(sub_ctx)
    except typer.Exit as e:  # --help, --version: printed and done
        return None if e.exit_code == 0 else f"exit {e.exit_code}"
    except clickx.UsageError as e:
        return usage_error_line(e, args)
    except clickx.ClickException as e:
        return " ".join(e.format_message().split())
    except KvtuneError as e:  # a --set KEY=VALUE kvtune refuses
        return str(e)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return None


def _check_sets(ctx) -> None:  # type: ignore[no-untyped-def]
    """`--set KEY=VALUE` items are only strings to click: each key must be a setting, and its
    value of the setting's type, as `kvtune run` checks them before anything starts (`kvtune bench`
    takes workload keys only, `workload.` optional, as cli/bench.py reads them)."""
    from kvtune.study.settings import parse_sets

    for param in ctx.command.params:
        if "--set" in getattr(param, "opts", ()) and ctx.params.get(param.name):
            items = list(ctx.params[param.name])
            if ctx.command.name == "bench":
                items = [i if i.startswith("workload.") else f"workload.{i}" for i in items]
            parse_sets(items)


def test_the_docs_have_command_lines() -> None:
    """The reader behind the other tests finds what it should (a rule that matched nothing would
    pass every check)."""
    found = _all_commands()
    assert sum(c.argv[0] == "kvtune" for c in found) >= 20
    assert any(c.argv[:2] == ["make", "demo"] for c in found)
    assert any(c.path == README for c in found)


def test_every_kvtune_command_line_parses() -> None:
    failures = []
    for command in (c for c in _all_commands() if c.argv[0] == "kvtune"):
        if command.problem:
            failures.append(f"{command.where()}\n    {command.problem}")
            continue
        refusal = parse(command)
        shown = command.refused_with
        if shown is None and refusal is not None:
            failures.append(f"{command.where()}\n    kvtune: error: {refusal}")
        elif shown is not None and refusal is not None and shown != f"kvtune: error: {refusal}":
            failures.append(
                f"{command.where()}\n    the page shows: {shown}\n    kvtune prints:  kvtune: error: {refusal}"
            )
    assert not failures, "command lines in the docs that kvtune refuses:\n" + "\n".join(failures)


def test_every_shipped_study_file_named_exists() -> None:
    """`--study-file studies/...` in the docs names one of the study files the repository ships."""
    failures = []
    for command in _all_commands():
        args = command.argv
        for flag, value in zip(args, args[1:]):
            if flag == "--study-file" and value.startswith("studies/") and not (REPO / value).is_file():
                failures.append(f"{command.where()}: no {value} in the repository")
    assert not failures, "\n".join(failures)


def test_every_study_file_in_the_docs_loads(tmp_path: Path) -> None:
    """A ```yaml block whose top-level keys are all study-file keys is a study file (or a part of
    one): kvtune reads it as `--study-file` would, so a key that moved or a value of the wrong
    type fails here."""
    import yaml

    from kvtune.study.settings import top_keys
    from kvtune.study.study_file import load_study_file

    failures = []
    checked = 0
    for page in PAGES:
        for block in code_blocks(page.read_text(encoding="utf-8")):
            if block.tag not in ("yaml", "yml"):
                continue
            text = "\n".join(line.text for line in block.lines)
            data = yaml.safe_load(text)
            if not isinstance(data, dict) or not set(data) <= top_keys():
                continue  # a Kubernetes manifest, a results excerpt: not a study file
            checked += 1
            path = tmp_path / "study.yaml"
            path.write_text(text, encoding="utf-8")
            try:
                load_study_file(path)
            except KvtuneError as e:
                failures.append(f"{page.name}:{block.lines[0].lineno}: {e}")
    assert checked >= 2, "no study file found in the docs' yaml blocks"
    assert not failures, "study files in the docs that kvtune refuses:\n" + "\n".join(failures)


def test_every_make_line_names_a_target() -> None:
    targets = _makefile_targets()
    failures = []
    for command in (c for c in _all_commands() if c.argv[0] == "make"):
        named = [a for a in command.argv[1:] if not a.startswith("-") and "=" not in a]
        missing = [t for t in named if t not in targets]
        if not named or missing:
            failures.append(f"{command.where()}: no target {' '.join(missing) or '(none named)'} in the Makefile")
    assert not failures, "\n".join(failures)


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines, at most {README_MAX_LINES}: move reference material to docs/"
    )


def test_every_relative_link_leads_to_a_file_and_heading() -> None:
    failures = []
    for page in PAGES:
        for link in links(page):
            if re.match(r"^[a-z][a-z0-9+.-]*:", link.target):  # https:, mailto:
                continue
            file_part, _, anchor = link.target.partition("#")
            target = (page.parent / file_part).resolve() if file_part else page
            where = f"{page.relative_to(REPO)}:{link.lineno}: ({link.target})"
            if not target.exists():
                failures.append(f"{where}: no such file")
            elif anchor and target.suffix == ".md" and anchor not in anchors(target):
                failures.append(f"{where}: no heading #{anchor} in {target.relative_to(REPO)}")
    assert not failures, "broken links:\n" + "\n".join(failures)


@pytest.mark.parametrize(
    ("line", "argv", "env"),
    [
        ("kvtune run --target 'ttft<1s'", ["kvtune", "run", "--target", "ttft<1s"], {}),
        ("$ kvtune show s   # a comment", ["kvtune", "show", "s"], {}),
        (
            "KVTUNE_STORAGE=sqlite:///x.db kvtune worker --study s",
            ["kvtune", "worker", "--study", "s"],
            {"KVTUNE_STORAGE": "sqlite:///x.db"},
        ),
        (".venv/bin/kvtune doctor > doctor.txt", ["kvtune", "doctor"], {}),
        ("make install && kvtune doctor", ["make", "install"], {}),
    ],
)
def test_the_reader_takes_a_line_as_the_shell_does(
    tmp_path: Path, line: str, argv: list[str], env: dict[str, str]
) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"Text.\n\n```bash\n{line}\n```\n", encoding="utf-8")
    found = commands(page)
    assert found[0].argv == argv and found[0].env == env and found[0].lineno == 4


def test_the_reader_joins_continuations_and_skips_output(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```console\n$ kvtune run --trials 3 \\\n    --study s\nkvtune run is output here\n```\n\n"
        "```text\nkvtune run --not-a-flag\n```\n\n    kvtune plan --json\n",
        encoding="utf-8",
    )
    found = commands(page)
    assert [(c.lineno, c.argv) for c in found] == [
        (2, ["kvtune", "run", "--trials", "3", "--study", "s"]),
        (11, ["kvtune", "plan", "--json"]),
    ]


def test_output_in_an_untagged_block_is_no_command(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "    PASS: step: study (219 s; kvtune run exited 0)\n\n```bash\ncd /srv && kvtune doctor\n```\n",
        encoding="utf-8",
    )
    assert [c.argv for c in commands(page)] == [["kvtune", "doctor"]]


def test_a_bad_flag_or_an_unquoted_target_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```bash\nkvtune run --trails 3\nkvtune run --target ttft<1s\nkvtune run --trials 3\n```\n")
    bad_flag, unquoted, good = commands(page)
    assert "no such option --trails" in (parse(bad_flag) or "")
    assert unquoted.problem and "quote" in unquoted.problem
    assert parse(good) is None


def test_a_refusal_shown_in_the_docs_is_checked(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```console\n$ kvtune run --trails 3\nkvtune: error: something else\n```\n")
    (command,) = commands(page)
    assert command.refused_with == "kvtune: error: something else"
    assert parse(command) is not None
