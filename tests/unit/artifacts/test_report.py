"""The HTML report: every section and plot present, self-contained (no external URL, no script).

Rendered from real results.json files of small llama-server studies (data/, written before the
failure kind and importance were recorded), one with failures of every kind added, and from a real
Optuna study run with the fake launcher.

The tests here start no process; those that do are in tests/integration/artifacts/test_report.py.
"""

import copy
import json
import re
from pathlib import Path

import pytest

from kvtune import hardware
from kvtune.artifacts import report
from tests.paths import NVML_DATA, UNIT_DATA

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


def load(name: str) -> dict:
    return json.loads((DATA / f"results_{name}.json").read_text())


def with_failures(results: dict) -> dict:
    """The study plus one trial of each failure kind the tuner records (and a duplicate), and the
    parameter importance the tuner stores."""
    r = copy.deepcopy(results)
    r["importance"] = {"parallel": 0.6, "threads": 0.3, "cache-type-k": 0.1}
    proto, n = r["trials"][1], len(r["trials"])
    launch = {"ttft_p95": 1e6, "error_rate": 1e6, "server_ran": 1.0}
    for reason, flags, keep in (
        ("pre-screen: per-slot context 256 < request length 300", {"parallel": 8}, False),
        ("server failed to start: error: unknown value for --cache-type-k", {"threads": 1}, False),
        ("server start timed out: no /health after 180 s", {"parallel": 16}, False),
        ("server crashed during the benchmark (status -9): out of memory", {"parallel": 4}, True),
    ):
        t = copy.deepcopy(proto)
        t.update(number=n, reason=reason, feasible=False, duplicate_of=None, constraints=dict(launch))
        t["candidate"]["flags"].update(flags)
        if not keep:
            t.update(metrics=None, objective=None)
        r["trials"].append(t)
        n += 1
    dup = copy.deepcopy(r["trials"][-3])
    dup.update(number=n, duplicate_of=n - 3)
    r["trials"].append(dup)
    return r


def plots_in(html: str) -> dict[str, str]:
    """id -> the figure's markup, for every <figure class="plot">."""
    return dict(re.findall(r'<figure class="plot" id="([\w-]+)">(.*?)</figure>', html, flags=re.S))


def assert_self_contained(html: str) -> None:
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", html, flags=re.I)
    assert not re.search(r"url\(\s*['\"]?\s*(?:https?:)?//", html, flags=re.I)
    assert "<script" not in html.lower() and "<link" not in html.lower() and "@import" not in html
    assert all(h.startswith("#") for h in re.findall(r'xlink:href="([^"]*)"', html))
    assert "default-src 'none'" in html  # the browser itself refuses any fetch


def test_report_of_a_study_with_failures_has_every_section_and_plot():
    r = with_failures(load("misses"))
    html = report.render_report(r)
    plots = plots_in(html)
    assert set(plots) == set(report.PLOTS)
    assert all("<svg" in body and "</svg>" in body for body in plots.values())
    for sid in SECTIONS:
        assert re.search(rf"""id=['"]{sid}['"]""", html), sid
    assert_self_contained(html)
    for text in (
        "demo12",
        "AMD EPYC",
        "llama-server 0.6.0-dev",
        "TTFT p95 &lt; 700 ms",
        "2 concurrent users",
        "missed target ttft_p95",
        "server start timed out",
        "server crashed during the benchmark",
        "pre-screen",
        "same config as #",
    ):
        assert text in html, text
    # best vs baseline: every metric improved in this study, so every change is green
    table = re.search(r"<table id='best-vs-baseline'>.*?</table>", html, flags=re.S).group(0)
    assert table.count("class='num better'") == 6 and "worse" not in table
    # the SLO line and the Pareto front are drawn (labels are kept as SVG text)
    assert "SLO TTFT p95 &lt; 700 ms" in plots["plot-pareto"] and "Pareto front" in plots["plot-pareto"]
    assert "best feasible so far" in plots["plot-history"]
    for flag in ("--parallel", "--threads", "--cache-type-k"):
        assert flag in plots["plot-slice"]
        assert f">{flag[2:]}<" in plots["plot-importance"]  # bar labels, kept as SVG text
    assert "trade-off view" in html  # one objective: throughput vs TTFT is not the objective


def test_small_study_report():
    html = report.render_report(load("small"))
    assert set(plots_in(html)) == set(report.PLOTS) - {"plot-importance"}
    assert "older kvtune" in html  # results.json without importance
    assert "No failures" in html
    assert_self_contained(html)


def test_worse_metrics_are_red():
    r = load("small")
    r["best_vs_baseline"][2].update(better=False, change_pct=12.5)
    html = report.render_report(r)
    assert "<td class='num worse'>+12.5%</td>" in html


def test_importance_the_tuner_skipped_is_a_note_with_its_reason():
    r = load("small")
    r["importance"] = {"skipped": "needs at least 8 measured feasible trials with tuned flags; this study has 3"}
    html = report.render_report(r)
    assert "plot-importance" not in plots_in(html)
    assert 'id="plot-importance-note"' in html and "this study has 3" in html


def test_report_of_a_multi_objective_study():
    """The objective is a list: the report labels by the first and plots the study's own Pareto set."""
    r = load("misses")
    r["spec"]["objective"] = ["output_throughput", "ttft_p99"]
    for t in r["trials"]:
        m = t.get("metrics") or {}
        t["objectives"] = [m.get("output_throughput"), m.get("p99_ttft_ms")]
    html = report.render_report(r)
    assert "Pareto set over the study&#x27;s objectives" in html
    assert "output_throughput, ttft_p99" in plots_in(html)["plot-pareto"]
    assert "output tok/s (maximize), TTFT p99 (ms) (minimize)" in html


def test_study_with_nothing_measured_still_renders():
    r = load("small")
    for t in r["trials"]:
        t.update(
            feasible=False,
            metrics=None,
            objective=None,
            reason="server failed to start: boom",
            constraints={"ttft_p95": 1e6, "server_ran": 1.0},
            failure="start failed",
        )
    r.update(best_trial=None)
    del r["best_vs_baseline"], r["best_argv"]
    html = report.render_report(r)
    assert "plot-pareto-note" in html and "No trial has been measured yet" in html
    assert "server failed to start" in html
    assert_self_contained(html)


def test_nothing_feasible_says_what_the_hardware_can_do_instead_of_empty_boxes():
    r = load("misses")
    r.update(
        best_trial=None,
        nearest_misses=[{"trial": 1, "reason": "ttft_p95 11800 ms breaks TTFT p95 < 10000 ms"}],
        what_would_work={
            "targets": "TTFT p95 < 10000 ms",
            "missed": [
                {
                    "target": "TTFT p95 < 10000 ms",
                    "figure": 11800.0,
                    "text": "11.8 s",
                    "trial": 1,
                    "config": "parallel=2",
                }
            ],
            "nearest": 1,
            "nearest_config": "parallel=2",
            "nearest_shortfall": {"TTFT p95 < 10000 ms": 0.18},
            "load": {"trial": 1, "unit": "users", "asked": 8.0, "held": 6.0, "lowest": 1.0},
        },
    )
    r.pop("best_vs_baseline", None)
    html = report.render_report(r)
    assert "What this hardware can do" in html and "nearest-misses" in html
    assert "TTFT p95 &lt; 10000 ms: best 11.8 s, by trial 1 (parallel=2)" in html
    assert "Nearest config: trial 1 (parallel=2): TTFT p95 &lt; 10000 ms 18% over" in html
    assert "meets TTFT p95 &lt; 10000 ms at 6 users on this box (asked: 8)" in html
    assert "would meet" not in html
    assert "No best-versus-baseline comparison yet" not in html


def test_text_is_escaped():
    r = load("small")
    r["study"] = "<script>alert(1)</script>"
    html = report.render_report(r)
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_rendering_is_deterministic_and_write_report_writes_it(tmp_path):
    r = load("misses")
    path = report.write_report(tmp_path / "report.html", r)
    assert path.read_text(encoding="utf-8") == report.render_report(r)
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("name", ["small", "misses"])
def test_svg_ids_are_unique_across_plots(name):
    html = report.render_report(with_failures(load(name)))
    ids = re.findall(r'\sid="([^"]+)"', html)
    assert len(ids) == len(set(ids))


def test_the_report_names_the_gpus_of_a_recorded_host():
    from kvtune.testing.nvml_recorded import Recorded

    rec = json.loads((NVML_DATA / "rtx4090_x2_pcie.json").read_text())
    r = load("misses")
    r["hardware"] = hardware.fingerprint(Recorded(rec), cgroup=Path("/nonexistent-cgroup"))
    html = report.render_report(r)
    assert "2 x NVIDIA GeForce RTX 4090 over PCIe (PHB), compute 8.9, CUDA 12.4, driver 550.107.02" in html
    assert "GPU 1: NVIDIA GeForce RTX 4090, 24.0 GiB, compute 8.9, 1008 GB/s (spec sheet)" in html
    assert "between GPUs: PCIe (PHB) (63 GB/s, slowest pair)" in html
    assert "GPU 0:" not in report.render_report(load("misses"))  # a CPU host: no GPU lines


def test_the_report_shows_the_verdict_as_the_summary_prints_it():
    from kvtune.artifacts import report
    from kvtune.verdict import Counted, DecisionKind, Verdict

    v = Verdict(DecisionKind.TIED, named=0, reason="trial 2 and the defaults are tied.", candidate=2, baseline=0)
    v = Verdict(**{**v.__dict__, "counted": Counted(pairs=9, looks=3)})
    html = report._named({"verdict": v.to_dict(), "named_best": {"why": "ignored"}})
    assert "Verdict: tied with the defaults" in html and "trial 2 and the defaults are tied." in html
    assert "<ul id='verdict'>" in html and "9 pair(s) D W W D over 3 look(s)" in html
    assert (
        report._named({"named_best": {"why": "the only one"}}) == "<p id='named-best'>Why this one: the only one.</p>"
    )
