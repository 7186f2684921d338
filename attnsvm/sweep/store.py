"""A block's results as one self-contained xarray Dataset, written atomically to Zarr.

Layout (also in ``docs/store.md``): dimension ``cell`` (the block's seeds), ``checkpoint``,
``example`` (n), ``token`` (T), ``row``/``col`` (d, matrices), ``feature`` (d, data), ``svm``.
A store is written under a hidden temporary name next to its target and renamed into place
only when complete (:mod:`attnsvm.atomic`), so a killed job never leaves anything that looks
finished. Every chunk carries a ``crc32c`` checksum and every store a manifest
(:mod:`attnsvm.sweep.integrity`).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr
from zarr.codecs import Crc32cCodec, ZstdCodec

from attnsvm import codes, provenance
from attnsvm.atomic import atomic_path
from attnsvm.config.cell import cells_text, text_digest
from attnsvm.sweep import onefile
from attnsvm.sweep.integrity import (
    MANIFEST,
    load_verified,
    onefile_manifest,
    open_store,
    write_manifest,
)
from attnsvm.variables import annotate

if TYPE_CHECKING:
    from attnsvm.tasks import CellResult

__all__ = ["cell_dataset", "load_verified", "open_block", "results_to_dataset", "write_atomic"]
STORE_FORMAT = "attnsvm-block-1"
CHUNK_CODECS = (ZstdCodec(), Crc32cCodec())
"""Compression, then a CRC-32C checksum of every chunk (zarr checks it on every read)."""


def _strings(values: Sequence[str]) -> np.ndarray:
    return np.array(list(values), dtype=object)


def fill_value(name: str, dtype: np.dtype):
    """Value of ``name`` where it has no data: a cell or grid point without a result, or the
    padding of a smaller n, T or d (status tables' not-solved / missing codes, NaN, -1)."""
    if name == "status":
        return codes.CELL_STATUS.index("missing")
    if name in ("svm_status", "gen_status"):
        return codes.SVM_STATUS.index("not_solved")
    if name in ("convergence", "convergence_strict"):
        return codes.NOT_APPLICABLE
    if dtype.kind in "iu":
        return -1
    if dtype.kind == "O":
        return ""
    return np.nan


def stack_padded(name: str, arrays: Sequence[np.ndarray]) -> np.ndarray:
    """``np.stack`` of per-cell arrays, each padded with :func:`fill_value` to the largest
    shape (cells of a packed block may differ in n, T and d; otherwise a plain stack)."""
    arrays = [np.asarray(a) for a in arrays]
    shape = tuple(max(sizes) for sizes in zip(*(a.shape for a in arrays), strict=True))
    if all(a.shape == shape for a in arrays):
        return np.stack(arrays)
    dtype = np.result_type(*arrays)
    out = np.full((len(arrays), *shape), fill_value(name, dtype), dtype=dtype)
    for i, a in enumerate(arrays):
        out[(i, *(slice(0, k) for k in a.shape))] = a
    return out


def _union(dicts: Sequence[dict]) -> list[str]:
    keys: list[str] = []
    for d in dicts:
        keys += [k for k in d if k not in keys]
    return keys


def results_to_dataset(
    results: Sequence[CellResult], attrs: dict[str, Any], cells_json: str | None = None
) -> xr.Dataset:
    """Stack the results of one block into a Dataset (docs/store.md).

    The cells of a packed block may differ in n, T and d: their arrays are padded to the
    block's largest sizes with :func:`fill_value`, as the collected sweep pads them. The SVMs
    on the ``svm`` axis are those the cells' task stores (:attr:`attnsvm.tasks.Task.svms`).
    ``cells_json``: the block's :func:`attnsvm.config.cell.cells_text`, when the job has it
    (the one serialization of its cells), stored as the attribute ``cells``.
    """
    # the task registry imports the solvers: deferred, so that readers of stores (collect,
    # the report) do not pay for them
    from attnsvm.tasks import task_for

    r0 = results[0]
    n, T, d = (max(getattr(r.cell, k) for r in results) for k in ("n", "T", "d"))
    svms = list(task_for(r0.cell).svms(r0.cell))
    V = _Variables()
    _put_codes(V.put, results)
    _put_data(V.put, results)
    _put_svms(V.put, results, svms, d)
    if any(r.gen is not None for r in results):
        _put_gen(V.put, results, n, T, d)
    _put_metrics(V.put, results)
    if any(r.heads for r in results):
        _put_heads(V.put, results)
    coords = {
        "seed": ("cell", np.array([r.cell.seed for r in results], np.int64)),
        "iteration": ("checkpoint", np.asarray(r0.iterations, np.int64)),
        "svm": ("svm", _strings(svms)),
    }
    ds = annotate(xr.Dataset(V, coords=coords))
    ds.attrs.update(attrs)
    ds.attrs["format"] = STORE_FORMAT
    ds.attrs["cells"] = cells_text([r.cell for r in results]) if cells_json is None else cells_json
    return ds


def cell_dataset(result: CellResult) -> xr.Dataset:
    """One cell's result as an :class:`xarray.Dataset` with CF attributes, the same as one cell
    of a block store (no ``cell`` dim; ``docs/store.md``)."""
    return results_to_dataset([result], {}).isel(cell=0)


class _Variables(dict):
    """The variables of a store, in the order they are put."""

    def put(self, name: str, dims: tuple[str, ...], values: Any, **var_attrs: Any) -> None:
        self[name] = xr.Variable(dims, values, attrs=var_attrs)


def _put_codes(put, results: Sequence[CellResult]) -> None:
    """Status, message and device of every cell, and its convergence types (attnsvm.codes)."""
    put(
        "status",
        ("cell",),
        np.array([codes.encode(r.status, codes.CELL_STATUS) for r in results], np.int8),
        **codes.flag_attrs(codes.CELL_STATUS),
    )
    put("message", ("cell",), _strings(r.message for r in results))
    put("device", ("cell",), _strings(r.device for r in results))
    put(
        "convergence",
        ("cell",),
        np.array([codes.encode(r.convergence, codes.CONVERGENCE) for r in results], np.int8),
        **codes.flag_attrs(
            codes.CONVERGENCE, "by GD's selection alpha (the paper's rule); -1: not applicable"
        ),
    )
    put(
        "convergence_strict",
        ("cell",),
        np.array(
            [codes.encode(r.convergence_strict, codes.CONVERGENCE_STRICT) for r in results],
            np.int8,
        ),
        **codes.flag_attrs(
            codes.CONVERGENCE_STRICT,
            "strict rule: unsaturated first, then corr >= threshold; -1: not applicable",
        ),
    )


def _put_data(put, results: Sequence[CellResult]) -> None:
    """The data (docs/science.md §1), the selections and the trajectory (§3)."""
    r0 = results[0]
    put(
        "X", ("cell", "example", "token", "feature"), stack_padded("X", [r.data.X for r in results])
    )
    put("Y", ("cell", "example"), stack_padded("Y", [r.data.Y for r in results]))
    put("Z", ("cell", "example", "feature"), stack_padded("Z", [r.data.Z for r in results]))
    put("v", ("cell", "feature"), stack_padded("v", [r.data.v for r in results]))
    if r0.data.V is not None:
        put("V", ("cell", "feature", "feature2"), stack_padded("V", [r.data.V for r in results]))
    put(
        "alpha",
        ("cell", "example"),
        stack_padded("alpha", [r.alpha for r in results]).astype(np.int16),
    )
    put("opt", ("cell", "example"), stack_padded("opt", [r.opt for r in results]).astype(np.int16))
    put("W", ("cell", "checkpoint", "row", "col"), stack_padded("W", [r.W for r in results]))
    put(
        "softmax",
        ("cell", "checkpoint", "example", "token"),
        stack_padded("softmax", [r.softmax for r in results]),
    )


def _put_svms(put, results: Sequence[CellResult], svms: list[str], d: int) -> None:
    """Solution, status, objective, time and solver of every SVM (docs/science.md §4)."""
    S = len(results)
    sw = np.full((S, len(svms), d, d), np.nan)
    sst = np.full((S, len(svms)), codes.SVM_STATUS.index("not_solved"), np.int8)
    sobj, ssec = np.full((S, len(svms)), np.nan), np.full((S, len(svms)), np.nan)
    ssolver = np.full((S, len(svms)), "", dtype=object)
    for i, r in enumerate(results):
        for j, key in enumerate(svms):
            res = r.svms.get(key)
            if res is None:
                continue
            sst[i, j] = codes.encode(res.status, codes.SVM_STATUS)
            sobj[i, j], ssec[i, j], ssolver[i, j] = res.objective, res.seconds, res.solver
            if res.W is not None:
                sw[(i, j, *(slice(0, k) for k in res.W.shape))] = res.W
    put("svm_W", ("cell", "svm", "row", "col"), sw)
    put("svm_status", ("cell", "svm"), sst, **codes.flag_attrs(codes.SVM_STATUS))
    put("svm_objective", ("cell", "svm"), sobj)
    put("svm_seconds", ("cell", "svm"), ssec)
    put("svm_solver", ("cell", "svm"), ssolver)


def _put_metrics(put, results: Sequence[CellResult]) -> None:
    """Scalars, curves and timings of every cell (docs/science.md §5); NaN where absent."""
    C = len(results[0].iterations)
    for key in _union([r.scalars for r in results]):
        put(key, ("cell",), np.array([float(r.scalars.get(key, np.nan)) for r in results]))
    for key in _union([r.curves for r in results]):
        put(
            f"curve_{key}",
            ("cell", "checkpoint"),
            np.stack([np.asarray(r.curves.get(key, np.full(C, np.nan)), float) for r in results]),
        )
    for key in _union([r.timings for r in results]):
        put(f"seconds_{key}", ("cell",), np.array([r.timings.get(key, np.nan) for r in results]))


def _put_heads(put, results: Sequence[CellResult]) -> None:
    """Per-head values of multi-head cells (docs/science.md §12), dims ``(cell, head, ...)``;
    a cell without them (one head) gets its fill value."""
    from attnsvm.tasks.multi_head import HEAD_DIMS  # with the task registry (above)

    for key in _union([r.heads for r in results]):
        arrays = [np.asarray(r.heads[key]) for r in results if key in r.heads]
        blank = np.full(
            (0, *arrays[0].shape[1:]), fill_value(key, arrays[0].dtype), arrays[0].dtype
        )
        values = [np.asarray(r.heads.get(key, blank)) for r in results]
        dtype = np.int16 if key == "head_alpha" else float
        put(key, ("cell", *HEAD_DIMS[key]), stack_padded(key, values).astype(dtype))


def _put_gen(put, results: Sequence[CellResult], n: int, T: int, d: int) -> None:
    S = len(results)
    mats = {k: np.full((S, d, d), np.nan) for k in ("gen_W_mm_gen", "gen_W_fin", "gen_W_svmeq")}
    rel = np.full((S, n, T), fill_value("gen_relevant", np.dtype(np.int8)), np.int8)
    C = np.full(S, np.nan)
    st = np.full((S, 2), codes.SVM_STATUS.index("not_solved"), np.int8)
    for i, r in enumerate(results):
        rel[i, : r.cell.n, : r.cell.T] = 0  # padding (packed blocks) keeps the fill value
        g = r.gen
        if g is None:
            continue
        for key, W in (
            ("gen_W_mm_gen", g.mm_gen.W),
            ("gen_W_fin", g.fin.W),
            ("gen_W_svmeq", g.svmeq),
        ):
            if W is not None:
                mats[key][(i, *(slice(0, k) for k in W.shape))] = W
        rel[(i, *(slice(0, k) for k in g.relevant.shape))] = g.relevant
        C[i] = g.C
        st[i] = [
            codes.encode(g.mm_gen.status, codes.SVM_STATUS),
            codes.encode(g.fin.status, codes.SVM_STATUS),
        ]
    for key, val in mats.items():
        put(key, ("cell", "row", "col"), val)
    put("gen_relevant", ("cell", "example", "token"), rel)
    put("gen_C", ("cell",), C)
    put(
        "gen_status",
        ("cell", "gen_svm"),
        st,
        **codes.flag_attrs(codes.SVM_STATUS),
        columns="mm_gen fin",
    )


def failed_block_dataset(
    cells_json: str,
    message: str,
    attrs: dict[str, Any],
    failure_kind: str = "reproducible",
) -> xr.Dataset:
    """Store of a block whose worker crashed: every cell ``failed`` with the reason.

    ``cells_json``: the block's cells as the job serialized them
    (:func:`attnsvm.config.cell.cells_text`). ``failure_kind``
    (:data:`attnsvm.codes.FAILURE_KINDS`): ``environment`` (disk full, no GPU) is retried by
    the next run of the workflow, ``reproducible`` stays until forced.
    """
    cells = json.loads(cells_json)
    S = len(cells)
    ds = xr.Dataset(
        {
            "status": xr.Variable(
                ("cell",),
                np.full(S, codes.CELL_STATUS.index("failed"), np.int8),
                attrs=codes.flag_attrs(codes.CELL_STATUS),
            ),
            "message": xr.Variable(("cell",), _strings([message] * S)),
        },
        coords={
            "seed": ("cell", np.array([int(c["seed"]) for c in cells], np.int64)),
            "iteration": ("checkpoint", np.zeros(0, np.int64)),
            "svm": ("svm", _strings([])),
        },
    )
    ds = annotate(ds)
    ds.attrs.update(attrs)
    ds.attrs.update(
        {
            "format": STORE_FORMAT,
            "block_failed": 1,
            "failure": message,
            "failure_kind": failure_kind,
            "cells": cells_json,
            "cells_digest": text_digest(cells_json),
            "versions": provenance.package_versions(),
            "git_commit": provenance.git_commit(),
            "host": provenance.host(),
            "finished": provenance.now(),
        }
    )
    return ds


def write_atomic(
    ds: xr.Dataset,
    path: str | os.PathLike,
    consolidated: bool = False,
    manifest_extra: dict[str, str] | None = None,
) -> Path:
    """Write ``ds`` to a Zarr store at ``path`` through :func:`attnsvm.atomic.atomic_path`.

    Every chunk is written (also one equal to the fill value) with a CRC-32C checksum
    (:data:`CHUNK_CODECS`); the manifest
    (:func:`attnsvm.sweep.integrity.write_manifest`) is written last, before the rename. An
    existing store at ``path`` is replaced only after the new one is complete.
    ``manifest_extra``: more manifest entries (a sweep's ``inputs_sha256``). A path ending in
    ``.zarr.zip`` gets a one-file store (:mod:`attnsvm.sweep.onefile`; block stores).
    """
    encoding = {name: {"compressors": CHUNK_CODECS} for name in ds.variables}
    ds = ds.copy()
    for var in ds.variables.values():
        var.encoding = {}  # e.g. a store read back: its codecs are replaced by CHUNK_CODECS
    if onefile.is_onefile(path):
        return _write_onefile(ds, path, encoding, manifest_extra)
    with atomic_path(path) as tmp, warnings.catch_warnings():
        # zarr 3 notes that consolidated metadata is not in the v3 spec; xarray reads it
        warnings.filterwarnings("ignore", message=".*[Cc]onsolidated metadata.*")
        # every chunk written, also one that equals the fill value (e.g. convergence code 0,
        # "global", in every cell): each chunk then exists, carries its checksum and is
        # listed in the manifest, so a deleted chunk is never read as the fill value
        ds.to_zarr(
            tmp,
            mode="w",
            consolidated=consolidated,
            zarr_format=3,
            encoding=encoding,
            write_empty_chunks=True,
        )
        write_manifest(tmp, ds.attrs, manifest_extra)
    return Path(path)


def _write_onefile(
    ds: xr.Dataset, path: str | os.PathLike, encoding: dict, extra: dict[str, str] | None
) -> Path:
    """:func:`write_atomic` into a one-file store (:mod:`attnsvm.sweep.onefile`): the Zarr store
    is built in memory (the same files a folder would hold), zipped with its manifest and
    renamed into place."""
    from zarr.storage import MemoryStore  # with zarr's codecs, imported above

    files: dict[str, Any] = {}
    ds.to_zarr(MemoryStore(store_dict=files), mode="w", consolidated=False, zarr_format=3,
               encoding=encoding, write_empty_chunks=True)  # fmt: skip
    members = {key: buf.to_bytes() for key, buf in files.items()}
    manifest = onefile_manifest(members, ds.attrs, extra)
    with atomic_path(path) as tmp:
        tmp.write_bytes(onefile.zip_bytes(members, manifest))
    return Path(path)


def open_block(path: str | os.PathLike) -> xr.Dataset:
    """Open a finished block store (lazy).

    Snakemake leaves a ``.snakemake_timestamp`` file in directory outputs and every store
    holds its manifest; zarr warns about these unknown objects, which is harmless and
    silenced here.
    """
    return open_store(path)


def is_finished_store(path: str | os.PathLike) -> bool:
    """A store that looks finished: a visible one-file store, or a visible directory with zarr
    metadata and a manifest.

    Cheap (no verification); :func:`attnsvm.sweep.integrity.check_block` verifies.
    """
    p = Path(path)
    if onefile.is_onefile(p):
        return p.is_file() and not p.name.startswith(".")
    return (
        p.is_dir()
        and not p.name.startswith(".")
        and (p / "zarr.json").exists()
        and (p / MANIFEST).exists()
    )
