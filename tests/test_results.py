"""A whole run as one xarray.DataTree: attnsvm.open_results and ``attnsvm open``.

The run is two experiments of the .test config (the default sweep shrunk) through the real
pipeline (block stores, collect, summary, run info) without Snakemake; tests/test_quickstart.py
opens the Quickstart's run itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr
import zarr

import attnsvm
from attnsvm import provenance
from attnsvm.results import ResultsError, by_iteration, outline
from attnsvm.sweep.derived import record_of, write_record
from attnsvm.sweep.integrity import StoreError
from attnsvm.sweep.paths import Paths
from tests.workflow_helpers import opened_stores, tiny_results

EXPERIMENTS = ("e2_local", "e3_rank")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A results directory as the workflow writes it, for two experiments of .test."""
    return tiny_results(tmp_path_factory.mktemp("run") / "results", *EXPERIMENTS)


def copy_of(run, tmp_path):
    return shutil.copytree(run, tmp_path / "results")


def rewrite_summary(summary: Path) -> None:
    """e2_local's summary with other counts, under a digest record that matches its new
    bytes (its own checksum, carried along, no longer does)."""
    record = json.loads(record_of(summary).read_text())
    with xr.open_dataset(summary) as ds:
        changed = ds.load()
    changed["count_status"].values[...] += 1
    summary.unlink()
    changed.to_netcdf(summary)
    write_record(record_of(summary), "summary", "e2_local", [summary], record["inputs"])


def test_one_node_per_experiment_with_its_sweep_and_summary(run):
    tree = attnsvm.open_results(run)
    assert isinstance(tree, xr.DataTree)
    assert sorted(tree.children) == sorted(EXPERIMENTS)
    paths = Paths(str(run))
    for name in EXPERIMENTS:
        node = tree[name]
        assert sorted(node.children) == ["summary", "sweep"] and node.attrs["absent"] == []
        sweep, summary = node["sweep"].to_dataset(), node["summary"].to_dataset()
        # the stores as written, their checkpoints indexed by the iteration
        with xr.open_zarr(paths.sweep(name)) as want:
            xr.testing.assert_identical(sweep.load(), by_iteration(want.load()))
        with xr.open_dataset(paths.summary(name)) as want:
            xr.testing.assert_identical(summary.load(), by_iteration(want.load()))
        assert node.attrs["experiment"] == name
        assert node.attrs["n_cells"] == sweep["status"].size  # the sweep's own attributes
        assert "blocks" not in node.attrs  # the per-block provenance went to the root
    # a notebook's first look: the summary's mean is the sweep's, over the seeds that are ok
    sweep = tree["e2_local/sweep"]
    ok = sweep["corr_fro_alpha"].where(sweep["status"] == 0).sel(param="W")
    mean = tree["e2_local/summary"]["corr_fro_alpha_mean"].sel(param="W")
    np.testing.assert_allclose(float(mean), float(ok.mean("seed")), rtol=1e-12)


def test_nodes_select_as_datasets_and_curves_run_along_the_iteration(run):
    """The README's notebook: ``runs[node][[a, b]]`` is a Dataset; a curve plots against the
    iteration k, not the checkpoint's number; labels say what a variable is."""
    tree = attnsvm.open_results(run)
    pair = tree["e2_local/sweep"][["corr_fro_alpha", "corr_nuc_alpha"]]
    assert isinstance(pair, xr.Dataset) and list(pair.data_vars) == [
        "corr_fro_alpha",
        "corr_nuc_alpha",
    ]
    with xr.open_zarr(Paths(str(run)).sweep("e2_local")) as stored:
        iterations = stored["iteration"].values
        np.testing.assert_array_equal(pair["corr_fro_alpha"].values, stored["corr_fro_alpha"])
    curve = tree["e2_local/summary"]["curve_corr_nuc_alpha_mean"].sel(param="KQ")
    assert curve.dims == ("iteration",) and list(curve["iteration"].values) == list(iterations)
    assert iterations[-1] > len(iterations)  # iterations, not checkpoint numbers
    assert "checkpoint" in curve.coords  # the checkpoint's number is kept along it
    assert "final" not in curve.attrs["long_name"]  # a curve, not a final value


def test_the_summarys_checksum_is_checked_at_its_first_read(run, tmp_path):
    """open_results defers the summary's own checksum (it reads every value) to the first
    read of one of its variables: a damaged summary is still refused, by name, there."""
    root = copy_of(run, tmp_path)
    rewrite_summary(root / "e2_local" / "summary.nc")
    tree = attnsvm.open_results(root)  # opens: the record matches the bytes
    with pytest.raises(StoreError, match="do not match its own checksum"):
        _ = tree["e2_local/summary"]["count_status"].values
    good = attnsvm.open_results(run)["e2_local/summary"]
    assert int(good["count_status"].sum()) > 0  # checked once, then read


def test_stores_are_lazy_until_a_value_is_used(run):
    tree = attnsvm.open_results(run)
    for part in ("sweep", "summary"):
        ds = tree[f"e2_local/{part}"].to_dataset()
        lazy = [n for n, v in ds.data_vars.items() if not v.variable._in_memory]
        assert lazy == list(ds.data_vars), part  # nothing read yet
    w = tree["e2_local/sweep"]["W"]
    stored = zarr.open_array(Paths(str(run)).sweep("e2_local") + "/W", mode="r")
    assert tuple(w.encoding["chunks"]) == tuple(stored.chunks)  # chunked as stored
    first = w.isel(seed=0).values  # reading one seed reads it, not the variable into the tree
    assert first.shape == tuple(n for dim, n in w.sizes.items() if dim != "seed")
    assert not tree["e2_local/sweep"]["W"].variable._in_memory


def test_summaries_the_notebook_already_opened_do_not_trip_netcdf(run):
    """Opened, read and dropped summaries of the same files (a notebook's earlier cells):
    opening a summary by path again then failed with "NetCDF: HDF error" (netCDF-C / HDF5
    with one file opened and closed several times in a process); open_results reads the
    summary from an image in memory and holds no file handle."""
    paths = [Path(Paths(str(run)).summary(name)) for name in EXPERIMENTS]
    kept = [xr.open_dataset(p) for p in paths]
    for p in paths:
        dropped = xr.open_dataset(p)
        assert dropped["count_status"].values.sum() > 0
    del dropped
    tree = attnsvm.open_results(run)
    for name, ds in zip(EXPERIMENTS, kept, strict=True):
        xr.testing.assert_identical(
            tree[f"{name}/summary"].to_dataset().load(), by_iteration(ds.load())
        )


def test_root_attributes_are_the_runs_provenance(run):
    tree = attnsvm.open_results(run)
    attrs = tree.attrs
    blocks = {}
    for name in EXPERIMENTS:
        with xr.open_zarr(Paths(str(run)).sweep(name)) as ds:
            blocks.update(json.loads(ds.attrs["blocks"]))
    assert attrs["blocks"] == len(blocks) > 0
    commit = provenance.git_commit() or "unknown"
    assert attrs["git_commits"] == [commit]
    assert attrs["attnsvm_versions"] == [provenance.ATTNSVM_VERSION]
    assert attrs["computed_by"] == [
        f"attnsvm {provenance.ATTNSVM_VERSION}, git commit {commit}: {len(blocks)} blocks"
    ]
    assert json.loads(attrs["versions"])["torch"] == [provenance.package_versions()["torch"]]
    # "cpu" and, where the fused training loop computed cells, "cpu, fused loop"
    assert {dev.split(",")[0] for dev in attrs["devices"]} == {"cpu"}
    assert attrs["started"] <= attrs["finished"]
    assert "Configuration" in attrs["run_info"] and attrs["experiments"] == sorted(EXPERIMENTS)


def test_claims_are_loaded_where_they_exist(run, tmp_path):
    root = copy_of(run, tmp_path)
    ledger = [
        {
            "claim": "w_follows_frobenius",
            "variable": "corr_fro_alpha",
            "verdict": "PASS",
            "estimate": 0.998,
            "interval": [0.995, 0.999],
            "evidence": {"seeds": 4, "cells": 4, "failed": 0},
        },
        {
            "claim": "kq_follows_nuclear",
            "variable": "corr_nuc_alpha",
            "verdict": "INCONCLUSIVE",
            "estimate": 0.97,
            "interval": [0.9, 0.99],
            "evidence": {"seeds": 4, "cells": 4, "failed": 1},
        },
    ]
    path = root / "e2_local" / "claims.json"
    path.write_text(json.dumps({"claims": ledger}))
    with pytest.raises(StoreError, match="no digest record"):  # unrecorded: not trusted
        attnsvm.open_results(root)
    write_record(record_of(path), "claims", "e2_local", [path], {})
    tree = attnsvm.open_results(root)
    assert "claims" not in tree["e3_rank"].children  # none written: no node, no error
    claims = tree["e2_local/claims"].to_dataset()
    assert claims.sizes["claim"] == 2
    assert list(claims["verdict"].values) == ["PASS", "INCONCLUSIVE"]
    assert list(claims["evidence_failed"].values) == [0, 1]  # nested records flattened
    assert json.loads(claims["interval"].values[1]) == [0.9, 0.99]  # lists kept as JSON
    assert json.loads(claims.attrs["claims_json"]) == {"claims": ledger}
    # the tidy table, where the run wrote one, is the table of the node
    table = pd.DataFrame({"claim": ["a", "b", "c"], "verdict": ["PASS", "FAIL", "PASS"]})
    table.to_csv(root / "e2_local" / "claims.csv", index=False)
    with pytest.raises(StoreError, match="claims.csv"):  # the table is unrecorded
        attnsvm.open_results(root)
    write_record(
        record_of(path), "claims", "e2_local", [path, root / "e2_local" / "claims.csv"], {}
    )
    tree = attnsvm.open_results(root)
    claims = tree["e2_local/claims"]
    assert list(claims["verdict"].values) == ["PASS", "FAIL", "PASS"]
    assert claims.attrs["source"].endswith("claims.csv")
    assert "  claims: 3 (FAIL 1, PASS 2)" in outline(tree).splitlines()
    # the ledger's tidy table: claims counted by their claim rows, not evidence or control rows
    tidy = pd.DataFrame({"claim": ["a", "a", "a", "b", "b"],
                         "level": ["claim", "point", "control", "claim", "control"],
                         "claim_verdict": ["PASS", "PASS", "PASS", "INCONCLUSIVE", "INCONCLUSIVE"],
                         "verdict": ["PASS", "PASS", "FAIL", "INCONCLUSIVE", "FAIL"]})  # fmt: skip
    tidy.to_csv(root / "e2_local" / "claims.csv", index=False)
    write_record(
        record_of(path), "claims", "e2_local", [path, root / "e2_local" / "claims.csv"], {}
    )
    assert (
        "  claims: 2 (INCONCLUSIVE 1, PASS 1)" in outline(attnsvm.open_results(root)).splitlines()
    )


def test_a_run_under_way_names_what_is_not_written_yet(run, tmp_path):
    root = copy_of(run, tmp_path)
    shutil.rmtree(root / "e3_rank" / "sweep.zarr")
    (root / "e3_rank" / "summary.nc").unlink()
    tree = attnsvm.open_results(root)
    assert tree["e3_rank"].attrs["absent"] == ["sweep.zarr", "summary.nc"]
    assert not tree["e3_rank"].children
    assert "e3_rank" in outline(tree) and "sweep.zarr: not written yet" in outline(tree)


def test_a_damaged_sweep_is_refused_by_name(run, tmp_path):
    root = copy_of(run, tmp_path)
    sweep = root / "e2_local" / "sweep.zarr"
    chunk = next(
        p for p in sorted((sweep / "W").rglob("*")) if p.is_file() and p.name != "zarr.json"
    )
    chunk.write_bytes(chunk.read_bytes() + b"x")  # resized: caught by the quick check
    with pytest.raises(StoreError, match="e2_local/sweep.zarr"):
        attnsvm.open_results(root)
    chunk.write_bytes(chunk.read_bytes()[:-2] + b"y")  # same size, other bytes
    with pytest.raises(StoreError, match="does not match its checksum"):
        attnsvm.open_results(root, verify=True)


def test_no_results_is_one_clear_error(tmp_path):
    with pytest.raises(ResultsError, match="no such results directory"):
        attnsvm.open_results(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsError, match="no experiment"):
        attnsvm.open_results(tmp_path / "empty")


def test_attnsvm_open_prints_the_outline(run, tmp_path):
    cmd = [sys.executable, "-m", "attnsvm.cli", "open", str(run)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    tree = attnsvm.open_results(run)
    assert proc.stdout.strip() == outline(tree)
    for name in EXPERIMENTS:
        assert f"\n{name}: {tree[name].attrs['description']}" in proc.stdout
    counts = json.loads(tree["e3_rank"].attrs["status_counts"])
    assert f"cells: ok {counts['ok']}" in proc.stdout
    assert tree.attrs["computed_by"][0] in proc.stdout
    bad = subprocess.run(
        [*cmd[:-1], str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=300
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.startswith("attnsvm: error: ") and "Traceback" not in bad.stderr


def test_the_readmes_notebook_section_runs(run):
    """The README's "Open results in a notebook" code, on this run."""
    from tests.workflow_helpers import REPO

    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Open results in a notebook") :]
    code = section[section.index("```python\n") + 10 : section.index("```\n", 10)]
    assert 'attnsvm.open_results("results")' in code
    namespace: dict = {}
    exec(code.replace('"results"', repr(str(run))), namespace)  # noqa: S102 - our own README
    runs = namespace["runs"]
    assert isinstance(runs, xr.DataTree) and runs.attrs["computed_by"]


def test_a_changed_summary_or_ledger_is_refused_by_name(run, tmp_path):
    root = copy_of(run, tmp_path)
    summary = root / "e2_local" / "summary.nc"
    record = json.loads(record_of(summary).read_text())
    with xr.open_dataset(summary) as ds:
        changed = ds.load()
    name = next(n for n, v in changed.data_vars.items() if v.dtype.kind == "f")
    changed[name].values[...] = changed[name].values + 1.0
    summary.unlink()
    changed.to_netcdf(summary)  # another value, the old checksum attribute carried along
    with pytest.raises(StoreError, match="summary.nc"):  # caught by the digest record
        attnsvm.open_results(root)
    # a record rewritten to match the new bytes: the summary's own checksum still catches it,
    # at the first read of a variable
    write_record(record_of(summary), "summary", "e2_local", [summary], record["inputs"])
    with pytest.raises(StoreError, match="do not match its own checksum"):
        _ = attnsvm.open_results(root)["e2_local/summary"][name].values
    # another experiment's summary under this name: foreign
    shutil.copy(root / "e3_rank" / "summary.nc", summary)
    shutil.copy(record_of(root / "e3_rank" / "summary.nc"), record_of(summary))
    with pytest.raises(StoreError, match="e3_rank"):
        attnsvm.open_results(root)


def test_a_second_open_decodes_no_store_until_a_value_is_read(run, tmp_path, monkeypatch):
    """open_results keeps each store's skeleton (attnsvm.sweep.skeleton) in its experiment's
    directory: the next open builds the nodes from it and decodes a store at the first read
    of one of its variables; what it gives is what the stores hold."""
    from attnsvm.sweep.skeleton import CACHE_NAME

    root = copy_of(run, tmp_path)
    for cache in root.glob(f"*/{CACHE_NAME}"):
        cache.unlink()
    first = attnsvm.open_results(root)
    assert all((root / name / CACHE_NAME).is_file() for name in EXPERIMENTS)
    opened = opened_stores(monkeypatch)
    tree = attnsvm.open_results(root)
    assert opened == []  # nothing decoded
    assert outline(tree) == outline(first)
    _ = tree["e2_local/summary"]["count_status"].values
    assert opened == [str(root / "e2_local" / "summary.nc")]  # the store read, once
    _ = tree["e2_local/summary"]["corr_fro_alpha_mean"].values
    assert len(opened) == 1
    for name in EXPERIMENTS:
        for part in ("sweep", "summary"):
            xr.testing.assert_identical(
                tree[f"{name}/{part}"].to_dataset().load(), first[f"{name}/{part}"].to_dataset()
            )


def test_a_store_replaced_or_a_wrong_skeleton_is_refused_at_the_first_read(run, tmp_path):
    """A store replaced between the open and the first read, or a cache whose skeleton does
    not describe the store: one StoreError naming the file, never the other data."""
    from attnsvm.sweep.skeleton import CACHE_NAME

    root = copy_of(run, tmp_path)
    attnsvm.open_results(root)  # the cache holds every store
    tree = attnsvm.open_results(root)  # built from it
    rewrite_summary(root / "e2_local" / "summary.nc")
    with pytest.raises(StoreError, match="e2_local/summary.nc: replaced since it was opened"):
        _ = tree["e2_local/summary"]["count_status"].values
    cache_path = root / "e3_rank" / CACHE_NAME
    cache = json.loads(cache_path.read_text())
    entry = cache["entries"]["sweep.zarr"]["skeleton"]
    entry["attrs"]["description"] = "another run"  # the sweep's skeleton, wrong
    cache_path.write_text(json.dumps(cache))
    tree = attnsvm.open_results(root)
    assert tree["e3_rank"].attrs["description"] == "another run"  # until the first read:
    with pytest.raises(StoreError, match="open-cache.json: does not describe .*e3_rank/sweep"):
        _ = tree["e3_rank/sweep"]["status"].values
    entry["variables"]["status"]["shape"][0] += 1  # a skeleton that builds no dataset
    cache_path.write_text(json.dumps(cache))
    tree = attnsvm.open_results(root)  # is not used
    with xr.open_zarr(root / "e3_rank" / "sweep.zarr") as want:
        assert tree["e3_rank"].attrs["description"] == want.attrs["description"]
    cache_path.write_text("{not json")  # unreadable: rebuilt
    tree = attnsvm.open_results(root)
    assert int(tree["e3_rank/sweep"]["status"].size) > 0
    assert json.loads(cache_path.read_text())["entries"].keys() == {"sweep.zarr", "summary.nc"}


def test_a_skeleton_carries_metadata_exactly_or_not_at_all():
    """Attributes and encodings round-trip with their types (numpy scalars and arrays,
    NaN, tuples, zarr codecs); a dataset with an attribute JSON cannot carry has none."""
    from attnsvm.sweep.skeleton import from_skeleton, skeleton

    ds = xr.Dataset(
        {"x": (("p", "k"), np.arange(6.0).reshape(2, 3), {"scale": np.float32(0.5)})},
        coords={"p": ["W", "KQ"], "k": np.array([1, 10, 100]), "note": ("p", ["a", "b"])},
        attrs={"fill": np.nan, "sizes": np.array([1, 2]), "n": np.int64(3), "tags": ["a"]},
    )
    ds["x"].encoding = {"chunks": (1, 3), "preferred_chunks": {"p": 1}, "_FillValue": np.nan}
    skel = skeleton(ds, lambda name: name in ds.indexes)
    assert skel is not None and "values" not in skel["variables"]["x"]
    built = from_skeleton(json.loads(json.dumps(skel)), lambda: ds)
    xr.testing.assert_identical(built, ds)
    assert type(built.attrs["n"]) is np.int64 and type(built["x"].attrs["scale"]) is np.float32
    assert built["x"].encoding["chunks"] == (1, 3) and np.isnan(built["x"].encoding["_FillValue"])
    ds.attrs["when"] = pd.Timestamp("2026-01-01")
    assert skeleton(ds, lambda name: name in ds.indexes) is None
