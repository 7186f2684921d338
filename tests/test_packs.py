"""Extending a packed grid never repacks a finished point (issue 41; attnsvm.sweep.packs):
the workflow records its packs, every later plan of the same results keeps them and packs
only the new points; a job, collect and ``attnsvm status`` find the same blocks."""

from __future__ import annotations

import copy
import json

import pytest

from attnsvm.config.cell import cells_digest
from attnsvm.config.grid import planned_experiment
from attnsvm.plan import Plan
from attnsvm.sweep import packs

BASE = {
    "block_seconds": 30,
    "experiments": {
        "e6": {
            "fixed": {"n": 4, "T": 4, "iterations": 40},
            "grid": {"d": [2, 4, 6], "param": ["W", "KQ"]},
            "seeds": 2,
        }
    },
}


def _config(tmp_path, d=None, seeds=None) -> dict:
    cfg = copy.deepcopy(BASE)
    cfg["results"] = str(tmp_path / "results")
    if d is not None:
        cfg["experiments"]["e6"]["grid"]["d"] = d
    if seeds is not None:
        cfg["experiments"]["e6"]["seeds"] = seeds
    return cfg


def _digests(plan: Plan) -> dict[str, str]:
    return plan.block_digests("e6")


@pytest.mark.parametrize("grown", [[2, 4, 6, 20], [2, 3, 4, 6], [1, 2, 4, 6]])
def test_extending_a_packed_grid_keeps_every_pack_of_the_last_run(tmp_path, grown):
    first = Plan.from_config(_config(tmp_path))
    assert len(first.blocks("e6")) == 1  # all six points in one pack (cheap cells)
    first.remember()
    again = Plan.from_config(_config(tmp_path))
    assert _digests(again) == _digests(first)  # unchanged: the same packs
    extended = Plan.from_config(_config(tmp_path, d=grown))
    old, new = _digests(first), _digests(extended)
    for name, digest in old.items():
        assert new[name] == digest, name  # every finished pack: same name, same cells
    added = set(new) - set(old)
    points = {p for name in added for p in extended.blocks("e6")[name].points}
    assert points == {(("d", v), ("param", p)) for v in set(grown) - {2, 4, 6} for p in ("W", "KQ")}
    # without the record the grid is packed afresh: the old pack is gone (recomputed; a new
    # pack may take its name, never its cells)
    (tmp_path / "results" / "e6" / packs.NAME).unlink()
    fresh = Plan.from_config(_config(tmp_path, d=grown))
    assert not set(_digests(fresh).items()) & set(old.items())


def test_a_job_collect_and_status_find_the_blocks_of_the_plan_that_ran(tmp_path):
    """The workflow records its plan's packs; a job (which builds only its block), collect
    (experiment settings) and a later plan rebuild the same blocks from them."""
    Plan.from_config(_config(tmp_path)).remember()
    plan = Plan.from_config(_config(tmp_path, d=[2, 4, 6, 20]))
    plan.remember()
    exp_dir = tmp_path / "results" / "e6"
    job_exp = packs.kept(planned_experiment(_config(tmp_path, d=[2, 4, 6, 20]), "e6"), exp_dir)
    for name, block in plan.blocks("e6").items():
        assert cells_digest(job_exp.block(name).cells) == cells_digest(block.cells), name
    from attnsvm.config.grid import experiment_from_json

    collected = packs.kept(experiment_from_json(plan.experiment_config("e6")), exp_dir)
    assert [b.name for b in collected.blocks()] == list(plan.blocks("e6"))


def test_a_record_of_other_seeds_or_garbage_packs_afresh(tmp_path):
    Plan.from_config(_config(tmp_path)).remember()
    path = tmp_path / "results" / "e6" / packs.NAME
    assert json.loads(path.read_text())["packs"]
    grown = Plan.from_config(_config(tmp_path, d=[2, 4, 6, 20], seeds=3))  # every cell changed
    assert len(grown.blocks("e6")) == 1
    path.write_text("{not json")
    assert len(Plan.from_config(_config(tmp_path, d=[2, 4, 6, 20])).blocks("e6")) == 1


def test_a_pack_whose_points_left_the_grid_is_repacked(tmp_path):
    Plan.from_config(_config(tmp_path)).remember()
    shrunk = Plan.from_config(_config(tmp_path, d=[2, 6]))
    (block,) = shrunk.blocks("e6").values()
    assert {v for p in block.points for a, v in p if a == "d"} == {2, 6}
