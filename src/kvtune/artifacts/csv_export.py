"""`kvtune export --format csv`: every trial's flags and metrics as one CSV table.

For plotting a Pareto front in a notebook (``pandas.read_csv``) or a spreadsheet: one row per
trial, in trial order; first who the trial is (number, baseline, feasible, failure, duplicate_of,
objective, reason, and for the trials the verdict compared its role and kind, e.g.
``named: MEETS_WHERE_DEFAULTS_MISS`` or ``defaults: TIED``), then one ``flag:NAME`` column per flag any trial set, then one ``metric:NAME``
column per metric any trial measured, flags and metrics each in sorted order, so the same study
always gives the same columns. An unset flag (the server's default) or a figure not measured is
an empty cell; non-finite figures (a p99 of +inf when requests failed) are empty too, as in
results.json. Pure: results in, text out (stdlib csv).
"""

from __future__ import annotations

import csv
import io
import math

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


def render(results: dict) -> str:
    trials = sorted(results.get("trials") or [], key=lambda t: t.get("number", 0))
    flags = sorted({k for t in trials for k in ((t.get("candidate") or {}).get("flags") or {})})
    metrics = sorted({k for t in trials for k in (t.get("metrics") or {})})
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*FIXED, *(f"flag:{f}" for f in flags), *(f"metric:{m}" for m in metrics)])
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
                )
            ]
        )
    return buf.getvalue()
