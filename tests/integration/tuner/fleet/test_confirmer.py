"""Confirmation in every study (issue 31, item 2): a study set up for workers is confirmed by
the one worker elected, a confirmer that died is taken over and resumed from its runs, and
`kvtune confirm` confirms a finished worker study; `show`, `report` and `export` say "not
confirmed yet" before and name the confirmed best after. Fake servers (real processes), SQLite
files shared by the workers (tests/e2e/test_workers_postgres.py: the same on PostgreSQL)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import optuna
import pytest
from rich.console import Console

from kvtune.cli.confirm import ConfirmOptions, confirm_here
from kvtune.errors import SpecError
from kvtune.knobs import Knob
from kvtune.study.spec import StudySpec, parse_objectives
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.assemble import prepare
from kvtune.tuner.confirmation import VERDICT_ATTR
from kvtune.tuner.events import Callbacks
from kvtune.tuner.fleet import claims, confirmer
from kvtune.tuner.fleet.confirmer import CONFIRMED_ATTR, Ending
from kvtune.tuner.fleet.setup import set_up_study
from kvtune.tuner.fleet.workers import join
from kvtune.tuner.trial.context import worker_identity
from kvtune.tuner.trial.disturbance import unwatched
from kvtune.verdict import Verdict
from kvtune.workload import Workload

pytestmark = pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
S = optuna.trial.TrialState
WORKLOAD = Workload(
    concurrency=2, prompt_tokens=8, output_tokens=3, num_requests=2, warmup_requests=0, request_timeout_s=2
)


def launcher() -> FakeLauncher:
    """TTFT 200/100/50 ms for speed 1/2/4: speed 4 is the clear best on ttft_p95."""
    return FakeLauncher(base_ttft_ms=200, base_itl_ms=1, knobs=(Knob("speed", "choices", choices=(1, 2, 4)),))


def set_up(url: str, tmp_path, trials: int = 4) -> None:
    spec = StudySpec(
        study="w",
        trials=trials,
        workload=WORKLOAD,
        startup_timeout_s=20,
        confirm_top=2,
        confirm_pairs=3,
        objective=parse_objectives("ttft_p95"),
    ).validate()
    set_up_study(prepare(spec, launcher=launcher(), runs_dir=str(tmp_path / "setup")), url)


def worker(url: str, tmp_path, slot: int, callbacks: Callbacks | None = None):
    return join(
        url,
        "w",
        launcher=launcher(),
        runs_dir=str(tmp_path / "runs"),
        slot=slot,
        callbacks=callbacks,
        monitor=unwatched,
    )


def runs_of(study: optuna.Study) -> list[dict]:
    """Every confirmation run stored, with its trial, in the order stored."""
    out = []
    for number, record in (study.user_attrs.get("confirmations") or {}).items():
        out += [{"trial": int(number), **r} for r in record.get("runs") or []]
    return sorted(out, key=lambda r: r.get("at") or 0.0)


def test_two_workers_elect_one_that_confirms_and_the_verdict_is_stored_once(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    base = [sys.executable, "-m", "kvtune.testing.driver", "--runs-dir", str(tmp_path), "--storage", url]
    base += ["--study", "w", "--trials", "4", "--confirm-top", "2", "--confirm-pairs", "3"]
    subprocess.run([*base, "--setup-only"], check=True, capture_output=True, timeout=120)
    procs = [
        subprocess.Popen([*base, "--join", "--slot", str(i)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i in (0, 1)
    ]
    ends = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        ends.append(json.loads(out.strip().splitlines()[-1]))
    endings = [e["confirmation"] for e in ends]
    assert endings.count(Ending.CONFIRMED.value) == 1, endings
    assert set(endings) - {Ending.CONFIRMED.value} <= {Ending.ELSEWHERE.value, Ending.DONE.value}
    study = optuna.load_study(study_name="w", storage=url)
    verdict = Verdict.from_dict(study.user_attrs[VERDICT_ATTR])
    winner = procs[endings.index(Ending.CONFIRMED.value)].pid
    assert study.user_attrs[CONFIRMED_ATTR]["by"]["pid"] == winner
    side = optuna.load_study(study_name=claims.side_name("w"), storage=url)
    states = [t.state for t in side.trials]
    assert states.count(S.COMPLETE) == 1 and S.RUNNING not in states  # one claim confirmed, the rest left
    # each proof run stored once: the D W W D pairs the verdict counted, and no more
    proofs = [r for r in runs_of(study) if r["role"] in ("proof", "sentinel")]
    assert len(proofs) == 2 * verdict.counted.pairs and verdict.counted.pairs >= 1


def test_a_confirmer_that_died_is_taken_over_and_its_runs_are_kept(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    set_up(url, tmp_path)
    fresh: list[int] = []

    def die_at_the_third_fresh_run(n: int, text: str) -> None:
        if "re-measuring with a fresh server" in text:
            fresh.append(n)
            if len(fresh) == 3:
                raise KeyboardInterrupt

    first = worker(url, tmp_path, 0, Callbacks(phase=die_at_the_third_fresh_run))
    first.run()
    with pytest.raises(KeyboardInterrupt):
        confirmer.confirm_study(first, url, wait=False)
    before = runs_of(first.study)
    assert len(before) == 2 and VERDICT_ATTR not in first.study.user_attrs
    # as if it had been SIGKILLed instead: its claim stays RUNNING, its process is gone
    side = claims.side_study("w", url)
    dead = claims.claim(side, {**worker_identity(0, None), "start_ticks": -1})
    second = worker(url, tmp_path, 1)
    second.run()  # the budget is spent: nothing to measure
    result = confirmer.confirm_study(second, url, wait=False)
    assert result.ending is Ending.CONFIRMED
    assert side.trials[dead.number].state is S.FAIL
    study = second.study
    assert VERDICT_ATTR in study.user_attrs and study.user_attrs[CONFIRMED_ATTR]["by"]["slot"] == 1
    after = runs_of(study)
    assert after[: len(before)] == before and len(after) > len(before)  # resumed, not redone


def kvtune(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kvtune.cli", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "250"},
    )


def readers(url: str, tmp_path) -> tuple[str, str, str, str]:
    """What `kvtune show`, `report` (the HTML) and `export` (the script, its stderr) say now."""
    show = kvtune("show", "w", "--storage", url, cwd=tmp_path)
    assert show.returncode == 0, show.stderr
    html = tmp_path / "report.html"
    report = kvtune("report", "w", "--storage", url, "-o", str(html), cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    export = kvtune("export", "w", "--storage", url, "--format", "bash", cwd=tmp_path)
    assert export.returncode == 0, export.stderr
    return show.stdout, html.read_text(), export.stdout, export.stderr


def test_kvtune_confirm_confirms_a_finished_worker_study_and_the_readers_name_its_best(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    set_up(url, tmp_path)
    worker(url, tmp_path, 0).run()  # a worker of an older kvtune: it left without confirming
    show, html, script, note = readers(url, tmp_path)
    command = f"kvtune confirm --storage {url} --study w"
    assert "not confirmed yet" in show and command in " ".join(show.split())
    assert "id='not-confirmed'" in html and command in html
    assert "# not confirmed yet" in script and "not confirmed yet" in note

    out = io.StringIO()
    status = confirm_here(
        ConfirmOptions(url, "w", runs_dir=str(tmp_path / "runs")),
        out=Console(file=out, width=250),
        launcher=launcher(),
        monitor=unwatched,
    )
    printed = out.getvalue()
    assert status == 0, printed
    assert "confirmed study w here" in printed and "Verdict: " in printed and "Best command line:" in printed
    results = json.loads((tmp_path / "runs" / "w" / "results.json").read_text())
    verdict = results["verdict"]
    assert verdict is not None and results["best_trial"] == (verdict["named"] if verdict["named"] is not None else 0)

    show, html, script, note = readers(url, tmp_path)
    for text in (show, html, script, note):
        assert "not confirmed yet" not in text
    assert "Verdict: " in show and "id='verdict'" in html
    assert f"trial {results['best_trial']} (the best trial" in script

    again = io.StringIO()  # once more: the stored verdict, nothing measured
    assert (
        confirm_here(
            ConfirmOptions(url, "w", runs_dir=str(tmp_path / "runs")),
            out=Console(file=again, width=250),
            launcher=launcher(),
        )
        == 0
    )
    assert "was confirmed by slot 0 on" in again.getvalue() and "Verdict: " in again.getvalue()


def test_kvtune_confirm_refuses_a_host_of_another_hardware_class_before_any_server_starts(tmp_path):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    set_up(url, tmp_path, trials=1)
    first = worker(url, tmp_path, 0)
    first.run()
    study = first.study
    study.set_user_attr("hardware", {**study.user_attrs["hardware"], "cpu": "Some Other CPU"})
    with pytest.raises(SpecError, match=r"was measured on .*Some Other CPU.*; this host is .*--allow-mixed-hardware$"):
        confirm_here(ConfirmOptions(url, "w", runs_dir=str(tmp_path / "runs")), launcher=launcher(), monitor=unwatched)
    names = [s.study_name for s in optuna.get_all_study_summaries(url)]
    assert claims.side_name("w") not in names and VERDICT_ATTR not in study.user_attrs  # nothing claimed, nothing run


def test_kvtune_confirm_exits_75_on_a_storage_that_does_not_answer_and_2_on_a_missing_study(tmp_path):
    down = kvtune("confirm", "--storage", "postgresql://nobody:secret@127.0.0.1:9/kvtune", "--study", "w", cwd=tmp_path)
    assert down.returncode == 75, down.stderr
    lines = down.stderr.strip().splitlines()
    assert len(lines) == 1 and "unreachable" in lines[0] and "secret" not in down.stderr
    missing = kvtune("confirm", "--storage", f"sqlite:///{tmp_path / 'none.db'}", "--study", "w", cwd=tmp_path)
    assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written: no runs folder, no database
