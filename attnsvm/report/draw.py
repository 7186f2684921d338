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
import xarray as xr  # noqa: E402

from attnsvm.atomic import atomic_path  # noqa: E402
from attnsvm.report.captions import figure_caption, write_caption  # noqa: E402
from attnsvm.report.figure_page import write_figure_page  # noqa: E402
from attnsvm.report.figures import figure  # noqa: E402
from attnsvm.report.style import PNG_DPI, caption_notes  # noqa: E402
from attnsvm.report.sweepdata import load_summary, load_sweep  # noqa: E402
from attnsvm.sweep.derived import (  # noqa: E402
    figure_code_digest,
    figure_record,
    sweep_digest,
    write_record,
)
from attnsvm.sweep.integrity import clean_stale_partials  # noqa: E402
from attnsvm.sweep.summary import verified_summary  # noqa: E402


def save(fig, pdf_path, png_path) -> None:
    """Write the PDF (vector) and the PNG (dpi 200), each atomically.

    Temporary files left by a killed earlier attempt are removed first.
    """
    for path, fmt, kw in ((pdf_path, "pdf", {}), (png_path, "png", {"dpi": PNG_DPI})):
        clean_stale_partials(Path(path))
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=fmt, **kw)


def make_figure(
    name: str, sweep_path, summary_path, pdf_path, png_path, caption_path=None, page_path=None
) -> None:
    """Draw figure ``name`` from the sweep and summary; write ``pdf_path`` and ``png_path``.

    With ``caption_path``, also the figure's report caption (RST): its text, the run's numbers
    from the summary and the notes the plot function made.
    The summary is checked against its digest record and the sweep first
    (:func:`attnsvm.sweep.summary.verified_summary`: one error naming the file); the figure's
    digest record (the summary's and sweep's digests, the figure code's SHA-256; docs/store.md)
    is written last, next to the PNG.
    """
    fig_decl = figure(name)
    record = figure_record(png_path)
    record.unlink(missing_ok=True)  # files without their record are incomplete
    from_files = not isinstance(sweep_path, xr.Dataset | None) and not isinstance(
        summary_path, xr.Dataset | None
    )  # Datasets in memory (tests, notebooks): drawn without checks and without a record
    if from_files:
        inputs = {
            "summary": verified_summary(summary_path, sweep_path),
            "sweep": sweep_digest(sweep_path),
            "code": figure_code_digest(name),
        }
    sweep = load_sweep(sweep_path, fig_decl.variables)
    summary = load_summary(summary_path)
    fig = fig_decl.plot(sweep, summary)
    try:
        save(fig, pdf_path, png_path)
        if caption_path is not None:
            write_caption(caption_path, figure_caption(name, summary, caption_notes(fig)))
            if page_path is not None:
                title = f"{summary.attrs.get('experiment', '')}: figure {name}".lstrip(": ")
                write_figure_page(png_path, caption_path, page_path, title)
    finally:
        plt.close(fig)
    if from_files:
        files = [pdf_path, png_path] + ([caption_path] if caption_path is not None else [])
        files += [page_path] if caption_path is not None and page_path is not None else []
        write_record(record, "figure", str(summary.attrs.get("experiment", "")), files, inputs)


__all__ = ["make_figure", "save"]
