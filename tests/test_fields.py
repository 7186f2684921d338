"""The registries: every cell field is consumed by the stages it names, every cell has one task,
and every file made from the registries is current (docs/extending.md)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from attnsvm.config.cell import Cell
from attnsvm.config.fields import FIELDS, PROBE_BASE, STAGES
from attnsvm.config.settings import Settings, stage_fields
from attnsvm.plan import parse_config
from attnsvm.sweep.store import cell_dataset
from attnsvm.tasks import run_cells, task_for, tasks

#: what each stage produces in a cell's stored result (docs/store.md)
DATA_VARIABLES = ("X", "Y", "Z", "v", "V")
TRAJECTORY_VARIABLES = ("W", "softmax", "curve_loss", "iteration")


def _changed(a, b) -> set[str]:
    """The stored variables and coordinates in which two single-cell datasets differ (the
    timings aside: they differ between any two runs)."""
    names = {n for n in set(a.variables) | set(b.variables) if "seconds" not in str(n)}
    out = set()
    for name in names:
        if name not in a.variables or name not in b.variables:
            out.add(name)
            continue
        x, y = a[name].values, b[name].values
        if x.shape != y.shape:
            out.add(name)
        elif x.dtype.kind == "f":
            if not np.array_equal(x, y, equal_nan=True):
                out.add(name)
        elif not np.array_equal(x, y):
            out.add(name)
    return out


STAGED = [f for f in FIELDS if f.stages]


@pytest.mark.parametrize("field", STAGED, ids=[f.name for f in STAGED])
def test_every_field_changes_what_its_stages_store(field):
    """A field declared for a stage changes that stage's stored output (the field's Probe):
    a field that no code reads would store identical results and fail here."""
    base = Cell(**{**PROBE_BASE, **field.probe.base})
    other = base.replace(**{field.name: field.probe.value})
    assert getattr(other, field.name) == field.probe.value, "the probe's cell normalizes it away"
    first, second = run_cells([base, other], device="cpu")
    assert (first.status, second.status) == ("ok", "ok"), (first.message, second.message)
    changed = _changed(cell_dataset(first), cell_dataset(second))
    if "data" in field.stages:
        assert changed & set(DATA_VARIABLES), f"{field.name} does not change the data"
    if "train" in field.stages:
        assert changed & set(TRAJECTORY_VARIABLES), f"{field.name} does not change training"
    if "measure" in field.stages:
        rest = changed - set(DATA_VARIABLES) - set(TRAJECTORY_VARIABLES)
        assert rest, f"{field.name} does not change any metric"
    if field.stages == ("measure",):  # a metric setting leaves data and trajectory alone
        assert not changed & {*DATA_VARIABLES, *TRAJECTORY_VARIABLES}


def test_a_stage_sees_only_the_fields_it_declares():
    train = Cell().settings("train")
    assert train.lr == 0.1 and train.checkpoints[-1] == 2000 and train.inner_dim == 10
    assert set(train) == set(stage_fields("train")) | {"checkpoints", "inner_dim"}
    with pytest.raises(AttributeError, match="attnsvm/config/fields.py"):
        train.rank_tol  # noqa: B018 - a measure setting, not a training one
    with pytest.raises(TypeError, match="no setting 'rank_tol'"):
        Settings.of("train", rank_tol=0.5)
    assert {f.name for f in FIELDS if f.stages} == {n for s in STAGES for n in stage_fields(s)}


@pytest.mark.parametrize(
    "config", ["config/config.yaml", "config/paper.yaml", "config/beyond.yaml"]
)
def test_every_cell_of_the_shipped_configs_has_exactly_one_task(config):
    experiments = parse_config(yaml.safe_load(open(config)))
    seen = set()
    for exp in experiments.values():
        for block in exp.blocks():
            cell = block.cells[0]
            seen.add(task_for(cell).name)  # raises unless exactly one task selects it
    assert seen


def test_the_tasks_are_the_modules_that_declare_one():
    names = [t.name for t in tasks()]
    assert names == sorted(names) and len(set(names)) == len(names)
    assert {
        "single_head",
        "trained_head",
        "regularization_path",
        "multi_head",
        "next_token",
    } <= set(names)


def test_generated_files_are_current():
    from attnsvm import generate

    assert generate.stale() == [], "run: attnsvm generate"
