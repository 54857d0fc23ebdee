"""How long a refusal takes, over the whole bad-input battery: every row of the tables in
tests/integration/cli/test_bad_input*.py, run once as the suite runs it (one `kvtune` process at
a time, through pytest, no xdist), each row's time its test's call phase (the `kvtune` process
from start to exit, and the test's checks of what it left behind). Issue 41's promise is a
refusal in one line within 5 s; the reference here is that ceiling.

    nice -n 5 .venv/bin/python benchmarks/bad_input.py [--slowest 10] [-k EXPR]
    .venv/bin/python benchmarks/bad_input.py --silent-only   # the silent storage alone
    .venv/bin/python benchmarks/bad_input.py --classes   # the classes the property tests cover

Prints the largest and the median over the battery and per class of input (a table's section,
`# -- ... --` in its ROWS; a table without sections is one class), the ratio of the largest to
the 5 s reference, the slowest rows, and a storage that takes the connection and never answers,
for every command that opens one (tests/integration/cli/test_silent_storage.py's list: run, run
--setup-only, show, report, export, export-workers, worker, confirm, proxy; the URL by --storage
and by KVTUNE_STORAGE): when its wait is said (one line on stderr) and when the refusal comes,
each with its ratio to the reference (the refusal comes after the connect timeout given, 10 s,
so its ratio is above 1 by design; the wait said is the figure under the promise). Run it on a
quiet machine and say the load (`uptime`): a refusal is mostly Python's start-up and kvtune's imports.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tokenize
from collections import defaultdict
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
TABLES = sorted((ROOT / "tests" / "integration" / "cli").glob("test_bad_input*.py"))
REFERENCE_S = 5.0
#: The connect timeout (and a proxy's wait) a silent storage is given: its refusal comes after it.
SILENT_TIMEOUT_S = 10.0
#: Tables that are one class each (no `# -- ... --` sections in their ROWS).
WHOLE_TABLES = {
    "test_bad_input_cluster.py": "export-workers: a set-up study's workers",
    "test_bad_input_plan.py": "plan: a model's shape and the load",
    "test_bad_input_trace.py": "a trace that cannot be replayed as asked",
    "test_bad_input_workload.py": "drawn lengths: spreads, prefix groups, multi-turn",
}
_SECTION = re.compile(r"^\s*# -- (.+?) --\s*$")
_CALL = re.compile(r"^\s*([\d.]+)s call\s+(\S+?\.py)::\w+\[(.*)\]\s*$")


def classes(table: Path) -> dict[str, str]:
    """Row id (a row's first string, its test id) -> its class: the section it is listed under."""
    tree = ast.parse(table.read_text())
    rows = next(
        n.value
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        and getattr(n.targets[0] if isinstance(n, ast.Assign) else n.target, "id", None) == "ROWS"
    )
    with table.open() as f:
        headers = [
            (t.start[0], m.group(1))
            for t in tokenize.generate_tokens(f.readline)
            if t.type == tokenize.COMMENT and (m := _SECTION.match(t.string))
        ]
    whole = WHOLE_TABLES.get(table.name, table.stem)
    out = {}
    for row in rows.elts:  # type: ignore[union-attr]
        what = row.elts[0].value  # type: ignore[attr-defined]
        above = [name for line, name in headers if line < row.lineno]
        out[what] = above[-1] if above else whole
    return out


def battery(k: str | None) -> list[tuple[float, str, str]]:
    """(seconds, class, row) for every row, as pytest timed its call phase."""
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--durations=0", "-vv", "--no-header"]
    argv += [*map(str, TABLES), *(["-k", k] if k else [])]
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    if done.returncode not in (0, 1):
        sys.exit(f"pytest exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    failed = [ln for ln in done.stdout.splitlines() if ln.startswith("FAILED")]
    for ln in failed:
        print(f"note: {ln}", file=sys.stderr)
    by_table = {t.name: classes(t) for t in TABLES}
    timed = []
    for line in done.stdout.splitlines():
        m = _CALL.match(line)
        if m is None:
            continue
        seconds, path, what = float(m.group(1)), Path(m.group(2)).name, m.group(3)
        cls = by_table.get(path, {}).get(what, WHOLE_TABLES.get(path, path))
        timed.append((seconds, cls, what))
    return timed


def silent_cases() -> list[tuple[str, str]]:
    """(command, scheme) for every command that opens a storage, each by both ways its URL comes
    (tests/integration/cli/test_silent_storage.py's own list, so a command added there is timed
    here): run, run --setup-only, show, report, export, export-workers, worker, confirm, proxy."""
    return list(silent_test().CASES)


def silent_test() -> ModuleType:
    """tests/integration/cli/test_silent_storage.py: its commands, URLs and free_port."""
    sys.path.insert(0, str(ROOT))
    from tests.integration.cli import test_silent_storage

    return test_silent_storage


def silent_storage(command: str, scheme: str) -> tuple[float | None, float, int]:
    """`kvtune COMMAND` (test_silent_storage.py's COMMANDS) against a port that takes the
    connection and never answers, the URL given as that test gives it (postgresql by --storage,
    grpc by KVTUNE_STORAGE): seconds to its first line on stderr (the wait said), to its exit,
    and its exit status."""
    t = silent_test()
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(server.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    url = t.URLS[scheme].format(port=server.getsockname()[1])
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "KVTUNE_STORAGE_CONNECT_TIMEOUT_S": f"{SILENT_TIMEOUT_S:g}"}
        env["KVTUNE_PROXY_WAIT_S"] = f"{SILENT_TIMEOUT_S:g}"
        env.pop("KVTUNE_STORAGE", None)
        args = [
            f"{d}/runs" if a == "R" else str(t.free_port()) if a == "PORT" else a.replace("C/", f"{d}/")
            for a in t.COMMANDS[command]
        ]
        if scheme == "postgresql":
            args += ["--storage", url]
        else:
            env["KVTUNE_STORAGE"] = url
        t0 = time.monotonic()
        p = subprocess.Popen(
            [sys.executable, "-m", "kvtune.cli", *args],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            cwd=d,
            env=env,
        )
        assert p.stderr is not None
        first = p.stderr.readline()
        said = time.monotonic() - t0 if first else None
        p.stderr.read()
        status = p.wait()
        ended = time.monotonic() - t0
    server.close()
    for c in held:
        c.close()
    return said, ended, status


def covered() -> list[str]:
    """Each class of the property tests and the settings it covers, from the tests' own lists
    (tests/unit/cli/test_input_classes.py, test_path_classes.py)."""
    sys.path.insert(0, str(ROOT))
    from kvtune.study.settings import all_settings
    from tests.unit.cli import test_input_classes as t
    from tests.unit.cli import test_path_classes as p

    def keys(names: list[str]) -> str:
        return f"({len(names)}) " + ", ".join(n.removeprefix("workload.") for n in names)

    numbers = [s.key for s in t.NUMBERS]
    return [
        f"negative; zero, refused or kept; past the most: {keys(numbers)}",
        f"not finite: {keys([s.key for s in t.NUMBERS if not s.type_name.startswith('integer')])}",
        f"typed as a flag: run {' '.join(str(s.doc.run_flag) for _, s in t.RUN_NUMBER_FLAGS)}; "
        f"bench {' '.join(str(s.doc.bench_flag) for _, s in t.BENCH_NUMBER_FLAGS)}",
        f"wrong type; empty: every setting ({len(all_settings())})",
        f"not text (a byte not UTF-8, a control character): {keys([s.key for s in t.TEXTS])}",
        f"given without the setting it applies beside: {keys([s.key for s in t.ALONE])}",
        f"not there, under a file, a folder: {keys(p.FILES)}",
        f"random bytes: {keys([k for k in p.FILES if p.PATHS[k] in ('gguf', 'file')])}; not UTF-8: fidelity_prompts",
        f"cut short at any byte, text as a model: {keys([k for k, v in p.PATHS.items() if v == 'gguf'])}",
        "a program that cannot run: llama_server; a runs folder that is a file or under one: runs_dir",
    ]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--slowest", type=int, default=10, help="how many of the slowest rows to list")
    ap.add_argument("-k", help="pytest's -k: only the rows it selects (while developing)")
    ap.add_argument("--classes", action="store_true", help="print the classes the property tests cover, and stop")
    ap.add_argument("--silent-only", action="store_true", help="time only the silent storage, every command")
    a = ap.parse_args()
    if a.classes:
        print("\n".join(covered()))
        return 0
    if not a.silent_only:
        the_battery(a.k, a.slowest)
    print(
        f"a silent storage (connect timeout {SILENT_TIMEOUT_S:g} s), each command that opens one: "
        f"when its wait is said, when it is refused (s, and / reference {REFERENCE_S:g} s)"
    )
    for command, scheme in silent_cases():
        said, ended, status = silent_storage(command, scheme)
        first = "  nothing said   " if said is None else f"{said:6.2f} s  {said / REFERENCE_S:4.2f}"
        print(f"  {first}  {ended:6.2f} s  {ended / REFERENCE_S:4.2f}  exit {status}  {command} ({scheme})")
    return 0


def the_battery(k: str | None, slowest: int) -> None:
    """The battery's figures: overall, per class, the slowest rows."""
    timed = battery(k)
    if not timed:
        sys.exit("no row was timed")
    seconds = [t for t, _, _ in timed]
    print(f"{len(timed)} bad inputs in {len(TABLES)} tables, one kvtune process at a time ({os.cpu_count()} CPUs)")
    print(f"largest {max(seconds):.2f} s, median {statistics.median(seconds):.2f} s")
    print(f"largest / reference ({REFERENCE_S:g} s): {max(seconds) / REFERENCE_S:.2f}")
    per: dict[str, list[float]] = defaultdict(list)
    for t, cls, _ in timed:
        per[cls].append(t)
    print("per class (rows, largest, median):")
    for cls, ts in sorted(per.items(), key=lambda kv: -max(kv[1])):
        print(f"  {len(ts):3d}  {max(ts):5.2f} s  {statistics.median(ts):5.2f} s  {cls}")
    print("slowest:")
    for t, cls, what in sorted(timed, reverse=True)[:slowest]:
        print(f"  {t:6.2f} s  {what}  ({cls})")


if __name__ == "__main__":
    sys.exit(main())
