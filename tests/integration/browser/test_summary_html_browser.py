"""summary.html in a real browser: headless Chromium (Debian's `chromium`, installed by .ci/run) loads the
page as a reader would and says where the verdict lies and whether every plot decodes.

The page has no script of its own, so a wrapper page in tmp loads it in a 1280x800 iframe and its own script
writes, into the wrapper's DOM, the verdict element's bounding rect and each image's `complete` and
`naturalWidth`; `--dump-dom` prints that DOM, which the test parses. A screenshot is left in tmp for a human.
Without chromium the test skips, unless CI is set (.ci/run): there it must fail, never skip.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from ftqual.report import main as report_main

RECORDED = Path(__file__).resolve().parents[2] / "data" / "megatron-h200-campaign-1gpu" / "results"
WIDTH, HEIGHT = 1280, 800

# The wrapper's own script: runs once the iframe (and so every image in it) has loaded.
WRAPPER = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><style>body{margin:0} iframe{border:0;width:100%;height:800px}</style>
</head><body>
<iframe id="page" src="summary.html"></iframe>
<pre id="probe">pending</pre>
<script>
document.getElementById("page").addEventListener("load", () => {
  const out = document.getElementById("probe");
  try {
    const doc = document.getElementById("page").contentDocument;
    const verdict = doc.getElementById("verdict");
    out.textContent = JSON.stringify({
      verdict_bottom: verdict ? verdict.getBoundingClientRect().bottom : null,
      verdict_text: verdict ? verdict.textContent : null,
      images: Array.from(doc.images).map(img => ({alt: img.alt, ok: img.complete && img.naturalWidth > 0})),
      scripts: doc.scripts.length,
    });
  } catch (err) {
    out.textContent = JSON.stringify({error: String(err)});
  }
});
</script></body></html>
"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        problem = "chromium not found (Debian: `apt-get install -y chromium`; .ci/run installs it)"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set but {problem}")
        pytest.skip(problem)
    return found


def browse(page: Path, tmp: Path) -> dict:
    """Load `page` (a summary.html) in headless Chromium through the wrapper; the probe's findings."""
    binary = chromium()
    shutil.copyfile(page, tmp / "summary.html")
    (tmp / "wrapper.html").write_text(WRAPPER, encoding="utf-8")
    common = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--allow-file-access-from-files",
        f"--window-size={WIDTH},{HEIGHT}",
        f"--user-data-dir={tmp / 'profile'}",  # never the user's profile, nothing left behind
    ]
    dom = subprocess.run(
        [*common, "--dump-dom", (tmp / "wrapper.html").as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-3000:]
    # for the human: how the first screen looks (kept in tmp, never committed)
    subprocess.run(
        [*common, f"--screenshot={tmp / 'summary.png'}", (tmp / "summary.html").as_uri()],
        capture_output=True,
        timeout=120,
    )
    match = re.search(r'<pre id="probe">(.*?)</pre>', dom.stdout, re.S)
    assert match, dom.stdout[-3000:]
    return json.loads(html.unescape(match.group(1)))


@pytest.fixture(scope="module")
def recorded_report(tmp_path_factory) -> Path:
    """summary.html of the recorded one-GPU campaign (a FAIL with three plots), made by `ftqual report`."""
    out = tmp_path_factory.mktemp("report")
    args = [f"--verify=baseline={next(RECORDED.glob('baseline/*-1/verify.json'))}"]
    args += [f"--verify=campaign={next(RECORDED.glob('campaign/*-1/verify.json'))}"]
    args += [f"--preflight={next(RECORDED.glob('preflight/**/preflight.json'))}", f"--out={out}"]
    assert report_main(args) == 0
    return out


@pytest.mark.timeout(300)
def test_summary_html_opens_on_the_verdict_and_every_plot_decodes(recorded_report, tmp_path):
    found = browse(recorded_report / "summary.html", tmp_path)
    assert "error" not in found, found
    assert found["verdict_text"].startswith("ftqual: FAIL"), found
    assert found["verdict_bottom"] is not None and 0 < found["verdict_bottom"] <= HEIGHT, found
    # every image summary.md references (a campaign's plot is shown twice), each plot among them
    markdown = (recorded_report / "summary.md").read_text(encoding="utf-8")
    plots = json.loads((recorded_report / "summary.json").read_text())["plots"]
    assert len(found["images"]) == markdown.count("](plots/") >= len(plots) >= 3, found
    assert set(plots) <= {img["alt"] for img in found["images"]}
    assert all(img["ok"] for img in found["images"]), found["images"]
    assert found["scripts"] == 0
    assert (tmp_path / "summary.png").stat().st_size > 0


@pytest.mark.timeout(300)
def test_a_plot_whose_data_is_corrupted_is_reported_broken(recorded_report, tmp_path):
    """The negative control: the probe does see a broken image, so its all-clear above means something."""
    page = (recorded_report / "summary.html").read_text(encoding="utf-8")
    first = page.index("data:image/png;base64,") + len("data:image/png;base64,")
    corrupted = page[:first] + "AAAA" * 64 + page[first + 256 :]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "summary.html").write_text(corrupted, encoding="utf-8")
    found = browse(tmp_path / "in" / "summary.html", tmp_path)
    assert [img["ok"] for img in found["images"]].count(False) == 1, found["images"]
