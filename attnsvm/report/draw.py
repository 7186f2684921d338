"""Draw one figure of the registry and write its files: PDF, PNG and report caption.

``make_figure(name, sweep_path, summary_path, pdf_path, png_path, caption_path)`` opens the
experiment's sweep store (Zarr; reduced to the figure's ``variables``) and summary (NetCDF),
draws figure ``name`` (:mod:`attnsvm.report.figures`) and writes a vector PDF, a PNG (dpi 200)
and the caption (:mod:`attnsvm.report.captions`), each atomically (:mod:`attnsvm.atomic`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from attnsvm.atomic import atomic_path  # noqa: E402
from attnsvm.report.captions import figure_caption, write_caption  # noqa: E402
from attnsvm.report.figures import figure  # noqa: E402
from attnsvm.report.style import PNG_DPI, caption_notes  # noqa: E402
from attnsvm.report.sweepdata import load_summary, load_sweep  # noqa: E402
from attnsvm.sweep.integrity import clean_stale_partials  # noqa: E402


def save(fig, pdf_path, png_path) -> None:
    """Write the PDF (vector) and the PNG (dpi 200), each atomically.

    Temporary files left by a killed earlier attempt are removed first.
    """
    for path, fmt, kw in ((pdf_path, "pdf", {}), (png_path, "png", {"dpi": PNG_DPI})):
        clean_stale_partials(Path(path))
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, **kw)


def make_figure(name: str, sweep_path, summary_path, pdf_path, png_path, caption_path=None) -> None:
    """Draw figure ``name`` from the sweep and summary; write ``pdf_path`` and ``png_path``.

    With ``caption_path``, also the figure's report caption (RST): its text, the run's numbers
    from the summary and the notes the plot function made.
    """
    fig_decl = figure(name)
    sweep = load_sweep(sweep_path, fig_decl.variables)
    summary = load_summary(summary_path)
    fig = fig_decl.plot(sweep, summary)
    try:
        save(fig, pdf_path, png_path)
        if caption_path is not None:
            write_caption(caption_path, figure_caption(name, summary, caption_notes(fig)))
    finally:
        plt.close(fig)


__all__ = ["make_figure", "save"]
