"""Block runtime requests under SLURM job arrays (workflow/profiles/README.md, "Job arrays").

snakemake-executor-plugin-slurm submits the ready jobs of a rule as one array with the first
job's resources, so with ``--slurm-array-jobs`` selecting ``block`` every block must ask for
the longest runtime of the plan; without arrays each asks for its own estimate.
"""

from __future__ import annotations

import pytest

from attnsvm.plan import Plan, array_rules


def plan() -> Plan:
    """Two experiments whose blocks differ in size, hence in their runtime estimates."""
    small = {"fixed": {"n": 3, "T": 3, "d": 3, "iterations": 5}, "seeds": 2, "block_size": 1}
    large = {
        "fixed": {"n": 50, "T": 8, "d": 10, "iterations": 100000},
        "seeds": 200,
        "block_size": 200,
    }
    return Plan.from_config({"experiments": {"small": small, "large": large}})


@pytest.mark.parametrize(
    ("setting", "rules"),
    [
        (None, set()),
        ("", set()),
        ("block", {"block"}),
        ("block, collect", {"block", "collect"}),
        ("block;collect", {"block", "collect"}),
        ("all", {"all"}),
    ],
)
def test_array_rules_parses_the_plugin_setting(setting, rules):
    assert array_rules(setting) == rules


def test_array_runtime_is_the_longest_block_of_the_plan():
    p = plan()
    own = {(e, b): p.block_minutes(e, b) for e in p.experiments for b in p.blocks(e)}
    assert len(set(own.values())) > 1  # the test needs blocks of different estimates
    for (exp, block), minutes in own.items():
        assert p.block_runtime(exp, block) == minutes
        assert p.block_runtime(exp, block, "collect") == minutes
        for setting in ("block", "all", "collect, block"):
            assert p.block_runtime(exp, block, setting) == max(own.values())
    assert p.array_block_minutes() == max(own.values())


def test_array_runtime_costs_one_estimate_per_block(monkeypatch):
    """Snakemake asks every block job for its runtime: under arrays the plan's longest block
    is found once, not once per ask (the 10^4-block rehearsal spent its planning there)."""
    from attnsvm.config.grid import Block

    p = plan()
    calls = []
    estimate = Block.predicted_seconds
    monkeypatch.setattr(Block, "predicted_seconds", lambda b: calls.append(b) or estimate(b))
    names = [(e, b) for e in p.experiments for b in p.blocks(e)]
    for _ in range(3):
        for exp, block in names:
            p.block_runtime(exp, block, "block")
    assert len(calls) == len(names)
