"""The HTML report in a real browser (issue 17): headless Chromium (Debian's ``chromium`` package,
driven by its own ``--dump-dom`` and ``--screenshot`` flags, with the network cut off) loads the page
from a file:// URL; the test checks the rendered DOM — every section present, every picture
decoded, the numbers equal to ``report.json`` — and takes a screenshot. Skipped, saying why, only
where no Chromium is installed (``.ci/run`` installs it)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess

import numpy as np
import pytest

from perfonto.analysis.html_report import SECTIONS
from perfonto.cli import main

from test_report_html import Page, assert_prints

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
TIMEOUT_S = 120
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--mute-audio",
    # nothing may come from the network: every name resolves nowhere, every request goes to a dead proxy
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=http://127.0.0.1:9",
    "--virtual-time-budget=5000",
]


def browser() -> str | None:
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def run_browser(args: list[str], profile) -> subprocess.CompletedProcess:
    """Run Chromium in its own process group with a fresh profile; the whole group is killed when it
    is done or past ``TIMEOUT_S``, so no renderer or zygote outlives the test."""
    exe = browser()
    proc = subprocess.Popen(
        [exe, *FLAGS, f"--user-data-dir={profile}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"Chromium did not finish within {TIMEOUT_S} s")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return subprocess.CompletedProcess(
        proc.args, proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    )


needs_browser = pytest.mark.skipif(
    browser() is None,
    reason="no Chromium on this machine: install Debian's `chromium` "
    "package (apt-get install -y chromium; .ci/run does)",
)

pytestmark = pytest.mark.slow  # a real browser (an external tool): `.ci/run` runs it after the fast suite


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    d = tmp_path_factory.mktemp("browser")
    run = d / "run"
    assert (
        main(["run", *"--model llama-3.1-8b --chips 2 --duration 200ms --by op".split(), "--out", str(run), "--json"])
        == 0
    )
    html = d / "report.html"
    assert main(["report", str(run), "--html", str(html), "--no-timeline"]) == 0
    return html, json.loads((run / "report.json").read_text()), d


@needs_browser
def test_chromium_renders_every_section_with_the_reports_numbers(page):
    html, doc, d = page
    res = run_browser(["--dump-dom", html.as_uri()], d / "profile-dom")
    assert res.returncode == 0, res.stderr[-2000:]
    dom = Page(res.stdout)
    body = next(a for t, a in dom.tags if t == "body")
    images = [a for t, a in dom.tags if t == "img"]
    assert body.get("data-ready") == "yes", "the page's load handler did not run"
    assert len(images) == 4 and body.get("data-images-loaded") == "4", "a picture did not decode in the browser"
    sections = {a.get("id") for t, a in dom.tags if t == "section"}
    assert sections == set(SECTIONS) - {"fleet"}  # a run's page: no fleet section
    headline = [c for c in dom.cells if c["section"] == "headline"]
    assert len(headline) >= 10
    for c in headline:
        assert_prints(c, doc["metrics"][c["data-metric"]]["value"])
    assert len(dom.op_rows) == len(doc["ops"]["rows"])
    for r in doc["ops"]["rows"]:
        got = dom.op_rows[r["op"]]
        assert_prints(got["time_share"], r["time_share"] * 100)
        if r["flops_per_s"] is not None:
            assert_prints(got["flops_per_s"], r["flops_per_s"], si=True)
    assert any(c["section"] == "groups" for c in dom.cells)


@needs_browser
def test_chromium_screenshot_shows_the_page(page):
    from matplotlib.image import imread

    html, _, d = page
    shot = d / "screenshot.png"
    res = run_browser(
        ["--window-size=1280,2400", "--hide-scrollbars", f"--screenshot={shot}", html.as_uri()], d / "profile-shot"
    )
    assert res.returncode == 0 and shot.is_file(), res.stderr[-2000:]
    img = imread(str(shot))
    assert img.shape[:2] == (2400, 1280)
    rgb = img[:, :, :3]
    ink = (rgb < 0.9).any(axis=2).mean()
    colours = len(np.unique((rgb[::8, ::8] * 255).astype(np.uint8).reshape(-1, 3), axis=0))
    assert ink > 0.03 and colours > 50, (ink, colours)  # text, tables and pictures, not a blank page
