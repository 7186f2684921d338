import pytest

from attnsvm.config.errors import ConfigError
from attnsvm.config.grid import block_name
from attnsvm.plan import parse_config


def cfg(**exp):
    base = {"fixed": {"n": 3, "T": 3, "d": 3, "iterations": 5}, "seeds": 2}
    base.update(exp)
    for axis in exp.get("grid", {}):
        if "fixed" not in exp:
            base["fixed"].pop(axis, None)
    return {"experiments": {"x": base}}


def test_blocks_cover_grid_and_seeds():
    c = cfg(grid={"d": [3, 4], "param": ["W", "KQ"]}, seeds=5, block_size=2)
    exp = parse_config(c)["x"]
    blocks = exp.blocks()
    assert exp.n_cells == 20
    assert len(blocks) == 4 * 3
    cells = [cell for b in blocks for cell in b.cells]
    assert len(cells) == len(set(cells)) == 20
    for b in blocks:
        assert len({c.shape_key() for c in b.cells}) == 1  # one batch per block


def test_block_names_stable_when_grid_grows():
    small = parse_config(cfg(grid={"d": [3, 5]}, seeds=4, block_size=2))["x"]
    big = parse_config(cfg(grid={"d": [3, 4, 5]}, seeds=6, block_size=2))["x"]
    old = {b.name: b.cells for b in small.blocks()}
    new = {b.name: b.cells for b in big.blocks()}
    for name, cells in old.items():
        assert new[name] == cells
    assert block_name((("d", 3), ("lr", 0.1)), [0, 1]) == "d=3_lr=0.1_seeds=0-1"


def test_yaml_float_strings_accepted():
    exp = parse_config(cfg(fixed={"n": 3, "T": 3, "d": 3, "rank_tol": "1e-6"}))["x"]
    assert exp.blocks()[0].cells[0].rank_tol == 1e-6


@pytest.mark.parametrize(
    "config,fragment",
    [
        ({"experiments": {"x": {"fixd": {}}}}, "unknown key 'fixd'; did you mean 'fixed'"),
        (cfg(fixed={"itrations": 3}), "unknown key 'itrations'; did you mean 'iterations'"),
        (cfg(grid={"dd": [1]}), "unknown key 'dd'; did you mean 'd'"),
        ({"experimnts": {}}, "did you mean 'experiments'"),
        (cfg(fixed={"n": 3, "T": 1, "d": 3}), "T must be an integer >= 2, got 1"),
        (cfg(grid={"d": [3, 0]}), "at d=0: d must be a positive integer, got 0"),
        (cfg(grid={"d": [3, "4"]}), "d must be a positive integer, got '4'"),
        (cfg(grid={"head": ["linear", "tanh"]}), "head must be one of linear, relu, lambda"),
        (cfg(grid={"param": ["WQ"]}), "param must be one of W, KQ, got 'WQ'"),
        (cfg(grid={"generator": ["normal"]}), "generator must be one of"),
        (cfg(grid={"m": [4]}, fixed={"n": 3, "T": 3, "d": 3, "param": "KQ"}), "m must be"),
        (cfg(grid={"d": []}), "grid axis 'd' is empty"),
        (cfg(grid={"d": [3, 3]}), "grid axis 'd' has duplicate values 3"),
        (cfg(seeds=[0, 1, 1]), "duplicate seeds [1]"),
        (cfg(seeds=[0, -1]), "seeds must be non-negative integers, got -1"),
        (cfg(seeds=[0, 1.5]), "seeds must be non-negative integers, got 1.5"),
        (cfg(seeds=0), "'seeds' as a count must be >= 1, got 0"),
        (cfg(grid={"lr": [0.1, -0.1]}), "lr must be a positive finite number, got -0.1"),
        (cfg(grid={"iterations": [0]}), "iterations must be a positive integer, got 0"),
        (cfg(fixed={"n": 3, "T": 3, "d": 3, "corr_threshold": 1.5}), "open interval (0, 1)"),
        (cfg(fixed={"n": 3, "T": 3, "d": 3, "saturation_tol": 0}), "open interval (0, 1)"),
        (cfg(fixed={"d": 3, "seed": 1}), "set seeds with 'seeds'"),
        (cfg(grid={"d": [3]}, fixed={"d": 3}), "'d' is both fixed and a grid axis"),
        (cfg(figures=["e7"]), "unknown figure 'e7'"),
        (cfg(block_size=0), "'block_size' must be an integer >= 1, got 0"),
        ({"experiments": {}}, "'experiments' must be a non-empty mapping"),
        ({"experiments": {"x": []}}, "must be a mapping"),
        ({**cfg(), "device": "tpu"}, "'device' must be one of auto, cpu, cuda, got 'tpu'"),
        ({**cfg(grid={"d": [3, 4, 5]}), "max_cells": 4}, "6 cells, more than max_cells=4"),
        ({"experiments": {"a b": {}}}, "experiment name 'a b'"),
    ],
)
def test_bad_config_named(config, fragment):
    with pytest.raises(ConfigError) as err:
        parse_config(config)
    assert fragment in str(err.value)


def _packed(top_block_seconds, **experiment):
    base = {"fixed": {"n": 3, "T": 3, "iterations": 50}, "grid": {"d": [2, 3, 4]}, "seeds": 2}
    config = {"block_seconds": top_block_seconds, "experiments": {"x": {**base, **experiment}}}
    return parse_config(config)["x"]


def test_block_seconds_packs_cheap_points_in_order():
    single = _packed(0)
    assert [len(b.cells) for b in single.blocks()] == [2, 2, 2]
    (pack,) = _packed(600).blocks()
    assert pack.name == "d=2_to_d=4_seeds=0-1" and _packed(600).n_blocks == 1
    # every cell of the grid once, each with its own grid point, seeds within a point
    cells = zip(pack.points_of_cells(), pack.cells, strict=True)
    assert [(dict(p)["d"], c.d, c.seed) for p, c in cells] == [
        (2, 2, 0), (2, 2, 1), (3, 3, 0), (3, 3, 1), (4, 4, 0), (4, 4, 1)
    ]  # fmt: skip
    assert pack.predicted_seconds() == pytest.approx(
        sum(b.predicted_seconds() for b in single.blocks())
    )


def test_block_seconds_bounds_and_storage_keys_cut_packs():
    one = _packed(600).blocks()[0].predicted_seconds() / 3
    cut = _packed(one * 2.5).blocks()  # two points fit, the third starts a new block
    assert [len(b.cells) for b in cut] == [4, 2]
    assert cut[1].name == block_name(cut[1].point, [0, 1])  # a lone point keeps its name
    # points that store differently (checkpoints) never share a block
    mixed = _packed(
        600, fixed={"n": 3, "T": 3}, grid={"d": [2, 3], "iterations": [50, 80]}
    ).blocks()
    assert [{c.iterations for c in b.cells} for b in mixed] == [{50}, {80}, {50}, {80}]
    # a point with more seeds than block_size is never packed
    assert len(_packed(600, seeds=5, block_size=2).blocks()) == 9


@pytest.mark.parametrize("value", [-1, "60", float("nan"), True, 10**7, [60]])
def test_bad_block_seconds_named(value):
    with pytest.raises(ConfigError, match="'block_seconds' must be a number of seconds"):
        _packed(value)
    with pytest.raises(ConfigError, match="experiment 'x': 'block_seconds'"):
        _packed(0, block_seconds=value)


def test_validated_once_then_trusted():
    from attnsvm.config.grid import planned_experiment

    config = cfg(grid={"d": [3, 4], "param": ["W", "KQ"]}, fixed={"n": 3, "T": 3, "lam": 2.0})
    planned = parse_config(config)["x"]
    again = planned_experiment(config, "x")  # the job's view: the same cells, not validated
    assert planned.checked and again.checked
    assert [b.cells for b in again.blocks()] == [b.cells for b in planned.blocks()]
    assert [c.digest() for b in again.blocks() for c in b.cells] == [
        c.digest() for b in planned.blocks() for c in b.cells
    ]
