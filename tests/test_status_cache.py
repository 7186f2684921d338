"""attnsvm status remembers its plan and its quick checks, and never more than their keys vouch
for (attnsvm.status_cache)."""

from __future__ import annotations

import json

import pytest

import attnsvm.status as status_mod
from attnsvm import status_cache
from attnsvm.plan import Plan
from attnsvm.status import sweep_status
from attnsvm.sweep.integrity import write_manifest
from tests.test_status_estimate import CONFIG, _fake_store
from tests.workflow_helpers import write_config


@pytest.fixture
def sweep(tmp_path, monkeypatch):
    """A config and two finished blocks of experiment ``a`` (one with a data file)."""
    monkeypatch.chdir(tmp_path)
    write_config(tmp_path / "c.yaml", CONFIG)
    plan = Plan.from_config(CONFIG)
    names = list(plan.blocks("a"))
    digests = plan.block_digests("a")
    blocks = tmp_path / "results" / "a" / "blocks"
    for i, name in enumerate(names):
        _fake_store(blocks, name, 1000.0 + i, 1010.0 + i, ok=1, digest=digests[name])
    store = blocks / f"{names[0]}.zarr"
    (store / "W").mkdir()
    (store / "W" / "c").write_bytes(bytes(range(64)))
    write_manifest(store, {"experiment": "a", "block": names[0], "cells_digest": digests[names[0]]})
    return tmp_path, plan, names


def _facts(report: dict) -> str:
    """A status report without its clock-dependent estimates, comparable (NaN included)."""
    return json.dumps(
        {e: {k: v for k, v in r.items() if k != "estimated_remaining_seconds"}
         for e, r in report.items()},
        sort_keys=True,
    )  # fmt: skip


def _forbid(monkeypatch, *names):
    """Make the named attributes of attnsvm.status / Plan raise when called."""

    def boom(*args, **kwargs):
        raise AssertionError("the cache should have answered")

    for name in names:
        if name == "from_config":
            monkeypatch.setattr(Plan, "from_config", boom)
        else:
            monkeypatch.setattr(status_mod, name, boom)


def test_second_call_answers_from_the_cache_with_the_same_report(sweep, monkeypatch):
    wd, _, _ = sweep
    first = sweep_status(None, "c.yaml")
    assert (wd / "results" / status_cache.CACHE_NAME).is_file()
    assert first[1]["a"]["blocks_done"] == 2 and first[1]["a"]["cells"]["ok"] == 2
    _forbid(monkeypatch, "check_block", "from_config")  # no planning, no manifest read
    second = sweep_status(None, "c.yaml")
    assert _facts(second[1]) == _facts(first[1])
    assert second[2]["estimated_remaining_seconds"] == pytest.approx(
        first[2]["estimated_remaining_seconds"], rel=1e-3
    )


def test_status_plan_holds_the_plans_cells_digests_and_costs(sweep):
    _, plan, _ = sweep
    sp = status_cache.StatusPlan.from_plan(plan)
    assert sp.experiments == list(plan.experiments)
    for exp in plan.experiments:
        full = plan.block_digests(exp)
        assert sp.digests(exp) == {b: status_cache.short(d) for b, d in full.items()}
        assert sp.block_seconds(exp) == plan.block_seconds(exp)
        assert sp.planned(exp) == {n: len(b.cells) for n, b in plan.blocks(exp).items()}


def test_a_rewritten_store_is_checked_again(sweep):
    wd, plan, names = sweep
    sweep_status(None, "c.yaml")
    store = wd / "results" / "a" / "blocks" / f"{names[1]}.zarr"
    meta = json.loads((store / "zarr.json").read_text())
    meta["attributes"]["status_counts"] = json.dumps({"failed": 1})
    (store / "zarr.json").write_text(json.dumps(meta))
    digest = plan.block_digests("a")[names[1]]
    write_manifest(store, {"experiment": "a", "block": names[1], "cells_digest": digest})
    cells = sweep_status(None, "c.yaml")[1]["a"]["cells"]
    assert cells["ok"] == 1 and cells["failed"] == 1


def test_cells_of_the_torch_loop_are_counted_from_the_store_and_from_the_cache(sweep):
    wd, plan, names = sweep
    store = wd / "results" / "a" / "blocks" / f"{names[1]}.zarr"
    meta = json.loads((store / "zarr.json").read_text())
    meta["attributes"]["cells_torch_loop"] = 1  # attnsvm.sweep.worker's count
    (store / "zarr.json").write_text(json.dumps(meta))
    digest = plan.block_digests("a")[names[1]]
    write_manifest(store, {"experiment": "a", "block": names[1], "cells_digest": digest})
    fresh = sweep_status(None, "c.yaml")[1]["a"]
    cached = sweep_status(None, "c.yaml")[1]["a"]  # every store's entry from the cache
    for report in (fresh, cached):
        assert report["cells_torch_loop"] == 1 and report["cells"]["ok"] == 2
        assert status_cache.TORCH_LOOP not in report["cells"]


def test_an_edited_config_replans_and_a_cached_store_of_other_cells_is_stale(sweep):
    wd, _, names = sweep
    sweep_status(None, "c.yaml")
    edited = json.loads(json.dumps(CONFIG))
    edited["experiments"]["a"]["fixed"]["iterations"] = 30
    write_config(wd / "c.yaml", edited)
    r = sweep_status(None, "c.yaml")[1]["a"]
    assert r["blocks_done"] == 0
    assert [u["state"] for u in r["blocks_unfinished"]] == ["stale", "stale"]


def test_a_flipped_byte_is_found_by_verify_not_by_the_quick_check(sweep):
    wd, _, names = sweep
    chunk = wd / "results" / "a" / "blocks" / f"{names[0]}.zarr" / "W" / "c"
    data = bytearray(chunk.read_bytes())
    data[10] ^= 0x10
    chunk.write_bytes(bytes(data))
    assert sweep_status(None, "c.yaml")[1]["a"]["blocks_done"] == 2
    r = sweep_status(None, "c.yaml", verify=True)[1]["a"]
    assert r["blocks_done"] == 1
    assert r["blocks_unfinished"][0]["state"] == "damaged"
    assert "does not match its checksum" in r["blocks_unfinished"][0]["reason"]


def test_a_garbage_or_foreign_cache_is_rebuilt(sweep):
    wd, _, _ = sweep
    cache = wd / "results" / status_cache.CACHE_NAME
    truth = sweep_status(None, "c.yaml")[1]
    for junk in ("{not json", json.dumps([1, 2]), json.dumps({"format": "other", "stores": {}})):
        cache.write_text(junk)
        assert _facts(sweep_status(None, "c.yaml")[1]) == _facts(truth)
        assert json.loads(cache.read_text())["format"] == status_cache.CACHE_FORMAT


def test_an_unwritable_results_dir_gets_no_cache_and_the_same_report(sweep, monkeypatch):
    wd, _, _ = sweep
    truth = sweep_status(None, "c.yaml")[1]
    (wd / "results" / status_cache.CACHE_NAME).unlink()

    def denied(*args, **kwargs):
        raise PermissionError("read-only file system")

    monkeypatch.setattr(status_cache, "write_text_atomic", denied)
    assert _facts(sweep_status(None, "c.yaml")[1]) == _facts(truth)
    assert not (wd / "results" / status_cache.CACHE_NAME).exists()
