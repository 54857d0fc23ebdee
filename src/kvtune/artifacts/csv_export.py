"""`kvtune export --format csv`: every trial's flags and metrics as one CSV table.

For plotting a Pareto front in a notebook (``pandas.read_csv``) or a spreadsheet: one row per
trial, in trial order; first who the trial is (number, baseline, feasible, failure, duplicate_of,
objective, reason, and for the trials the verdict compared its role and kind, e.g.
``named: MEETS_WHERE_DEFAULTS_MISS`` or ``defaults: TIED``), then one ``flag:NAME`` column per flag any trial set, then one ``metric:NAME``
column per metric any trial measured (each trial's search measurement: one run, the best's
selected as the maximum), flags and metrics each in sorted order, so the same study always gives
the same columns. When the verdict's fresh runs back the best (study/best_figures.py, results.json
"best_figures"), the best's and the defaults' rows also carry them: ``fresh_runs`` (runs per
side), ``fresh:NAME`` with its 95% interval ``fresh_low:NAME``/``fresh_high:NAME`` (the objective
and each metric the summary shows), and on the best's row the change against the defaults,
``change_pct:NAME`` with ``change_low_pct:NAME``/``change_high_pct:NAME``. An unset flag (the server's default) or a figure not measured is
an empty cell; non-finite figures (a p99 of +inf when requests failed) are empty too, as in
results.json. Pure: results in, text out (stdlib csv).
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

from kvtune.study.best_figures import BestFigures, recorded

FIXED = ("trial", "baseline", "feasible", "failure", "duplicate_of", "objective", "reason", "verdict")


def _cell(v: object) -> object:
    if v is None or isinstance(v, float) and not math.isfinite(v):
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    return v


def _feasible(t: dict) -> bool:
    c = t.get("constraints") or {}
    return bool(c) and all(v is not None and v <= 0 for v in c.values())


def verdict_cell(t: dict) -> str | None:
    """The trial's part in the study's verdict: named, tested (not named) or the defaults."""
    v = t.get("verdict")
    if not isinstance(v, dict):
        return None
    n = t.get("number")
    role = "named" if n == v.get("named") else "defaults" if n == v.get("baseline") else "tested"
    return f"{role}: {v.get('kind')}"


def fresh_figures(results: dict) -> BestFigures | None:
    """The best's fresh figures results.json records (None: none, or search measurements)."""
    figures = recorded(results)
    return figures if figures is not None and figures.fresh else None


def fresh_cells(figures: BestFigures | None, number: Any) -> dict[str, float | None]:
    """The fresh columns of trial `number`: the best's or the defaults' figures, else none."""
    if figures is None or number not in (figures.trial, figures.baseline):
        return {}
    out: dict[str, float | None] = {"fresh_runs": figures.runs}
    rows = [r for r in (figures.objective_row, *figures.rows) if r is not None]
    for r in rows:
        name = "objective" if r is figures.objective_row else r.metric
        side = r.best if number == figures.trial else r.defaults
        if side is not None:
            out.update({f"fresh:{name}": side.value, f"fresh_low:{name}": side.low, f"fresh_high:{name}": side.high})
        if number == figures.trial and number != figures.baseline and r.change is not None:
            c = r.change
            out.update(
                {f"change_pct:{name}": c.pct, f"change_low_pct:{name}": c.low, f"change_high_pct:{name}": c.high}
            )
    return out


def render(results: dict) -> str:
    trials = sorted(results.get("trials") or [], key=lambda t: t.get("number", 0))
    flags = sorted({k for t in trials for k in ((t.get("candidate") or {}).get("flags") or {})})
    metrics = sorted({k for t in trials for k in (t.get("metrics") or {})})
    figures = fresh_figures(results)
    fresh = {t.get("number"): fresh_cells(figures, t.get("number")) for t in trials}
    extra = list(dict.fromkeys(k for cells in fresh.values() for k in cells))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*FIXED, *(f"flag:{f}" for f in flags), *(f"metric:{m}" for m in metrics), *extra])
    for t in trials:
        fl = (t.get("candidate") or {}).get("flags") or {}
        m = t.get("metrics") or {}
        w.writerow(
            [
                _cell(x)
                for x in (
                    t.get("number"),
                    bool(t.get("baseline")),
                    _feasible(t),
                    t.get("failure"),
                    t.get("duplicate_of"),
                    t.get("objective"),
                    t.get("reason") or None,
                    verdict_cell(t),
                    *(fl.get(f) for f in flags),
                    *(m.get(k) for k in metrics),
                    *(fresh[t.get("number")].get(k) for k in extra),
                )
            ]
        )
    return buf.getvalue()
