"""A whole run as one object: :func:`open_results` returns an ``xarray.DataTree``.

One node per experiment of the results directory (``results/<experiment>/``, the layout of
:mod:`attnsvm.sweep.paths`), each with up to three children:

- ``sweep``: ``sweep.zarr`` (docs/store.md, "Sweep store"), opened lazily: nothing is read
  until a value is used, and then only the chunks it lies in;
- ``summary``: ``summary.nc`` (docs/store.md, "Summary"), read into memory as a file image
  and decoded lazily (no file handle stays open);
- ``claims``: the claims ledger of the experiment, one row per claim along dimension
  ``claim``, read from its tidy table ``claims.csv`` or, without one, from ``claims.json``
  (where a run wrote them).

The root's attributes hold the run's provenance, computed from what every block job recorded
(the ``blocks`` attribute of each sweep store): the attnsvm versions and git commits that
computed the results, the package versions, devices and the first start and last finish of
the block jobs, and the text of ``run_info.rst`` (versions, cell counts and the
configuration). ``attnsvm open [RESULTS]`` prints :func:`outline` of it.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import xarray as xr

from attnsvm import provenance
from attnsvm.sweep.derived import check_record, record_of
from attnsvm.sweep.integrity import StoreError, verify_store
from attnsvm.sweep.paths import LAYOUT, Paths
from attnsvm.sweep.skeleton import SkeletonCache
from attnsvm.sweep.summary import open_summary_image

__all__ = ["Results", "ResultsError", "by_iteration", "open_results", "outline"]

#: what an experiment node may hold: child name -> path name in :data:`LAYOUT`
PARTS = {"sweep": "sweep", "summary": "summary"}


class ResultsError(Exception):
    """The results directory cannot be opened (it is missing, or holds no experiment)."""


def _experiments(paths: Paths) -> list[str]:
    """Names of the experiments in the results directory: every visible directory that holds
    a sweep, a summary or block stores, in natural order (e2 before e10)."""
    root = Path(paths.results)
    marks = ("sweep", "summary", "blocks_dir")
    names = [
        d.name
        for d in root.iterdir()
        if d.is_dir()
        and not d.name.startswith(".")
        and any(Path(paths.get(m, experiment=d.name)).exists() for m in marks)
    ]
    return sorted(
        names,
        key=lambda name: [
            (int(t), "") if t.isdigit() else (-1, t) for t in re.split(r"(\d+)", name)
        ],
    )


def _records_frame(doc: Any) -> pd.DataFrame:
    """A claims document (a list of records, or a mapping with a ``claims`` list) as one flat
    row per claim; nested values are flattened to ``a_b`` columns, lists kept as JSON text."""
    records = doc.get("claims", doc) if isinstance(doc, dict) else doc
    if isinstance(records, dict):  # {claim name: record}
        records = [{"claim": name, **rec} for name, rec in records.items()]
    frame = pd.json_normalize(records, sep="_")
    nested = [c for c in frame.columns if frame[c].map(_is_nested).any()]
    for col in nested:
        frame[col] = frame[col].map(lambda v: json.dumps(v) if _is_nested(v) else v)
    return frame


def _is_nested(value: Any) -> bool:
    return isinstance(value, list | dict)


def _claims(paths: Paths, exp: str) -> xr.Dataset | None:
    """The experiment's claims along dimension ``claim`` (None when the run wrote none)."""
    table = Path(paths.get("claims_table", experiment=exp))
    ledger = Path(paths.get("claims", experiment=exp))
    if table.is_file() or ledger.is_file():
        # the ledger and its table are derived outputs: read only once their digest record
        # says they are what the run wrote (docs/store.md, "Derived outputs")
        body = check_record(record_of(ledger), "claims", exp)
        if table.is_file() and table.name not in body["files"]:
            raise StoreError(table, "not listed in the claims' digest record")
    if table.is_file():
        frame, source = pd.read_csv(table), table
    elif ledger.is_file():
        frame, source = _records_frame(json.loads(ledger.read_text())), ledger
    else:
        return None
    # as Dataset.from_dataframe(frame.rename_axis("claim")) gives it (the ``claim`` column
    # indexes, where there is one), column by column: from_dataframe merges each column in
    # turn, 6x slower
    columns = {c: ("claim", frame[c].to_numpy()) for c in frame.columns}
    index = columns.pop("claim", ("claim", frame.index.to_numpy()))
    ds = xr.Dataset(columns, coords={"claim": index})
    ds.attrs["source"] = str(source)
    if ledger.is_file():
        ds.attrs["claims_json"] = ledger.read_text()  # the whole ledger, nothing dropped
    return ds


class Results(xr.DataTree):
    """The ``xarray.DataTree`` of a run (:func:`open_results`), whose nodes also select
    several variables as a Dataset does: ``runs["e2_local/sweep"][["a", "b"]]`` is the
    ``xarray.Dataset`` of those variables (with their coordinates)."""

    __slots__ = ()

    def __getitem__(self, key):
        if not isinstance(key, str | dict) and isinstance(key, list | tuple):
            return self.to_dataset()[list(key)]
        return super().__getitem__(key)


def by_iteration(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with its checkpoints indexed by the iteration ``k`` they were taken at: curves
    (``curve_*``, ``W``, ``softmax``) plot and select against ``iteration``; the checkpoint's
    number stays a coordinate along it (docs/store.md)."""
    if "checkpoint" in ds.dims and "iteration" in ds.coords:
        if ds["iteration"].dims == ("checkpoint",):
            return ds.swap_dims(checkpoint="iteration")
    return ds


def _open_sweep(path: Path, verify: bool, chunks: Any, cache: SkeletonCache) -> xr.Dataset:
    """The sweep store, its files checked against its manifest first: names and sizes (every
    SHA-256 with ``verify``); zarr checks each chunk's CRC-32C whenever it is read. With
    ``chunks=None`` it is built from its skeleton where ``cache`` holds one for this store
    (the file read at the first read of a variable)."""
    digest = str(verify_store(path, full=verify).get("content_sha256", ""))
    if chunks is not None:
        return xr.open_zarr(path, chunks=chunks)

    def digest_now() -> str:
        return str(verify_store(path, full=False).get("content_sha256", ""))

    return cache.open(path, digest, digest_now)


def _open_summary(path: Path, experiment: str, chunks: Any, cache: SkeletonCache) -> xr.Dataset:
    """The summary, checked against its digest record first. With ``chunks=None`` it is built
    from its skeleton where ``cache`` holds one for this file (its SHA-256), and the file is
    read at the first read of a variable (:meth:`SkeletonCache.open`).

    The file is read once into memory and closed
    (:func:`attnsvm.sweep.summary.open_summary_image`; "NetCDF: HDF error" otherwise,
    tests/test_results.py). A summary holds statistics per grid point: small next to its
    sweep, which stays on disk.

    The record check hashes the file's bytes; the checksum
    (:data:`~attnsvm.sweep.summary.CHECKSUM_ATTR`) decodes and hashes every value, which for
    a whole run's summaries costs seconds, so it runs at the first read of any of the
    summary's variables (not before its coordinates' values, which open reads), once: a
    mismatch raises :class:`~attnsvm.sweep.integrity.StoreError` naming the file there.
    """

    def digest_now() -> str:
        return check_record(record_of(path), "summary", experiment)["files"][path.name][1]

    digest = digest_now()
    if chunks is not None:
        return open_summary_image(path, chunks)
    return cache.open(path, digest, digest_now)


def _run_provenance(sweeps: dict[str, xr.Dataset], results: Path) -> dict[str, Any]:
    """Root attributes: who computed the run, with what, when (from every block's record)."""
    blocks: dict[str, dict[str, Any]] = {}
    for name, ds in sweeps.items():
        for block, info in json.loads(ds.attrs.get("blocks", "{}")).items():
            blocks[f"{name}/{block}"] = info
    versions: dict[str, set[str]] = {}
    devices: set[str] = set()
    for info in blocks.values():
        for package, version in (info.get("versions") or {}).items():
            versions.setdefault(package, set()).add(str(version))
        device = info.get("device") or []
        devices.update([device] if isinstance(device, str) else device)
    started = sorted(str(i["started"]) for i in blocks.values() if i.get("started"))
    finished = sorted(str(i["finished"]) for i in blocks.values() if i.get("finished"))
    computed = sorted(provenance.computed_by(blocks).items())
    run_info = results / LAYOUT["run_info"]
    return {
        "title": f"attnsvm results in {results}",
        "results": str(results),
        "experiments": sorted(sweeps),
        "computed_by": [f"{what}: {k} block{'s' * (k != 1)}" for what, k in computed],
        "attnsvm_versions": sorted(versions.get("attnsvm", set())),
        "git_commits": sorted({str(i.get("git_commit") or "unknown") for i in blocks.values()}),
        "versions": json.dumps({p: sorted(v) for p, v in sorted(versions.items())}),
        "devices": sorted(devices),
        "blocks": len(blocks),
        "started": started[0] if started else "",
        "finished": finished[-1] if finished else "",
        "run_info": run_info.read_text() if run_info.is_file() else "",
        "opened_by": f"attnsvm {provenance.ATTNSVM_VERSION}",
    }


def open_results(
    results: str | os.PathLike = "results", *, verify: bool = False, chunks: Any = None
) -> xr.DataTree:
    """Every experiment of a run as one ``xarray.DataTree`` (docs/store.md).

    ``tree["e2_local/sweep"]`` is the experiment's sweep store, ``tree["e2_local/summary"]``
    its summary, ``tree["e2_local/claims"]`` its claims where the run wrote them; an
    experiment node's attributes are its sweep's (without the per-block provenance) and name
    the parts it lacks in ``absent`` (a run still under way); the root's attributes are the
    run's provenance. Stores are opened lazily, chunked as stored: ``chunks=None`` (default)
    reads a variable's chunks when it is used; ``chunks={}`` gives dask arrays with the
    stored chunks (needs dask). The summary file is read once into memory and its variables
    decoded when used. Before it is opened, each sweep store's files are checked
    against its manifest by name and size (``verify=True``: by SHA-256, every byte read), and
    zarr checks every chunk's checksum when it is read; the summary and the claims ledger
    are checked against their digest records (and the summary against the checksum it
    carries); a damaged, foreign or incomplete store or file raises
    :class:`attnsvm.sweep.integrity.StoreError` naming it.

    Each store's skeleton (its variables' names, dimensions, types, attributes and
    encodings: :mod:`attnsvm.sweep.skeleton`) is kept in its experiment's directory (the
    derive job writes it; an open writes what is missing) under the store's digest: an open
    (``chunks=None``) builds the nodes from it and decodes a store only at the first read of
    one of its variables, after the checks above and a check that the store is still the one
    the skeleton describes.
    """
    root = Path(results)
    if not root.is_dir():
        raise ResultsError(f"{root}: no such results directory (run snakemake first)")
    paths = Paths(str(root))
    names = _experiments(paths)
    if not names:
        raise ResultsError(f"{root}: no experiment (no sweep.zarr, summary.nc or blocks/)")
    nodes: dict[str, xr.Dataset] = {}
    sweeps: dict[str, xr.Dataset] = {}
    for exp in names:
        attrs: dict[str, Any] = {"experiment": exp, "path": paths.experiment(exp)}
        cache = SkeletonCache(paths.experiment(exp))
        absent = []
        for child, layout_name in PARTS.items():
            path = Path(paths.get(layout_name, experiment=exp))
            if not path.exists():
                absent.append(path.name)
                continue
            if child == "sweep":
                ds = sweeps[exp] = _open_sweep(path, verify, chunks, cache)
                attrs.update({k: v for k, v in ds.attrs.items() if k != "blocks"})
            else:
                ds = _open_summary(path, exp, chunks, cache)
            nodes[f"/{exp}/{child}"] = by_iteration(ds)
        claims = _claims(paths, exp)
        if claims is not None:
            nodes[f"/{exp}/claims"] = claims
        attrs["absent"] = absent
        nodes[f"/{exp}"] = xr.Dataset(attrs=attrs)
        if chunks is None:
            cache.save()
    nodes["/"] = xr.Dataset(attrs=_run_provenance(sweeps, root))
    return Results.from_dict(nodes)


def _dims(ds: xr.Dataset) -> str:
    return ", ".join(f"{dim} {size}" for dim, size in ds.sizes.items())


def outline(tree: xr.DataTree) -> str:
    """A few lines per experiment: what the tree holds and how to reach it from Python."""
    attrs = tree.attrs
    lines = [f"{attrs['results']}: {len(tree.children)} experiments, {attrs['blocks']} blocks"]
    lines += [f"  computed by {what}" for what in attrs["computed_by"]]
    if attrs["started"]:
        lines.append(f"  block jobs from {attrs['started']} to {attrs['finished']}")
    for name, node in tree.children.items():
        lines.append(f"{name}: {node.attrs.get('description', '')}".rstrip(": "))
        if "status_counts" in node.attrs:
            counts = json.loads(node.attrs["status_counts"])
            lines.append("  cells: " + ", ".join(f"{k} {v}" for k, v in counts.items() if v))
        for child, sub in node.children.items():
            ds = sub.to_dataset()
            if child == "claims":
                if "level" in ds and "claim_verdict" in ds:  # the tidy ledger (claims.csv):
                    # one "claim" row per claim; its evidence and control rows not counted
                    mine = ds["level"].values == "claim"
                    values, n = ds["claim_verdict"].values[mine], int(mine.sum())
                else:  # evidence rows have no verdict (NaN in the table): not counted
                    values = ds["verdict"].values if "verdict" in ds else []
                    n = ds.sizes["claim"]
                verdicts = Counter(v for v in values if isinstance(v, str))
                text = ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items()))
                lines.append(f"  claims: {n}" + (f" ({text})" if text else ""))
            else:
                lines.append(f"  {child}: {len(ds.data_vars)} variables over {_dims(ds)}")
        lines += [f"  {missing}: not written yet" for missing in node.attrs["absent"]]
    lines += [
        "",
        "In Python: tree = attnsvm.open_results("
        f"{attrs['results']!r}); tree['<experiment>/sweep'], tree['<experiment>/summary']",
    ]
    return "\n".join(lines)
