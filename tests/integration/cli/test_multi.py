"""`kvtune run` with two backends, on the fake launcher (real fake servers, real load, real
storage): each backend its own study with its share of --trials, one after the other, then the
side-by-side table and compare.json, the best overall by the verdict's test on fresh runs."""

from __future__ import annotations

import json
import signal

import pytest

from kvtune.cli.multi import run_backends
from kvtune.errors import ServerNotFoundError
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.multi_backend import parse_backends
from kvtune.tuner.session import RunOptions

TINY = {"concurrency": 2, "prompt_tokens": 16, "output_tokens": 4, "num_requests": 4, "warmup_requests": 1}


@pytest.fixture(autouse=True)
def keep_signal_handlers():
    """run_study makes SIGTERM an interrupt, as the command does; put the handlers back."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    yield
    for s, h in saved.items():
        signal.signal(s, h)


def factory(refuse: set[str] = frozenset()):
    """vLLM's fake is 20 times as fast: it must win whatever speed llama-server's study finds."""

    def make(spec):
        if spec.backend in refuse:
            raise ServerNotFoundError(f"{spec.backend} is not installed")
        fast = spec.backend == "vllm"
        return FakeLauncher(
            base_ttft_ms=5 if fast else 100, base_itl_ms=1 if fast else 20, model_path=f"fake-{spec.backend}"
        )

    return make


def options(tmp_path, trials: int, confirm_top: int = 0) -> RunOptions:
    given = {
        "study": "S",
        "trials": trials,
        "confirm_top": confirm_top,
        "confirm_pairs": 2,
        "startup_timeout_s": 20,
        "informed_start": False,
        "space": {"bogus": False},
        "workload": dict(TINY),
    }
    return RunOptions(given=given, runs_dir=str(tmp_path))


def test_two_backends_split_the_budget_and_are_compared(tmp_path, capsys):
    # each study confirmed: its named best has fresh runs, and vLLM's are far faster
    code = run_backends(
        options(tmp_path, 5, confirm_top=1), parse_backends(["llama-server", "vllm"]), None, "plain", factory()
    )
    out = capsys.readouterr().out
    assert code == 0, out
    trials = {
        b: len(json.loads((tmp_path / f"S-{b}" / "results.json").read_text())["trials"])
        for b in ("llama-server", "vllm")
    }
    assert trials == {"llama-server": 3, "vllm": 2}  # 5 split: 3 + 2, the remainder to the first
    compared = json.loads((tmp_path / "S" / "compare.json").read_text())
    assert compared["studies"] == ["S-llama-server", "S-vllm"]
    assert compared["best"]["backend"] == "vllm"
    assert compared["best"]["why"].startswith("better on fresh servers on output_throughput (vllm over llama-server")
    assert all(len(side["fresh"]) >= 2 for side in compared["fresh"])  # the verdicts' proof runs
    assert [(r["backend"], r["role"]) for r in compared["rows"]] == [
        ("llama-server", "best"),
        ("llama-server", "defaults"),
        ("vllm", "best"),
        ("vllm", "defaults"),
    ]
    assert set(compared["run_wall_s"]) == {"S-llama-server", "S-vllm"}
    assert "Which backend?" in out and "Best overall: vllm" in out
    assert out.index("study S-llama-server") < out.index("study S-vllm") < out.index("Which backend?")


def test_bests_not_measured_on_fresh_servers_name_no_winner(tmp_path, capsys):
    """--confirm-top 0: each study's best is its search's top, measured once; the comparison
    says so and names no winner, however far apart the search figures are."""
    code = run_backends(options(tmp_path, 2), parse_backends(["llama-server", "vllm"]), None, "quiet", factory())
    captured = capsys.readouterr()
    assert code == 0 and captured.out == ""  # --quiet: no best overall, no command line
    assert "no best overall: no winner: not measured the same way" in captured.err
    compared = json.loads((tmp_path / "S" / "compare.json").read_text())
    assert compared["best"]["study"] is None and [s["fresh"] for s in compared["fresh"]] == [[], []]


def test_a_backend_that_cannot_serve_is_named_and_the_other_runs(tmp_path, capsys):
    code = run_backends(options(tmp_path, 2), parse_backends(["auto"]), None, "quiet", factory({"vllm"}))
    captured = capsys.readouterr()
    assert code == 0
    assert "vllm cannot serve this model here, going on without it: vllm is not installed" in captured.err
    assert len(json.loads((tmp_path / "S-llama-server" / "results.json").read_text())["trials"]) == 2
    assert not (tmp_path / "S-vllm").exists()
    assert json.loads((tmp_path / "S" / "compare.json").read_text())["skipped"] == [
        {"backend": "vllm", "reason": "vllm is not installed"}
    ]
    assert captured.out.strip().splitlines()[-1].startswith("/")  # --quiet: the best command line only
    assert len(captured.out.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--backend", "vllm", "--backend", "vllm"], "--backend vllm is given twice: name each backend once"),
        (
            ["--backend", "auto", "--backend", "vllm"],
            "--backend auto means every backend installed here: give it alone",
        ),
        (
            ["--backend", "llama-server", "--backend", "vllm", "--trials", "1"],
            "--trials 1 cannot be split among 2 backends",
        ),
    ],
)
def test_bad_backend_flags_are_one_line_exit_2(tmp_path, args, fragment):
    from tests.integration.cli.test_compare import kvtune

    r = kvtune("run", "--runs-dir", str(tmp_path / "runs"), *args, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and lines[0].startswith("kvtune: error:"), r.stderr
    assert not (tmp_path / "runs").exists()
