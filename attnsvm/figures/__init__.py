"""Publication figures E1-E6 (SCIENCE.md section 6).

``make_figure(name, sweep_path, summary_path, pdf_path, png_path)`` opens the experiment's
sweep store (Zarr) and summary (NetCDF), draws figure ``name`` with the module of that name
(each module exposes ``plot(sweep, summary) -> Figure`` and the tuple ``VARIABLES`` of sweep
variables it reads) and writes a vector PDF and a PNG (dpi 200), each atomically, and the
report caption computed from the run (:mod:`attnsvm.captions`).
"""

from __future__ import annotations

import importlib

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import xarray as xr  # noqa: E402

from attnsvm.captions import figure_caption, write_caption  # noqa: E402
from attnsvm.figures.style import caption_notes, save  # noqa: E402

MODULES = {
    "e1": "e1_trajectories",
    "e2": "e2_local",
    "e3": "e3_rank",
    "e4": "e4_relu",
    "e5": "e5_lambda",
    "e6": "e6_types",
    # beyond the paper (SCIENCE.md section 6, issue #7)
    "phase": "b_phase",
    "rank_gd": "b_rank_gd",
    "rank_m": "b_rank_m",
    "attention": "b_attention",
    "regpath": "b_regpath",
    "optimizer": "b_optimizer",
}


def figure_module(name: str):
    """The module drawing figure ``name`` (one of e1..e6)."""
    if name not in MODULES:
        raise ValueError(f"unknown figure {name!r}; expected one of {sorted(MODULES)}")
    return importlib.import_module(f"attnsvm.figures.{MODULES[name]}")


def load_sweep(sweep, variables=None) -> xr.Dataset:
    """The sweep store (or Dataset) reduced to ``variables`` (those present) and loaded."""
    ds = sweep if isinstance(sweep, xr.Dataset) else xr.open_zarr(sweep)
    if variables is not None:
        keep = [v for v in dict.fromkeys(("status", *variables)) if v in ds.data_vars]
        ds = ds[keep]
    return ds.load()


def make_figure(name: str, sweep_path, summary_path, pdf_path, png_path, caption_path=None) -> None:
    """Draw figure ``name`` from the sweep and summary; write ``pdf_path`` and ``png_path``.

    With ``caption_path``, also the figure's report caption (RST, :mod:`attnsvm.captions`):
    its text, the run's numbers from the summary and the notes the plot function made.
    """
    mod = figure_module(name)
    sweep = load_sweep(sweep_path, getattr(mod, "VARIABLES", None))
    if isinstance(summary_path, xr.Dataset):
        summary = summary_path
    else:
        with xr.open_dataset(summary_path) as ds:
            summary = ds.load()
    fig = mod.plot(sweep, summary)
    try:
        save(fig, pdf_path, png_path)
        if caption_path is not None:
            text = figure_caption(name, summary, caption_notes(fig))
            write_caption(caption_path, text)
    finally:
        plt.close(fig)


__all__ = ["MODULES", "figure_module", "load_sweep", "make_figure"]
