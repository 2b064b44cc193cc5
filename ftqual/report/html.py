"""summary.html: the markdown report (markdown.py) as one self-contained page, and its landing fragment.

One renderer: the page is made from the very markdown summary.md holds, converted by markdown-it-py
(CommonMark plus tables), so the two cannot disagree. The page needs nothing beside it: every plot the
markdown references is inlined as a base64 data: URI, the CSS is inline, and there is no script, so it reads
the same mailed, attached to CI or opened from disk. `landing_fragment` is the headline and "What needs
attention" alone, as HTML for Snakemake's report to show first (report/workflow.rst includes it).
"""

from __future__ import annotations

import base64
import html
import mimetypes
from pathlib import Path

from markdown_it import MarkdownIt
from markdown_it.token import Token

__all__ = ["LANDING", "landing_fragment", "markdown_to_html", "render_html"]

# The fragment Snakemake's report shows on its landing page, written beside summary.html.
LANDING = "landing.html"

# The sections the landing fragment keeps after the headline (markdown.py puts them first); it stops at the
# first other one.
_LANDING_SECTIONS = ("## What needs attention", "## Not applicable on this stack")

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
  max-width: 1200px; padding: 16px 24px; color: #1f2328; background: #fff; }
h1#verdict { font-size: 1.6em; margin: 0 0 8px; padding: 10px 14px; border-radius: 6px; color: #fff; }
h1#verdict.pass { background: #1a7f37; }
h1#verdict.fail { background: #cf222e; }
h1#verdict.inconclusive { background: #bf8700; }
h2 { border-bottom: 1px solid #d0d7de; padding-bottom: 4px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 13px; display: block; overflow-x: auto; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
tr:nth-child(even) td { background: #fafbfc; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #f6f8fa; padding: 1px 3px;
  border-radius: 3px; overflow-wrap: anywhere; }
img { max-width: 100%; height: auto; border: 1px solid #d0d7de; margin: 6px 0; }
.missing { color: #cf222e; font-style: italic; }
"""

# Raw HTML in the markdown is shown as text, never passed through: the report quotes log lines and
# evidence, which may hold anything, and the page promises no script.
_MD = MarkdownIt("commonmark", {"html": False}).enable("table")


def _verdict_class(verdict: object) -> str:
    return verdict if verdict in ("pass", "fail") else "inconclusive"


def _tokens(markdown: str, verdict: object) -> list[Token]:
    tokens = _MD.parse(markdown)
    for tok in tokens:
        if tok.type == "heading_open" and tok.tag == "h1":  # the headline: markdown.py's first line
            tok.attrSet("id", "verdict")
            tok.attrSet("class", _verdict_class(verdict))
            break
    return tokens


def _inline_images(tokens: list[Token], base: Path) -> None:
    """Every image the markdown references becomes a data: URI of the file under `base`; one that was not
    written is said in words, not left as a broken image."""
    for tok in tokens:
        for i, child in enumerate(tok.children or []):
            if child.type != "image":
                continue
            src = str(child.attrGet("src") or "")
            path = base / src
            if src.startswith(("data:", "/")) or ".." in Path(src).parts or not path.is_file():
                missing = Token("html_inline", "", 0)
                missing.content = f'<span class="missing">plot not written: {html.escape(src)}</span>'
                tok.children[i] = missing
                continue
            mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            child.attrSet("src", f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}")


def markdown_to_html(markdown: str, verdict: object, base: Path) -> str:
    """The HTML body of `markdown`, its headline marked as the verdict, its images inlined from `base`."""
    tokens = _tokens(markdown, verdict)
    _inline_images(tokens, base)
    # html=False stops the parser taking raw HTML from the markdown; the missing-plot spans are ours, put
    # in after parsing, and the renderer writes html_inline tokens as they are.
    return _MD.renderer.render(tokens, _MD.options, {})


def render_html(summary: dict, markdown: str, base: Path) -> str:
    """summary.html: the page of `markdown` (render_markdown(summary)) with the plots under `base`."""
    title = html.escape(str(summary.get("headline") or "ftqual report"))
    body = markdown_to_html(markdown, summary.get("verdict"), base)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{title}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}</body>\n</html>\n"
    )


def landing_fragment(summary: dict, markdown: str) -> str:
    """The headline, the tally and "What needs attention" (with "Not applicable on this stack" where there
    is one) as an HTML fragment with its own colours, for Snakemake's report to show first."""
    lines = []
    for line in markdown.splitlines():
        if line.startswith("## ") and line.strip() not in _LANDING_SECTIONS:
            break
        lines.append(line)
    colour = {"pass": "#1a7f37", "fail": "#cf222e"}.get(str(summary.get("verdict")), "#bf8700")
    body = markdown_to_html("\n".join(lines) + "\n", summary.get("verdict"), Path("."))
    # an inline style: Snakemake's page has its own stylesheet, which knows nothing of ours
    body = body.replace(
        '<h1 id="verdict"', f'<h1 style="color:#fff;background:{colour};padding:6px 10px" id="verdict"', 1
    )
    return f'<div class="ftqual-landing">\n{body}</div>\n'
