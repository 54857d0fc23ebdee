"""How long a refusal takes: every row of the bad-input table (tests/integration/cli/
test_bad_input.py), run once, one `kvtune` process at a time, timed from the process's start to
its exit. Issue 29's promise is that a typo costs a second, never a server launch; the reference
here is its ceiling of 5 s per refusal.

    .venv/bin/python benchmarks/bad_input.py [--repeat 1] [--slowest 10]

Prints the median, p90 and largest wall time, the ratio of the largest to the 5 s reference, and
the slowest rows. Run it on a quiet machine: a refusal is mostly Python's start-up and kvtune's
imports (about 1 s on one core), so a busy machine doubles it. Rows that wait on a storage that
does not answer (exit 75) are timed too: they retry for KVTUNE_PROXY_WAIT_S (1 s here), as the
suite sets it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvtune.launchers.process import free_port  # noqa: E402
from tests.integration.cli.test_bad_input import ROWS, RUNS_DIR_COMMANDS, make_inputs  # noqa: E402

REFERENCE_S = 5.0


def time_row(argv: list[str], d: Path, port: int, scratch: Path) -> tuple[float, int]:
    """Seconds from start to exit of `kvtune ARGV` as the suite runs it, and its exit status."""
    args = [a.replace("{d}", str(d)).replace("{port}", str(port)) for a in argv]
    if args and args[0] in RUNS_DIR_COMMANDS:
        args[1:1] = ["--runs-dir", str(scratch / "runs")]
    env = {**os.environ, "KVTUNE_LLAMA_SERVER": str(d / "llama-server"), "KVTUNE_PROXY_WAIT_S": "1"}
    env.pop("KVTUNE_STORAGE", None)
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "kvtune.cli", *args], capture_output=True, cwd=scratch, env=env)
    return time.monotonic() - t0, done.returncode


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1, help="runs of each row (the row's figure is its median)")
    ap.add_argument("--slowest", type=int, default=10, help="how many of the slowest rows to list")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kvtune-bad-input-"))
    (root / "inputs").mkdir()
    d = make_inputs(root / "inputs")
    port = free_port()
    timed = []
    for what, argv, status, _ in ROWS:
        runs = []
        for i in range(a.repeat):
            scratch = root / f"cwd-{len(timed)}-{i}"
            scratch.mkdir()
            seconds, rc = time_row(argv, d, port, scratch)
            if rc != status:
                print(f"row {what!r} exited {rc}, the suite expects {status}", file=sys.stderr)
            runs.append(seconds)
        timed.append((statistics.median(runs), what))
    seconds = sorted(t for t, _ in timed)
    p90 = seconds[min(len(seconds) - 1, int(0.9 * len(seconds)))]
    print(f"{len(timed)} bad inputs, {a.repeat} run(s) each, one kvtune process at a time ({os.cpu_count()} CPUs)")
    print(f"median {statistics.median(seconds):.2f} s, p90 {p90:.2f} s, largest {seconds[-1]:.2f} s")
    print(f"largest / reference ({REFERENCE_S:g} s): {seconds[-1] / REFERENCE_S:.2f}")
    print("slowest:")
    for t, what in sorted(timed, reverse=True)[: a.slowest]:
        print(f"  {t:6.2f} s  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
