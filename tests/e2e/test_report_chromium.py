"""The report in a real browser: headless Chromium loads it offline, logs no console message at
all (no script error, no blocked fetch), every plot reaches the DOM, and a screenshot is taken.

Needs Debian's chromium package (`apt-get install -y chromium`); skipped without it. The report
carries a Content-Security-Policy of default-src 'none', so any external reference would show up
here as a console message rather than as a silent network fetch.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kvtune.artifacts import report
from tests.unit.artifacts.test_report import load, with_failures

pytestmark = pytest.mark.e2e

CHROMIUM = next(
    (
        p
        for p in (
            os.environ.get("KVTUNE_CHROMIUM"),
            shutil.which("chromium"),
            shutil.which("chromium-browser"),
            "/usr/bin/chromium",
        )
        if p and os.path.exists(p)
    ),
    None,
)


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--enable-logging=stderr",
        "--v=0",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def console_messages(stderr: str) -> list[str]:
    # Chromium logs every console message (errors, CSP violations, uncaught exceptions) as CONSOLE
    return [ln for ln in stderr.splitlines() if ":CONSOLE" in ln or "Uncaught" in ln]


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary (apt-get install -y chromium)")
def test_report_loads_in_headless_chromium(tmp_path):
    page = report.write_report(tmp_path / "report.html", with_failures(load("misses")))
    url = page.resolve().as_uri()

    dom = chromium(tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert console_messages(dom.stderr) == []
    figures = dict(re.findall(r'<figure class="plot" id="([\w-]+)">(.*?)</figure>', dom.stdout, flags=re.S))
    assert set(figures) == set(report.PLOTS)
    for pid, body in figures.items():
        assert body.count("<svg") == 1 and "<path" in body, pid

    png = tmp_path / "report.png"
    shot = chromium(tmp_path, f"--screenshot={png}", "--window-size=1200,6000", url)
    assert shot.returncode == 0 and console_messages(shot.stderr) == []
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 50_000
    from PIL import Image  # matplotlib's own dependency

    with Image.open(png) as im:
        assert im.size == (1200, 6000)
        colors = im.convert("RGB").resize((60, 300)).getcolors(maxcolors=100_000)
        assert len(colors) > 50  # plots and tables, not a blank page
    keep = os.environ.get("KVTUNE_REPORT_SCREENSHOT")
    if keep:
        shutil.copy(png, keep)
