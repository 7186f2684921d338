"""Summaries over seeds of a sweep Dataset: mean, std, standard error, counts and shares.

For every numeric per-cell variable (dims: grid axes, ``seed`` and optionally ``checkpoint``)
the summary holds ``<name>_mean``, ``<name>_std`` (ddof=1), ``<name>_sem`` and ``<name>_count``
(number of seeds with a finite value), each with the attributes of :mod:`attnsvm.variables`
(the sweep's attributes are kept). Flags (0/1 variables such as ``feasible_*``,
``alpha_is_opt``, ``ambiguous``) also get ``<name>_sum``. Status codes become counts per grid
point: ``count_status`` (dim ``status``), ``count_convergence`` and ``share_convergence`` (dim
``convergence``, shares among cells that have a convergence type; the class by selection),
the same for ``convergence_strict`` (the strict rule), ``count_svm_status``.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np
import xarray as xr

from attnsvm import codes
from attnsvm.variables import annotate, netcdf_attr

FLAG_PREFIXES = (
    "feasible_",
    "alpha_is_opt",
    "saturated",
    "ambiguous",
    "all_support",
    "locally_optimal",
    "corr_converged",
)
_SKIP = {"status", "convergence", "convergence_strict", "svm_status", "gen_status", "alpha", "opt"}
_ALLOWED_TAIL = {"checkpoint"}


def _per_cell_numeric(sweep: xr.Dataset) -> list[str]:
    axes = set(sweep.attrs.get("axes", [])) | {"seed"}
    out = []
    for name, var in sweep.data_vars.items():
        if name in _SKIP or var.dtype.kind not in "fiu" or "seed" not in var.dims:
            continue
        if set(var.dims) - axes <= _ALLOWED_TAIL:
            out.append(name)
    return out


def _counts(var: xr.DataArray, table: tuple[str, ...], dim: str) -> xr.DataArray:
    parts = [(var == i).sum("seed") for i in range(len(table))]
    return xr.concat(parts, dim=dim).assign_coords({dim: np.array(table, dtype=object)})


def summarize(sweep: xr.Dataset) -> xr.Dataset:
    """Summary Dataset of a sweep (see the module docstring for the variables)."""
    out = {}
    for name in _per_cell_numeric(sweep):
        x = sweep[name].astype(float)
        if name.startswith("rank_"):
            x = x.where(x >= 0)  # -1: no solution (infeasible), not a rank
        count = np.isfinite(x).sum("seed")
        mean = x.mean("seed", skipna=True)
        std = x.std("seed", ddof=1, skipna=True)
        out[f"{name}_mean"] = mean
        out[f"{name}_std"] = std
        out[f"{name}_sem"] = std / np.sqrt(count.where(count > 0))
        out[f"{name}_count"] = count
        if name.startswith(FLAG_PREFIXES):
            out[f"{name}_sum"] = x.sum("seed", skipna=True)
    out["count_status"] = _counts(sweep["status"], codes.CELL_STATUS, "status")
    for name, table in (
        ("convergence", codes.CONVERGENCE),
        ("convergence_strict", codes.CONVERGENCE_STRICT),
    ):
        if name in sweep:
            cnt = _counts(sweep[name], table, name)
            out[f"count_{name}"] = cnt
            total = cnt.sum(name)
            out[f"share_{name}"] = cnt / total.where(total > 0)
    if "svm_status" in sweep:
        out["count_svm_status"] = _counts(sweep["svm_status"], codes.SVM_STATUS, "svm_status")
    ds = annotate(xr.Dataset(out))  # CF attributes from the one table, attnsvm.variables
    ds.attrs = {k: netcdf_attr(v) for k, v in sweep.attrs.items() if k != "blocks"}
    ds.attrs["summary"] = "over seeds: mean, std (ddof=1), sem = std/sqrt(count), count, sum"
    return ds


def write_summary(sweep_path: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Summarize the sweep store at ``sweep_path`` into a NetCDF file at ``out`` (atomic).

    The sweep is verified first (:func:`attnsvm.integrity.load_verified`): a damaged sweep
    stops with an error naming it.
    """
    from attnsvm.integrity import clean_stale_partials, load_verified

    out = Path(out)
    clean_stale_partials(out)  # of a killed earlier attempt
    sweep = load_verified(sweep_path)
    ds = summarize(sweep)
    tmp = out.with_name(f".{out.name}{codes.PARTIAL_MARK}{socket.gethostname()}-{os.getpid()}")
    ds.to_netcdf(tmp)
    os.replace(tmp, out)
    return out
