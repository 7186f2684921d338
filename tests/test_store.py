"""Block stores, atomic writes, collection into the sweep and summaries."""

import json

import numpy as np
import pytest
import xarray as xr

from attnsvm import codes
from attnsvm.plan import parse_config
from attnsvm.sweep.collect import collect_sweep
from attnsvm.sweep.store import is_finished_store, open_block
from attnsvm.sweep.summary import summarize
from attnsvm.sweep.worker import write_block

CONFIG = {
    "experiments": {
        "tiny": {
            "fixed": {"n": 3, "T": 3, "iterations": 30, "checkpoint_count": 5},
            "grid": {"d": [1, 3], "param": ["W", "KQ"]},
            "seeds": 3,
            "block_size": 2,
        }
    }
}


@pytest.fixture(scope="module")
def experiment():
    return parse_config(CONFIG)["tiny"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory, experiment):
    root = tmp_path_factory.mktemp("blocks")
    paths = {}
    for b in experiment.blocks():
        paths[b.name] = write_block(
            list(b.cells), root / f"{b.name}.zarr", experiment="tiny", block=b.name, device="cpu"
        )
    return paths


def test_block_store_is_self_contained(stores, experiment):
    b = experiment.blocks()[-1]
    ds = open_block(stores[b.name])
    assert ds.attrs["format"] == "attnsvm-block-1"
    cells = json.loads(ds.attrs["cells"])
    assert [c["seed"] for c in cells] == b.seeds and cells[0]["d"] == 3
    assert len(ds.attrs["cells_digest"]) == 64
    for key in (
        "versions",
        "host",
        "started",
        "finished",
        "device",
        "git_commit",
        "seconds_stages",
    ):
        assert key in ds.attrs
    assert ds.attrs["versions"]["torch"] and ds.attrs["versions"]["attnsvm"]
    for var in (
        "X",
        "Y",
        "Z",
        "v",
        "W",
        "softmax",
        "svm_W",
        "svm_status",
        "status",
        "corr_fro_alpha",
        "curve_corr_fro_alpha",
        "seconds_train",
    ):
        assert var in ds, var
    assert ds.sizes["cell"] == len(b.cells)
    assert list(ds["iteration"].values)[-1] == 30
    assert np.all(ds["status"].values == codes.CELL_STATUS.index("ok"))


def test_no_temporary_left_and_rewrite_is_atomic(stores, experiment, tmp_path):
    parent = next(iter(stores.values())).parent
    assert not [p for p in parent.iterdir() if p.name.startswith(".")]
    b = experiment.blocks()[0]
    first = write_block(list(b.cells), tmp_path / "x.zarr", device="cpu")
    again = write_block(list(b.cells), tmp_path / "x.zarr", device="cpu")
    assert is_finished_store(again)
    a, c = open_block(first).load(), open_block(again).load()
    np.testing.assert_array_equal(a["W"].values, c["W"].values)  # rerun reproduces exactly


def test_d1_infeasible_is_a_status_not_a_rank(stores, experiment):
    blocks = [b for b in experiment.blocks() if dict(b.point)["d"] == 1]
    ds = open_block(stores[blocks[0].name]).load()
    st = ds["svm_status"].sel(svm="fro_opt").values
    infeasible = st == codes.SVM_STATUS.index("infeasible")
    assert infeasible.any()  # d=1 with n=3, T=3 is infeasible for most seeds
    assert np.all(ds["rank_fro_opt"].values[infeasible] == -1)
    assert np.all(np.isnan(ds["svm_W"].sel(svm="fro_opt").values[infeasible]))


def test_collect_full_and_with_missing_block(stores, experiment):
    full = collect_sweep(experiment, stores)
    assert list(full["status"].dims) == ["d", "param", "seed"]
    assert full.sizes["seed"] == 3 and full.sizes["row"] == 3
    assert json.loads(full.attrs["status_counts"])["missing"] == 0
    # d=1 cells are padded with NaN beyond their 1 x 1 matrices
    w = full["W"].sel(d=1, param="W", seed=0).isel(checkpoint=-1).values
    assert np.isfinite(w[0, 0]) and np.isnan(w[1:, :]).all()
    # values are those of the block stores
    b = experiment.blocks()[-1]
    blk = open_block(stores[b.name]).load()
    np.testing.assert_array_equal(
        full["W"].sel(d=3, param="KQ", seed=b.seeds).values, blk["W"].values
    )
    # drop one block: its cells are present with status missing, nothing else changes
    partial = dict(stores)
    gone = partial.pop(b.name)
    assert gone
    part = collect_sweep(experiment, partial)
    st = part["status"].sel(d=3, param="KQ", seed=b.seeds).values
    assert np.all(st == codes.CELL_STATUS.index("missing"))
    assert json.loads(part.attrs["status_counts"])["missing"] == len(b.cells)
    assert np.isnan(part["corr_fro_alpha"].sel(d=3, param="KQ", seed=b.seeds)).all()


def test_parallel_collect_equals_serial(stores, experiment, monkeypatch):
    import attnsvm.sweep.collect as collect_mod

    serial = collect_sweep(experiment, stores)
    monkeypatch.setattr(collect_mod, "PARALLEL_MIN_BLOCKS", 1)  # a pool even for 8 stores
    parallel = collect_sweep(experiment, stores, workers=2)
    xr.testing.assert_identical(serial, parallel)


def test_collect_asks_for_the_cores_it_reads_with():
    """The collect job's threads are the processes that read its block stores: one below
    2 x PARALLEL_MIN_BLOCKS stores (so that on 2 cores it runs beside a block job instead of
    waiting for both cores), at most COLLECT_THREADS."""
    from attnsvm.plan import COLLECT_THREADS, Plan
    from attnsvm.sweep.collect import PARALLEL_MIN_BLOCKS, read_workers

    assert COLLECT_THREADS == 2
    assert [read_workers(n, 2) for n in (0, 1, 199, 200, 10**4)] == [1, 1, 1, 2, 2]
    assert read_workers(10**4, 8) == 8 and read_workers(10**4, 1) == 1
    fixed = {"n": 3, "T": 3, "d": 3, "iterations": 5}
    sizes = {"few": 2 * PARALLEL_MIN_BLOCKS - 1, "many": 2 * PARALLEL_MIN_BLOCKS}
    experiments = {k: {"fixed": fixed, "seeds": n, "block_size": 1} for k, n in sizes.items()}
    plan = Plan.from_config({"experiments": experiments})
    assert {k: len(plan.blocks(k)) for k in sizes} == sizes
    assert plan.collect_threads("few") == 1 and plan.collect_threads("many") == 2


def test_sweep_roundtrip_and_summary(stores, experiment, tmp_path):
    from attnsvm.sweep.store import write_atomic

    sweep = collect_sweep(experiment, stores)
    write_atomic(sweep, tmp_path / "sweep.zarr", consolidated=True)
    back = xr.open_zarr(tmp_path / "sweep.zarr")  # opens with xarray alone
    assert set(back.data_vars) == set(sweep.data_vars)
    summ = summarize(back.load())
    counts = summ["count_status"].sum(["d", "param"])
    assert int(counts.sel(status="ok")) + int(counts.sel(status="failed")) == 12
    # mean over seeds equals numpy's mean over the finite values
    x = back["corr_fro_alpha"].sel(d=3, param="W").values
    assert np.isclose(float(summ["corr_fro_alpha_mean"].sel(d=3, param="W")), np.nanmean(x))
    # infeasible ranks (-1) are excluded from rank means
    r = back["rank_fro_opt"].sel(d=1, param="W").values
    m = summ["rank_fro_opt_mean"].sel(d=1, param="W").values
    assert np.isnan(m) if (r < 0).all() else np.isclose(m, r[r >= 0].mean())


def _assert_self_describing(ds: xr.Dataset, where: str) -> None:
    from attnsvm.variables import UNDESCRIBED

    for dim in ds.dims:
        assert dim in ds.coords, f"{where}: dimension {dim!r} has no coordinate"
    for name, var in ds.variables.items():
        assert var.attrs.get("long_name"), f"{where}: {name} has no long_name"
        assert var.attrs.get("description") not in (None, "", UNDESCRIBED), (where, name)
    for name in ("status", "convergence", "svm_status"):
        if name in ds.data_vars:
            attrs = ds[name].attrs
            meanings = attrs["flag_meanings"].split()
            assert len(meanings) == len(attrs["flag_values"]) > 1, (where, name)


def test_sweep_and_summary_describe_themselves(stores, experiment, tmp_path):
    """Every variable and coordinate has long_name and description, every dimension a
    coordinate, status codes their flags, each fixed setting its own attribute; the summary
    keeps all of it through NetCDF."""
    from attnsvm.sweep.store import write_atomic
    from attnsvm.sweep.summary import write_summary

    write_atomic(collect_sweep(experiment, stores), tmp_path / "sweep.zarr", consolidated=True)
    sweep = xr.open_zarr(tmp_path / "sweep.zarr")
    _assert_self_describing(sweep, "sweep.zarr")
    assert sweep["corr_fro_alpha"].attrs["units"] == "1"
    assert sweep["seconds_train"].attrs["units"] == "s"
    assert list(sweep["example"].values) == [0, 1, 2] and list(sweep["token"].values) == [0, 1, 2]
    for key, value in experiment.fixed.items():
        assert sweep.attrs[f"fixed_{key}"] == value
    assert "fixed" not in sweep.attrs
    write_summary(tmp_path / "sweep.zarr", tmp_path / "summary.nc")
    summary = xr.open_dataset(tmp_path / "summary.nc")
    _assert_self_describing(summary, "summary.nc")
    assert summary["corr_fro_alpha_mean"].attrs["units"] == "1"
    assert "mean over seeds" in summary["corr_fro_alpha_mean"].attrs["description"]
    assert summary.attrs["fixed_iterations"] == 30 and summary.attrs["experiment"] == "tiny"
    block = open_block(next(iter(stores.values())))
    _assert_self_describing(block, "block store")


def test_packed_blocks_collect_to_the_same_sweep(tmp_path, experiment, stores):
    """block_seconds packs grid points of different d into one block (padded store); the
    collected sweep equals the one from one block per grid point, value for value."""
    packed_config = json.loads(json.dumps(CONFIG))
    packed_config["block_seconds"] = 3600
    packed_config["experiments"]["tiny"]["block_size"] = 12
    packed = parse_config(packed_config)["tiny"]
    blocks = packed.blocks()
    assert len(blocks) == 1 and packed.n_blocks == 1
    (block,) = blocks
    assert len({c.d for c in block.cells}) == 2 and "_to_" in block.name
    path = write_block(
        list(block.cells),
        tmp_path / f"{block.name}.zarr",
        experiment="tiny",
        block=block.name,
        device="cpu",
    )
    store = open_block(path)
    assert store.sizes["cell"] == 12 and store.sizes["row"] == 3  # padded to the largest d
    got = collect_sweep(packed, {block.name: path})
    want = collect_sweep(experiment, stores)
    timing = [v for v in want.data_vars if v.startswith("seconds_") or v in ("svm_seconds",)]
    xr.testing.assert_identical(
        got.drop_vars(timing).drop_attrs(), want.drop_vars(timing).drop_attrs()
    )


def test_paths_are_the_one_layout_of_the_workflow():
    """attnsvm.sweep.paths: what the rules (wildcards left) and the library (filled) use."""
    from attnsvm.sweep.paths import LAYOUT, Paths, in_figures

    p = Paths("results")
    assert p.pattern("block") == "results/{experiment}/blocks/{block}.zarr.zip"
    assert p.pattern("block_log") == "results/{experiment}/logs/block/{block}.log"
    assert p.pattern("figure", ext="png") == "results/{experiment}/figures/{figure}.png"
    assert p.pattern("figures") == "results/{experiment}/figures"
    assert p.pattern("derive_log") == "results/{experiment}/logs/derive.log"
    assert p.block("e1", "b") == "results/e1/blocks/b.zarr.zip"
    assert p.sweep("e1") == "results/e1/sweep.zarr"
    assert p.summary("e1") == "results/e1/summary.nc"
    assert p.figure("e1", "e1", "pdf") == "results/e1/figures/e1.pdf"
    # the derive job names a figure's files under the folder it is given, as the layout does
    for name, values in (("figure", {"ext": "png"}), ("caption", {})):
        folder = in_figures(p.figures("e1"), name, figure="e1", **values)
        assert str(folder) == p.get(name, experiment="e1", figure="e1", **values)
    with pytest.raises(KeyError, match="summary"):
        in_figures(p.figures("e1"), "summary")
    assert p.status_table("e1") == "results/e1/status.html"
    assert p.run_info() == "results/run_info.rst"
    assert p.result_jobs("x") == [
        ("results/x/logs/collect.log", "results/x/sweep.zarr/zarr.json"),
        ("results/x/logs/derive.log", "results/x/claims.json.digest.json"),
    ]
    with pytest.raises(KeyError, match="block"):
        p.get("block", experiment="e1")
    assert all(p.pattern(name).startswith("results/") for name in LAYOUT)
