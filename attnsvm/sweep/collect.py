"""Collect an experiment's block stores into one sweep Dataset over the full grid.

Dimensions: the experiment's grid axes (in config order, coordinates = axis values), then
``seed``, then per-variable trailing dimensions (``checkpoint``, ``svm``, ``example``,
``token``, ``row``, ``col``, ``feature``) padded to the experiment's largest n, T and d.
Every grid cell is present: a cell whose block has no store gets status ``missing`` and
fill values (NaN for floats, -1 for indices, code tables' not-solved / not-applicable).
Every store read is verified first (manifest, chunk checksums, the cells' digest against the
plan); a store that does not verify stops the collection with an error naming it, so that
no damaged or stale value reaches the sweep. See ``docs/store.md``.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import warnings
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xarray as xr

from attnsvm import codes
from attnsvm.config.cell import cells_digest
from attnsvm.config.grid import Block, Experiment, experiment_from_json
from attnsvm.logs import stage
from attnsvm.sweep import onefile, packs
from attnsvm.sweep.derived import blocks_digest
from attnsvm.sweep.integrity import (
    StoreError,
    clean_stale_partials,
    forget_verified,
    stray_entries,
)
from attnsvm.sweep.store import fill_value, is_finished_store, load_verified, write_atomic
from attnsvm.variables import annotate, fixed_attrs

log = logging.getLogger(__name__)

SWEEP_FORMAT = "attnsvm-sweep-1"
#: fewest block stores per worker process for which collect reads in parallel
PARALLEL_MIN_BLOCKS = 100
_PAD_DIMS = (
    "checkpoint",
    "example",
    "token",
    "row",
    "col",
    "feature",
    "feature2",
    "svm",
    "gen_svm",
)


def _axis_coord(values: list) -> np.ndarray:
    if all(isinstance(v, str) for v in values):
        return np.array(values, dtype=object)
    if any(v is None for v in values):
        return np.array(["null" if v is None else str(v) for v in values], dtype=object)
    return np.array(values)


def _align_svm(var: xr.DataArray, svm_idx: list[int], n_svm: int, fill) -> np.ndarray:
    """Values of ``var`` with its ``svm`` axis (if any) reordered to the sweep's svm list."""
    vals = var.values
    if "svm" not in var.dims:
        return vals
    ax = var.dims.index("svm")
    shape = list(vals.shape)
    shape[ax] = n_svm
    out = np.full(shape, fill, dtype=vals.dtype)
    moved = np.moveaxis(out, ax, 0)
    moved[svm_idx] = np.moveaxis(vals, ax, 0)
    return out


def _load(path: str | os.PathLike) -> xr.Dataset:
    return load_verified(path)


def _check_identity(block: Block, path: str | os.PathLike, ds: xr.Dataset) -> None:
    """Raise :class:`StoreError` unless the (verified) store holds exactly ``block``'s cells."""
    if (ds.attrs.get("experiment"), ds.attrs.get("block")) != (block.experiment, block.name):
        found = f"{ds.attrs.get('experiment')!r}/{ds.attrs.get('block')!r}"
        raise StoreError(path, f"holds block {found}, not {block.name!r}", "foreign")
    if ds.attrs.get("cells_digest") != cells_digest(block.cells):
        raise StoreError(path, "its cells differ from the plan's (cells_digest)", "stale")
    if [int(s) for s in ds["seed"].values] != block.seeds:
        raise StoreError(path, f"seeds {ds['seed'].values.tolist()} != {block.seeds}")


def read_workers(n_blocks: int, workers: int) -> int:
    """Processes that read ``n_blocks`` block stores given ``workers`` (at least one, at most
    one per ``PARALLEL_MIN_BLOCKS`` stores): what :func:`load_blocks` uses, and so what the
    collect job asks for (:meth:`attnsvm.plan.Plan.collect_threads`)."""
    return max(1, min(int(workers), n_blocks // PARALLEL_MIN_BLOCKS))


def load_blocks(paths: list, workers: int = 1) -> list[xr.Dataset]:
    """Block stores verified and read into memory, in order; ``workers`` > 1 reads in processes.

    Raises :class:`attnsvm.sweep.integrity.StoreError` naming the first store that does not verify.

    Reading one store costs ~50 ms of Python (zarr's per-array overhead over ~60 arrays),
    so 10^4 blocks take minutes on one core. Workers are forked where the platform allows
    (zarr resets its event-loop thread in a forked child; a spawned child would re-import
    the calling script, which a Snakemake script cannot survive), and are used only from
    ``PARALLEL_MIN_BLOCKS`` stores per worker.
    """
    workers = read_workers(len(paths), workers)
    if workers == 1:
        return [_load(p) for p in paths]
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        return list(pool.map(_load, paths, chunksize=max(1, len(paths) // (8 * workers))))


def collect_sweep(
    experiment: Experiment, block_paths: Mapping[str, str | os.PathLike], workers: int = 1
) -> xr.Dataset:
    """Sweep Dataset of ``experiment`` from ``{block name: store path}`` (missing allowed).

    A path that does not exist (or is absent from ``block_paths``) gives ``missing`` cells;
    one that exists is verified and must hold its block's cells, otherwise
    :class:`attnsvm.sweep.integrity.StoreError` names it (nothing is filled in for it).
    ``workers``: processes that read the block stores (:func:`load_blocks`).
    """
    axes = list(experiment.axes)
    blocks = experiment.blocks()
    loaded, provenance = _load_found(experiment, blocks, block_paths, workers)
    layout = _Layout.of([ds for _, ds in loaded])
    arrays = layout.empty_arrays(
        [len(v) for v in experiment.axes.values()] + [len(experiment.seeds)]
    )
    for targets, ds in loaded:
        layout.fill(arrays, targets, ds)
    data_vars = {
        name: xr.Variable((*axes, "seed", *layout.dims[name][1:]), arr, attrs=layout.attrs[name])
        for name, arr in arrays.items()
    }
    coords: dict[str, object] = {k: _axis_coord(v) for k, v in experiment.axes.items()}
    coords["seed"] = np.array(experiment.seeds, dtype=np.int64)
    if layout.svm_names:
        coords["svm"] = np.array(layout.svm_names, dtype=object)
    if len(layout.iterations) == 1 and "checkpoint" in layout.sizes:
        coords["iteration"] = (
            "checkpoint",
            np.array(next(iter(layout.iterations)), dtype=np.int64),
        )
    out = annotate(xr.Dataset(data_vars, coords=coords))
    out.attrs.update(_sweep_attrs(experiment, out, len(blocks), len(loaded), provenance))
    return out


def _load_found(
    experiment: Experiment,
    blocks: list[Block],
    block_paths: Mapping[str, str | os.PathLike],
    workers: int,
) -> tuple[list[tuple[list[tuple[int, ...]], xr.Dataset]], dict[str, dict]]:
    """The existing block stores, verified and read: ``[(grid index of every cell, store)]``
    and the provenance attributes of each block."""
    seed_pos = {s: i for i, s in enumerate(experiment.seeds)}
    axis_pos = {k: {repr(v): i for i, v in enumerate(vals)} for k, vals in experiment.axes.items()}
    found = [
        (block, block_paths[block.name])
        for block in blocks
        if block.name in block_paths and os.path.lexists(block_paths[block.name])
    ]
    stores = load_blocks([path for _, path in found], workers)
    loaded, provenance = [], {}
    for (block, path), ds in zip(found, stores, strict=True):
        _check_identity(block, path, ds)
        targets = [  # grid index of every cell of the block (several points when packed)
            (*(axis_pos[k][repr(v)] for k, v in point), seed_pos[cell.seed])
            for point, cell in zip(block.points_of_cells(), block.cells, strict=True)
        ]
        loaded.append((targets, ds))
        provenance[block.name] = {
            k: ds.attrs.get(k)
            for k in ("cells_digest", "versions", "git_commit", "device", "started", "finished")
        }
    return loaded, provenance


@dataclass
class _Layout:
    """Variables of the sweep and their sizes: the union over the block stores read."""

    sizes: dict[str, int] = field(default_factory=dict)
    dims: dict[str, tuple[str, ...]] = field(default_factory=dict)
    dtypes: dict[str, np.dtype] = field(default_factory=dict)
    attrs: dict[str, dict] = field(default_factory=dict)
    iterations: set = field(default_factory=set)
    svm_names: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, stores: list[xr.Dataset]) -> _Layout:
        out = cls()
        for ds in stores:
            for dim, size in ds.sizes.items():
                out.sizes[dim] = max(out.sizes.get(dim, 0), size)
            for name, var in ds.data_vars.items():
                out.dims.setdefault(name, var.dims)
                out.dtypes.setdefault(name, var.dtype)
                out.attrs.setdefault(name, dict(var.attrs))
            out.iterations.add(tuple(int(i) for i in ds["iteration"].values))
            for s in ds["svm"].values:
                if s not in out.svm_names:
                    out.svm_names.append(str(s))
        out.dims.setdefault("status", ("cell",))  # every cell missing: status only
        out.dtypes.setdefault("status", np.dtype(np.int8))
        out.attrs.setdefault("status", codes.flag_attrs(codes.CELL_STATUS))
        return out

    def empty_arrays(self, grid_shape: list[int]) -> dict[str, np.ndarray]:
        """Every variable over the grid, filled with its :func:`fill_value`."""
        arrays = {}
        for name, dims in self.dims.items():
            tail = [self.sizes[dm] if dm != "svm" else len(self.svm_names) for dm in dims[1:]]
            dtype = self.dtypes[name]
            arrays[name] = np.full(grid_shape + tail, fill_value(name, dtype), dtype=dtype)
        return arrays

    def fill(self, arrays: dict[str, np.ndarray], targets: list, ds: xr.Dataset) -> None:
        """Copy the cells of one block store to their grid points ``targets``."""
        svm_idx = [self.svm_names.index(str(s)) for s in ds["svm"].values]
        # one assignment per variable: the cells' grid indices, then the block's own sizes
        # (a block pads its cells alike; the sweep pads further to the experiment's largest)
        where = tuple(np.array(axis, dtype=np.intp) for axis in zip(*targets, strict=True))
        for name, var in ds.data_vars.items():
            vals = _align_svm(var, svm_idx, len(self.svm_names), fill_value(name, var.dtype))
            arrays[name][where + tuple(slice(0, k) for k in vals.shape[1:])] = vals


def _sweep_attrs(
    experiment: Experiment, out: xr.Dataset, n_blocks: int, n_found: int, provenance: dict
) -> dict[str, object]:
    """Global attributes of the sweep store (docs/store.md)."""
    counts = {s: int((out["status"].values == i).sum()) for i, s in enumerate(codes.CELL_STATUS)}
    return {
        "format": SWEEP_FORMAT,
        "experiment": experiment.name,
        "description": experiment.description,
        "figures": list(experiment.figures),
        "axes": list(experiment.axes),
        **fixed_attrs(experiment.fixed),
        "grid": json.dumps(experiment.axes),
        "seeds": list(experiment.seeds),
        "n_cells": experiment.n_cells,
        "n_blocks": n_blocks,
        "n_blocks_found": n_found,
        "status_counts": json.dumps(counts),
        "blocks": json.dumps(provenance, sort_keys=True),
        "schema": "see docs/store.md; dims: grid axes, seed, then variable-specific dims "
        "padded to the largest n, T, d (NaN / -1 / code fill)",
    }


def block_paths_in(blocks_dir: str | os.PathLike) -> dict[str, Path]:
    """Block stores in a directory that look finished, by block name (not verified;
    temporary stores ignored)."""
    d = Path(blocks_dir)
    if not d.is_dir():
        return {}
    return {onefile.block_of(p): p for p in d.iterdir() if is_finished_store(p)}


def write_sweep(
    experiment: Experiment, blocks_dir: str | os.PathLike, out: str | os.PathLike
) -> Path:
    """Collect ``blocks_dir`` into the consolidated sweep store at ``out`` (atomic).

    Every visible ``*.zarr.zip`` entry named after a block of ``experiment`` is verified; other
    entries are ignored with a warning.
    """
    d = Path(blocks_dir)
    entries = [p for p in d.iterdir() if not p.name.startswith(".")] if d.is_dir() else []
    paths = {onefile.block_of(p): p for p in entries if onefile.is_onefile(p)}
    stray = stray_entries(d, {b.name for b in experiment.blocks()})
    if stray:
        warnings.warn(f"ignored, no block of the plan: {[str(p) for p in stray]}", stacklevel=2)
    clean_stale_partials(out)
    planned = {b.name for b in experiment.blocks()}
    inputs = blocks_digest({n: p for n, p in paths.items() if n in planned})
    sweep = collect_sweep(experiment, paths)
    return write_atomic(sweep, out, consolidated=True, manifest_extra={"inputs_sha256": inputs})


def collect_experiment(
    settings_json: str, block_stores: list[str], out: str, workers: int = 1
) -> Path:
    """Workflow entry point of the collect rule (:func:`attnsvm.sweep.collect.collect_sweep`)."""
    clean_stale_partials(out)  # of a killed earlier attempt
    exp = packs.kept(experiment_from_json(settings_json), Path(out).parent)  # the plan's packs
    paths = {onefile.block_of(p): p for p in block_stores}
    unknown = sorted(set(paths) - {b.name for b in exp.blocks()})
    if unknown:
        raise ValueError(f"block stores not in the plan of {exp.name!r}: {unknown[:5]}")
    inputs = blocks_digest(paths)  # before reading: a block replaced meanwhile is a mismatch
    with stage(log, "collect", experiment=exp.name, blocks=len(paths), workers=workers) as info:
        try:
            sweep = collect_sweep(exp, paths, workers)
        except StoreError as err:
            forget_verified(err.path)  # the next run's repair step hashes it again
            raise
        info["cells"] = exp.n_cells
        info["MB"] = f"{sweep.nbytes / 1e6:.2f}"
    with stage(log, "write", store=out):
        return write_atomic(sweep, out, consolidated=True, manifest_extra={"inputs_sha256": inputs})
