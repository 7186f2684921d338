"""Summaries over seeds of a sweep Dataset: mean, std, standard error, counts and shares.

For every numeric per-cell variable (dims: grid axes, ``seed`` and optionally ``checkpoint``)
the summary holds, over the seeds whose cell is **ok** (a nonfinite or failed cell's values
never enter a statistic; ``count_status`` counts those cells), ``<name>_mean``, ``<name>_std``
(ddof=1), ``<name>_sem`` and ``<name>_count`` (number of ok seeds with a finite value), each
with the attributes of :mod:`attnsvm.variables` (the sweep's attributes are kept). Flags
(0/1 variables such as ``feasible_*``, ``alpha_is_opt``, ``ambiguous``) also get
``<name>_sum``; curves (dim ``checkpoint``) also the quantiles ``<name>_q25``, ``<name>_q50``,
``<name>_q75`` over seeds. The figures read these statistics (docs/science.md §6): they are
computed once, here. Status codes become counts per grid
point: ``count_status`` (dim ``status``), ``count_convergence`` and ``share_convergence`` (dim
``convergence``, shares among cells that have a convergence type; the class by selection),
the same for ``convergence_strict`` (the strict rule), ``count_svm_status``.

"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from attnsvm import codes
from attnsvm.atomic import atomic_path
from attnsvm.sweep.derived import check_record, record_of, record_sha, sweep_digest, write_record
from attnsvm.sweep.integrity import StoreError, clean_stale_partials, load_verified, verify_store
from attnsvm.variables import annotate, describe, netcdf_attr

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


def cell_values(sweep: xr.Dataset, name: str) -> xr.DataArray:
    """The per-cell values of ``name`` as floats, as every statistic reads them: a rank of -1
    (no solution, docs/science.md §5) is NaN, not a rank."""
    x = sweep[name].astype(float)
    return x.where(x >= 0) if name.startswith("rank_") else x


def _over_seeds(out: dict, sweep: xr.Dataset, names: list[str]) -> None:
    """``<name>_mean/_std/_sem/_count`` (and ``_sum`` for flags) over the ok cells' values."""
    ok = sweep["status"] == codes.CELL_STATUS.index("ok")
    for name in names:
        x = cell_values(sweep, name).where(ok)
        count = np.isfinite(x).sum("seed")
        std = x.std("seed", ddof=1, skipna=True)
        out[f"{name}_mean"] = x.mean("seed", skipna=True)
        out[f"{name}_std"] = std
        out[f"{name}_sem"] = std / np.sqrt(count.where(count > 0))
        out[f"{name}_count"] = count
        if name.startswith(FLAG_PREFIXES):
            out[f"{name}_sum"] = x.sum("seed", skipna=True)


def _quantiles(x: xr.DataArray, qs: Sequence[float]) -> list[xr.DataArray]:
    """:func:`nan_quantiles` over ``seed`` of ``x``, as DataArrays without ``seed``."""
    x = x.transpose("seed", ...)
    vals = nan_quantiles(x.values, qs, axis=0)
    template = x.isel(seed=0, drop=True)
    return [template.copy(data=v) for v in vals]


def _curve_quantiles(sweep: xr.Dataset, names: list[str]) -> dict[str, xr.DataArray]:
    """``<name>_q25/_q50/_q75`` over the ok seeds of every curve (dim ``checkpoint``)."""
    ok = sweep["status"] == codes.CELL_STATUS.index("ok")
    out: dict[str, xr.DataArray] = {}
    for name in names:
        x = cell_values(sweep, name).where(ok)
        if "checkpoint" not in x.dims:
            continue
        for q, da in zip((25, 50, 75), _quantiles(x, (0.25, 0.5, 0.75)), strict=True):
            long_name = f"{q}% quantile of {describe(name)['long_name']}"
            attrs = {"long_name": long_name, "description": f"{long_name}, over ok seeds"}
            units = describe(name).get("units")
            if units is not None:
                attrs["units"] = units
            out[f"{name}_q{q}"] = da.assign_attrs(attrs)
    return out


def summarize(sweep: xr.Dataset) -> xr.Dataset:
    """Summary Dataset of a sweep (see the module docstring for the variables)."""
    out: dict[str, xr.DataArray] = {}
    names = _per_cell_numeric(sweep)
    _over_seeds(out, sweep, names)
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
    ds = ds.assign(_curve_quantiles(sweep, names))
    ds.attrs = {k: netcdf_attr(v) for k, v in sweep.attrs.items() if k != "blocks"}
    ds.attrs["summary"] = (
        "over the ok seeds: mean, std (ddof=1), sem = std/sqrt(count), count, sum, quantiles"
    )
    return ds


def write_summary(sweep_path: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Summarize the sweep store at ``sweep_path`` into a NetCDF file at ``out`` (atomic).

    The sweep is verified first (:func:`attnsvm.sweep.integrity.load_verified`): a damaged sweep
    stops with an error naming it. The file carries its own checksum, the global attribute
    ``data_sha256`` (:func:`data_checksum`). The summary's digest record (the sweep's digest and the
    summary's SHA-256, :mod:`attnsvm.sweep.derived`) is written last.
    """
    out = Path(out)
    clean_stale_partials(out)  # of a killed earlier attempt
    record_of(out).unlink(missing_ok=True)  # a summary without its record is incomplete
    digest = sweep_digest(sweep_path)
    sweep = load_verified(sweep_path, lazy=True)  # reads only what the statistics use
    ds = summarize(sweep)
    ds.attrs[CHECKSUM_ATTR] = data_checksum(ds)
    with atomic_path(out) as tmp:
        ds.to_netcdf(tmp)
    write_record(record_of(out), "summary", str(sweep.attrs.get("experiment", "")), [out],
                 {"sweep": digest})  # fmt: skip
    return out


def verified_summary(summary_path: str | os.PathLike, sweep_path: str | os.PathLike | None = None):
    """Check the summary at ``summary_path`` against its digest record (and, with
    ``sweep_path``, that it was built from that sweep); returns the summary's SHA-256.

    Raises :class:`attnsvm.sweep.integrity.StoreError` naming the file that does not check out.
    """
    record = record_of(summary_path)
    try:
        experiment = str(json.loads(record.read_text()).get("experiment", ""))
    except (OSError, ValueError, AttributeError):
        experiment = ""
    inputs = None if sweep_path is None else {"sweep": sweep_digest(sweep_path)}
    check_record(record, "summary", experiment, inputs)
    check_checksum(summary_path)
    if sweep_path is not None:
        expected = str(verify_store(sweep_path, contents=False).get("experiment", ""))
        if experiment != expected:
            raise StoreError(summary_path, f"summarizes experiment {experiment!r}, not "
                             f"{expected!r}", "foreign")  # fmt: skip
    return record_sha(record, Path(summary_path).name)


CHECKSUM_ATTR = "data_sha256"
"""Global attribute of ``summary.nc``: :func:`data_checksum` of its own contents."""


def data_checksum(ds: xr.Dataset) -> str:
    """SHA-256 over the canonical bytes of every coordinate and data variable of ``ds``
    (sorted by name; each with its dims and shape): floats as little-endian float64 with one
    NaN, integers and booleans as little-endian int64, strings as UTF-8 joined by NUL, so that
    the value survives the NetCDF round trip (docs/store.md, "Derived outputs")."""
    h = hashlib.sha256()
    for kind, variables in (("coord", ds.coords), ("var", ds.data_vars)):
        for name in sorted(map(str, variables)):
            v = variables[name]
            h.update(f"{kind}:{name}:{','.join(map(str, v.dims))}:{v.shape};".encode())
            h.update(_canonical_bytes(np.asarray(v.values)))
    return h.hexdigest()


def _canonical_bytes(a: np.ndarray) -> bytes:
    if a.dtype.kind in "OUST":  # object, bytes, unicode, numpy 2 StringDType
        return "\0".join(x.decode() if isinstance(x, bytes) else str(x) for x in a.ravel()).encode()
    if a.dtype.kind == "f":
        a = np.where(np.isnan(a), np.nan, a).astype("<f8")
    elif a.dtype.kind in "iub":
        a = a.astype("<i8")
    elif a.dtype.kind in "mM":
        a = a.astype(f"<{a.dtype.kind}8[ns]").view("<i8")
    return np.ascontiguousarray(a).tobytes()


def check_checksum(summary_path: str | os.PathLike) -> None:
    """Check that the summary's data match the checksum it carries (``data_sha256``).

    Raises :class:`attnsvm.sweep.integrity.StoreError` naming the file: unreadable, without a
    checksum, or with data that do not match it.
    """
    try:
        with xr.open_dataset(summary_path) as ds:
            ds.load()
    except Exception as err:  # noqa: BLE001 - any failure to read is damage
        raise StoreError(summary_path, f"cannot be read: {err}") from None
    carried = ds.attrs.get(CHECKSUM_ATTR)
    if not carried:
        raise StoreError(summary_path, f"carries no checksum ({CHECKSUM_ATTR})")
    if data_checksum(ds) != carried:
        raise StoreError(summary_path, f"its data do not match its own checksum ({CHECKSUM_ATTR})")


# ----------------------------------------------------------------------------- statistics
def nan_stats(values: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, std (ddof=1, 0 for a single value) and count of finite values along ``axis``."""
    v = np.asarray(values, dtype=float)
    finite = np.isfinite(v)
    count = finite.sum(axis=axis)
    total = np.where(finite, v, 0.0).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, total / np.maximum(count, 1), np.nan)
        dev = np.where(finite, v - np.expand_dims(mean, axis), 0.0)
        var = (dev**2).sum(axis=axis) / np.maximum(count - 1, 1)
    std = np.where(count > 0, np.sqrt(var), np.nan)
    return mean, std, count


def nan_quantiles(values: np.ndarray, qs: Sequence[float], axis: int = 0) -> list[np.ndarray]:
    """``np.nanquantile(values, q, axis)`` (method ``linear``) per q, with infinities counted
    as NaN, and NaN (without warnings) where no value is finite.

    One sort of the whole array instead of numpy's one Python-level call per slice (the
    summary of a sweep with many grid points and checkpoints has thousands of slices). The
    arithmetic is numpy's, step for step: the virtual index ``(n - 1) q`` of the ``n`` finite
    values, its floor and the next index, and numpy's two-sided interpolation
    (``numpy.lib._function_base_impl._lerp``), so every quantile equals ``np.nanquantile``'s
    to the last bit (a tie of -0.0 and 0.0 may keep the other zero; tests/test_figures.py).
    """
    v = np.moveaxis(np.asarray(values, dtype=float), axis, 0)
    finite = np.isfinite(v)
    n = finite.sum(axis=0)
    ordered = np.sort(np.where(finite, v, np.nan), axis=0)  # NaN last
    last = np.maximum(n - 1, 0)
    out = []
    for q in qs:
        virtual = (n - 1) * float(q)
        below = np.floor(virtual)
        above_bounds = virtual >= n - 1  # numpy takes the last value, with its weight
        gamma = np.where(above_bounds, virtual + 1.0, virtual - below)
        lo = np.where(above_bounds, last, below).astype(np.intp)
        hi = np.where(above_bounds, last, below + 1).astype(np.intp)
        if ordered.shape[0]:
            a = np.take_along_axis(ordered, lo[None], axis=0)[0]
            b = np.take_along_axis(ordered, hi[None], axis=0)[0]
        else:
            a = b = np.full(n.shape, np.nan)
        diff = b - a
        with np.errstate(all="ignore"):
            r = a + diff * gamma
            r = np.where(gamma >= 0.5, b - diff * (1.0 - gamma), r)
        out.append(np.where(n > 0, r, np.nan))
    return out


class _CheckedArray(xr.backends.BackendArray):
    """A summary variable whose first read runs the summary's deferred check first."""

    def __init__(self, inner: Any, check: Any):
        self.inner, self.check = inner, check
        self.shape, self.dtype = inner.shape, inner.dtype

    def __getitem__(self, key: Any) -> Any:
        self.check()
        return self.inner[key]


class _CheckedStore(xr.backends.NetCDF4DataStore):
    """The summary's store: every variable but the dimension coordinates and ``iteration``
    (read at once for the indexes, :func:`by_iteration`) runs ``check`` before its first
    read."""

    def __init__(self, image: Any, check: Any):
        super().__init__(image)
        self._check = check

    def open_store_variable(self, name: str, var: Any) -> xr.Variable:
        variable = super().open_store_variable(name, var)
        if name in var.dimensions or name == "iteration":
            return variable
        data = variable._data
        wrapped = xr.core.indexing.LazilyIndexedArray(_CheckedArray(data.array, self._check))
        return xr.Variable(variable.dims, wrapped, variable.attrs, variable.encoding)


def open_summary_image(path: str | os.PathLike, chunks: Any = None) -> xr.Dataset:
    """The summary at ``path`` decoded lazily from an image of the file in memory (no file
    handle stays open: a rerun's derive job can replace the file, and netCDF-C / HDF5 trip
    over one file opened and closed several times in a process); its own checksum
    (:data:`CHECKSUM_ATTR`) is checked when its first variable other than the indexes and
    ``iteration`` is read, once: a mismatch raises
    :class:`~attnsvm.sweep.integrity.StoreError` naming the file."""
    import netCDF4  # xarray's own netCDF backend library; only the summary needs it

    path = Path(path)

    image = netCDF4.Dataset(path.name, mode="r", memory=path.read_bytes())
    checked: list[bool] = []

    def check() -> None:
        if checked:
            return
        # every value once, through an uncached view of the same image
        view = xr.open_dataset(xr.backends.NetCDF4DataStore(image), cache=False)
        if data_checksum(view) != view.attrs.get(CHECKSUM_ATTR):
            raise StoreError(path, f"its data do not match its own checksum ({CHECKSUM_ATTR})")
        checked.append(True)

    return xr.open_dataset(_CheckedStore(image, check), chunks=chunks)
