"""Where the suite's files are, in one place: a test that moves to a deeper folder keeps
finding its recordings (counting `parents[N]` by hand broke when tests/unit/tuner was split).

tests/unit (no process started) and tests/integration (real processes: the fake server, the CLI)
mirror src/kvtune and share the recordings in tests/unit/data; tests/e2e runs real servers."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"
STUDIES = REPO / "studies"
BENCHMARKS = REPO / "benchmarks"
UNIT_DATA = REPO / "tests" / "unit" / "data"  # log excerpts, results files, recordings (both suites)
NVML_DATA = UNIT_DATA / "nvml"  # recorded NVML answers (H100, A100 in use, 4090 pair, ...)
