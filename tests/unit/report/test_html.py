"""summary.html (ftqual.report.html): the markdown report as one self-contained page; the landing fragment."""

from __future__ import annotations

import base64
import re

from ftqual.report.html import landing_fragment, markdown_to_html, render_html

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
MARKDOWN = """# ftqual: FAIL — kill: cause

1/2 scenarios pass

## What needs attention

- FAIL **kill** — <script>alert(1)</script>

## Stack

| component | version |
|---|---|
| torch | 2.11.0 |

## Plots

![loss_comparison](plots/loss_comparison.png)
![timeline_kill](plots/timeline_kill.png)
"""


def test_the_page_is_the_markdown_with_its_plots_inlined_and_no_script(tmp_path):
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "loss_comparison.png").write_bytes(PNG)
    page = render_html({"verdict": "fail", "headline": "ftqual: FAIL — kill: cause"}, MARKDOWN, tmp_path)
    assert page.startswith("<!DOCTYPE html>") and "<style>" in page
    assert '<h1 id="verdict" class="fail">ftqual: FAIL — kill: cause</h1>' in page
    assert "<table>" in page and "<td>2.11.0</td>" in page
    assert f'src="data:image/png;base64,{base64.b64encode(PNG).decode()}"' in page
    # a plot that was not written is said, never a broken image or a link off the page
    assert "plot not written: plots/timeline_kill.png" in page and 'src="plots/' not in page
    # raw HTML from the evidence is shown as text: the page has no script at all
    assert "<script" not in page and "&lt;script&gt;" in page
    assert page.index('id="verdict"') < page.index("What needs attention") < page.index("<table>")


def test_a_verdict_other_than_pass_or_fail_is_amber(tmp_path):
    for verdict, css in (
        ("pass", "pass"),
        ("fail", "fail"),
        ("inconclusive", "inconclusive"),
        (None, "inconclusive"),
    ):
        body = markdown_to_html("# headline\n", verdict, tmp_path)
        assert f'<h1 id="verdict" class="{css}">' in body, (verdict, body)


def test_the_landing_fragment_is_the_verdict_and_what_needs_attention_only():
    fragment = landing_fragment({"verdict": "fail"}, MARKDOWN)
    assert 'id="verdict"' in fragment and "background:#cf222e" in fragment
    assert "What needs attention" in fragment and "<strong>kill</strong>" in fragment
    assert "Stack" not in fragment and "<img" not in fragment
    assert re.match(r'<div class="ftqual-landing">', fragment)


def test_not_applicable_stays_in_the_landing_fragment():
    md = MARKDOWN.replace("## Stack", "## Not applicable on this stack\n\n- **x**: why\n\n## Stack")
    fragment = landing_fragment({"verdict": "pass"}, md)
    assert "Not applicable on this stack" in fragment and "background:#1a7f37" in fragment
    assert "<table>" not in fragment
