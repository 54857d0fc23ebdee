"""The HTML report: every section and plot present, self-contained (no external URL, no script).

Rendered from real results.json files of small llama-server studies (data/, written before the
failure kind and importance were recorded), one with failures of every kind added, and from a real
Optuna study run with the fake launcher.

Here the tests that start processes; the rest are in tests/unit/artifacts/test_report.py.
"""

import json
import re

import pytest

from kvtune import hardware
from kvtune.artifacts import report
from kvtune.jsonsafe import dumps
from kvtune.knobs import Knob
from kvtune.study.results import build_payload
from kvtune.study.spec import StudySpec
from kvtune.testing.fake_launcher import FakeLauncher
from kvtune.tuner.search.importance import MIN_TRIALS, param_importance
from tests.paths import UNIT_DATA

DATA = UNIT_DATA
SECTIONS = (
    "summary",
    "best",
    "best-vs-baseline",
    "best-command",
    "tradeoff",
    "flags",
    "history",
    "failures",
    "failures-table",
    "trials",
    "trials-table",
)


def plots_in(html: str) -> dict[str, str]:
    """id -> the figure's markup, for every <figure class="plot">."""
    return dict(re.findall(r'<figure class="plot" id="([\w-]+)">(.*?)</figure>', html, flags=re.S))


def assert_self_contained(html: str) -> None:
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", html, flags=re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//", html, flags=re.I)
    assert "<script" not in html.lower() and "<link" not in html.lower() and "@import" not in html
    assert all(h.startswith("#") for h in re.findall(r'xlink:href="([^"]*)"', html))
    assert "default-src 'none'" in html  # the browser itself refuses any fetch


def test_report_from_a_real_optuna_study(make_tuner, tiny_workload):
    """Importance computed by the tuner from the study itself (its own distributions) and stored
    in results.json; the report draws what is stored. `unused` is a flag the fake server ignores."""
    launcher = FakeLauncher(knobs=(Knob("speed", "float", low=1.0, high=8.0), Knob("unused", "int", low=1, high=1000)))
    spec = StudySpec(
        study="real", trials=MIN_TRIALS + 1, workload=tiny_workload, targets=["ttft<1s"], informed_start=False
    ).validate()
    tuner, _ = make_tuner(spec, launcher)
    outcomes = tuner.run()
    importance = param_importance(tuner.study)
    assert importance.values is not None, importance.skipped
    payload = json.loads(
        dumps(
            build_payload(
                "real",
                spec.to_dict(),
                hardware.fingerprint(),
                "fake 1.0",
                [t.describe() for t in tuner.targets],
                spec.objective_specs,
                outcomes,
                importance.to_dict(),
            )
        )
    )
    assert payload["importance"] == pytest.approx(importance.values)
    assert all(t["failure"] is None for t in payload["trials"])
    html = report.render_report(payload)
    assert set(plots_in(html)) == set(report.PLOTS)
    drawn = plots_in(html)["plot-importance"]
    assert ">speed<" in drawn and ">unused<" in drawn  # bar labels, kept as SVG text
    assert_self_contained(html)
