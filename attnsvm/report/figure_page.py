"""A figure's page in the report: the image with its caption, this run's numbers, below it.

The Snakemake report shows a PNG result alone and hides its caption behind a small "i"
icon; a reader of a figure needs what it shows and this run's numbers under it. So each
figure is also written as one self-contained HTML page (``<figure>.html`` in the figures
folder, :data:`attnsvm.sweep.paths.LAYOUT`): the PNG embedded as a data URI, the caption
(:mod:`attnsvm.report.captions`, RST) rendered below it. The report lists these pages
(``workflow/rules/sweep.smk``, rule ``derive``), and the claims table links to them.
"""

from __future__ import annotations

import base64
import html
import os
from pathlib import Path

from docutils.core import publish_parts
from docutils.writers.html5_polyglot import Writer

from attnsvm.atomic import write_text_atomic

#: the page's style: the image at most the frame's width, the caption under it, readable
PAGE_CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1rem 1.5rem;
       color: #1f2933; font-size: 15px; line-height: 1.45; }
figure { margin: 0; }
figure img { display: block; max-width: 100%; max-height: 78vh; height: auto; }
figcaption { max-width: 62rem; margin-top: 0.8rem; }
figcaption p { margin: 0.4rem 0; }
figcaption ul { margin: 0.2rem 0 0.6rem 1.2rem; padding: 0; }
"""


def caption_html(caption_rst: str) -> str:
    """The caption's RST as an HTML fragment (docutils, as the report renders captions)."""
    # a writer object: docutils 0.22 deprecates writer_name, older ones take no name as writer
    return publish_parts(caption_rst, writer=Writer())["body"]


def figure_page_html(png: str | os.PathLike, caption_rst: str, title: str) -> str:
    """The page of one figure: ``png`` embedded, ``caption_rst`` rendered under it."""
    data = base64.b64encode(Path(png).read_bytes()).decode("ascii")
    name = html.escape(title)
    return "\n".join(
        [
            "<!DOCTYPE html>",
            "<html lang='en'><head><meta charset='utf-8'>",
            f"<title>{name}</title><style>{PAGE_CSS}</style></head><body>",
            f"<figure><img src='data:image/png;base64,{data}' alt='{name}'>",
            f"<figcaption>{caption_html(caption_rst)}</figcaption></figure>",
            "</body></html>",
        ]
    )


def write_figure_page(
    png: str | os.PathLike, caption: str | os.PathLike, out: str | os.PathLike, title: str
) -> Path:
    """Write the page of the figure at ``png`` with the caption file ``caption`` to ``out``
    (atomically)."""
    text = figure_page_html(png, Path(caption).read_text(encoding="utf-8"), title)
    return write_text_atomic(out, text)


__all__ = ["caption_html", "figure_page_html", "write_figure_page"]
