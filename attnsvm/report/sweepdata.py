"""What a figure reads: the sweep store (per-seed values, only ok cells) and the summary.

Sweep helpers select grid points, mask non-ok cells and give the grid's values; summary helpers
read the statistics :func:`attnsvm.sweep.summary.summarize` computed once over the ok cells
(``<name>_mean`` ...), pooled over the grid axes a figure does not separate
(docs/store.md for the variables; docs/science.md §6 for the figures).
"""

from __future__ import annotations

import json
import os

import numpy as np
import xarray as xr

from attnsvm import codes


def load_sweep(sweep, variables=None) -> xr.Dataset:
    """The sweep store (or Dataset) reduced to ``variables`` (those present) and loaded."""
    ds = sweep if isinstance(sweep, xr.Dataset) else xr.open_zarr(sweep)
    if variables is not None:
        keep = [v for v in dict.fromkeys(("status", *variables)) if v in ds.data_vars]
        ds = ds[keep]
    return ds.load()


def load_summary(summary: xr.Dataset | str | os.PathLike) -> xr.Dataset:
    """The summary (NetCDF path or Dataset), loaded."""
    if isinstance(summary, xr.Dataset):
        return summary
    with xr.open_dataset(summary) as ds:
        return ds.load()


def loads_json(value, default):
    if value is None:
        return default
    if isinstance(value, (dict, list)):
        return value
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return default


def fixed_settings(sweep: xr.Dataset) -> dict:
    """Fixed settings of the experiment: the ``fixed_<key>`` attributes of the sweep store
    (attnsvm.variables.fixed_attrs), or an older store's single JSON ``fixed`` attribute."""
    out = loads_json(sweep.attrs.get("fixed"), {})
    out.update({k[len("fixed_") :]: v for k, v in sweep.attrs.items() if k.startswith("fixed_")})
    return out


def seeds_per_point(sweep: xr.Dataset) -> int:
    return int(sweep.sizes.get("seed", 1))


def status_counts(sweep: xr.Dataset) -> dict[str, int]:
    """Cell status counts (ok, nonfinite, failed, missing), from ``status`` or the attrs."""
    if "status" in sweep:
        st = np.asarray(sweep["status"].values).ravel()
        return {name: int(np.sum(st == k)) for k, name in enumerate(codes.CELL_STATUS)}
    raw = loads_json(sweep.attrs.get("status_counts"), {})
    return {name: int(raw.get(name, 0)) for name in codes.CELL_STATUS}


def ok_mask(sweep: xr.Dataset) -> xr.DataArray:
    """True for cells whose status is ``ok`` (all True when no status variable exists)."""
    if "status" not in sweep:
        return xr.ones_like(sweep[next(iter(sweep.data_vars))], dtype=bool)
    return sweep["status"] == codes.CELL_STATUS.index("ok")


def ok_values(sweep: xr.Dataset, name: str) -> xr.DataArray:
    """Float values of ``name`` with non-ok cells set to NaN (missing variable: all NaN)."""
    if name not in sweep:
        template = sweep["status"] if "status" in sweep else None
        if template is None:
            raise KeyError(name)
        return xr.full_like(template, np.nan, dtype=float)
    return sweep[name].astype(float).where(ok_mask(sweep))


def grid_values(sweep: xr.Dataset, axis: str) -> list:
    """Values of a grid axis, or the single fixed value when it is not an axis."""
    if axis in sweep.dims and axis in sweep.coords:
        return [v.item() if hasattr(v, "item") else v for v in sweep[axis].values]
    fixed = fixed_settings(sweep)
    if axis in fixed:
        return [fixed[axis]]
    return []


def select(da: xr.DataArray, **point) -> xr.DataArray:
    """``da.sel`` for the keys that are dimensions of ``da`` (others are fixed settings)."""
    sel = {k: v for k, v in point.items() if k in da.dims}
    return da.sel(sel) if sel else da


def params_of(sweep: xr.Dataset) -> list[str]:
    vals = grid_values(sweep, "param")
    return [str(v) for v in vals] if vals else ["W"]


def iterations_of(sweep: xr.Dataset) -> np.ndarray:
    if "iteration" in sweep.coords:
        return np.asarray(sweep["iteration"].values, dtype=float)
    return np.arange(1, sweep.sizes.get("checkpoint", 0) + 1, dtype=float)


# ----------------------------------------------------------------------------- summary
def pooled(summary: xr.Dataset, name: str, keep=(), **point) -> tuple[np.ndarray, ...]:
    """Mean, std (ddof=1; 0 for a single value) and count over the ok cells of ``name``.

    Read from the summary's ``<name>_mean/_std/_count`` at ``point`` (keys that are
    dimensions) and pooled exactly over every dimension not in ``keep`` (and not
    ``checkpoint``): the pooled mean and variance of all the seeds of those grid points, as if
    computed from the runs. Dimensions in ``keep`` come first, in that order. Absent
    statistics: NaN means, zero counts.
    """
    base = name
    if f"{base}_mean" not in summary:
        ref = summary["count_status"].isel(status=0)
        nan = xr.full_like(ref, np.nan, dtype=float)
        mean, std, count = nan, nan, xr.zeros_like(ref, dtype=float)
    else:
        mean, std, count = (summary[f"{base}_{s}"].astype(float) for s in ("mean", "std", "count"))
    sel = {k: v for k, v in point.items() if k in mean.dims}
    mean, std, count = (x.sel(sel) if sel else x for x in (mean, std, count))
    keep = [d for d in keep if d in mean.dims]
    tail = ["checkpoint"] if "checkpoint" in mean.dims else []
    over = [d for d in mean.dims if d not in keep and d not in tail]
    order = (*keep, *over, *tail)
    m, s, c = (np.asarray(x.transpose(*order).values, float) for x in (mean, std, count))
    shape = tuple(mean.sizes[d] for d in keep) + (-1,) + tuple(mean.sizes[d] for d in tail)
    m, s, c = (x.reshape(shape) for x in (m, s, c))
    ax = len(keep)
    n = c.sum(axis=ax)
    with np.errstate(invalid="ignore", divide="ignore"):
        total = np.where(c > 0, m * c, 0.0).sum(axis=ax)
        M = np.where(n > 0, total / np.maximum(n, 1), np.nan)
        within = np.where(c > 1, (c - 1) * np.nan_to_num(s) ** 2, 0.0).sum(axis=ax)
        between = np.where(c > 0, c * (m - np.expand_dims(M, ax)) ** 2, 0.0).sum(axis=ax)
        var = (within + between) / np.maximum(n - 1, 1)
    S = np.where(n > 0, np.sqrt(var), np.nan)
    return M, S, n


def quantile_band(summary: xr.Dataset, name: str, **point) -> tuple[np.ndarray, ...]:
    """Median, 25% and 75% quantiles over seeds (ok cells) of a curve at one grid point
    (``<name>_q50/_q25/_q75``; dimensions left besides ``checkpoint`` are averaged)."""
    out = []
    for q in ("q50", "q25", "q75"):
        da = summary[f"{name}_{q}"]
        da = da.sel({k: v for k, v in point.items() if k in da.dims})
        rest = [d for d in da.dims if d != "checkpoint"]
        out.append(np.asarray((da.mean(rest) if rest else da).values, float))
    return tuple(out)
