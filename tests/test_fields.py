"""The registries: every cell field is consumed by the stages it names, every cell has one task,
and every file made from the registries is current (docs/extending.md)."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from attnsvm.config.cell import Cell
from attnsvm.config.fields import FIELDS, PROBE_BASE, PROBE_RTOL, STAGES
from attnsvm.config.settings import Settings, stage_fields
from attnsvm.gd import fused
from attnsvm.gd.model import MODELS
from attnsvm.plan import parse_config
from attnsvm.sweep.store import cell_dataset
from attnsvm.tasks import run_cells, task_for, tasks

#: what each stage produces in a cell's stored result (docs/store.md)
DATA_VARIABLES = ("X", "Y", "Z", "v", "V")
TRAJECTORY_VARIABLES = ("W", "softmax", "curve_loss", "iteration")


def _changed(a, b, rtol: float = PROBE_RTOL) -> set[str]:
    """The stored variables and coordinates in which two single-cell datasets differ by more
    than rounding: a float variable when its largest difference exceeds ``rtol`` times its
    largest magnitude (or its NaNs or infinities move), anything else when it is not equal
    (the timings and ``device`` aside)."""
    names = {n for n in set(a.variables) | set(b.variables) if "seconds" not in str(n)}
    out = set()
    for name in names - {"device"}:
        if name not in a.variables or name not in b.variables:
            out.add(name)
            continue
        x, y = a[name].values, b[name].values
        if x.shape != y.shape:
            out.add(name)
        elif x.dtype.kind == "f":
            finite = np.isfinite(x) & np.isfinite(y)
            if not np.array_equal(x[~finite], y[~finite], equal_nan=True) or (
                finite.any() and np.abs(x - y)[finite].max() > rtol * np.abs(x[finite]).max()
            ):
                out.add(name)
        elif not np.array_equal(x, y):
            out.add(name)
    return out


STAGED = [f for f in FIELDS if f.stages]


def _loops(field) -> list[str]:
    """The training loops a probe runs both of its cells through (``ATTNSVM_FUSED``): the
    torch loop, and the fused loop as well where a model declares the field for it."""
    declared = any(field.name in m.FUSED_FIELDS for m in MODELS.values())
    return ["0", "1"] if declared and fused.library() is not None else ["0"]


@pytest.mark.parametrize("field", STAGED, ids=[f.name for f in STAGED])
def test_every_field_changes_what_its_stages_store(field, monkeypatch):
    """A field declared for a stage changes that stage's stored output by more than rounding
    (the field's Probe), with both cells trained by the same loop: a field that no code reads
    stores the same results, or results that differ only by the rounding of two loops, and
    fails here."""
    base = Cell(**{**PROBE_BASE, **field.probe.base})
    other = base.replace(**{field.name: field.probe.value})
    assert getattr(other, field.name) == field.probe.value, "the probe's cell normalizes it away"
    compared = 0
    for loop in _loops(field):
        monkeypatch.setenv("ATTNSVM_FUSED", loop)
        first, second = run_cells([base, other], device="cpu")
        assert (first.status, second.status) == ("ok", "ok"), (first.message, second.message)
        if _loop(first) != _loop(second):  # the value takes the cell out of the fused loop
            continue
        compared += 1
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
    assert compared, "the probe's two cells never ran through the same loop"


def _loop(res) -> str:
    """Which loop trained a result (its ``device``, attnsvm.gd.fused.describe)."""
    return "fused" if res.device.endswith("fused loop") else "torch"


def test_a_probe_sees_rounding_as_no_change():
    """Two results that differ only by rounding (the fused and the torch loop's) do not count
    as a change, so a field that no code reads cannot pass its probe through them."""
    ds = cell_dataset(run_cells([Cell(**PROBE_BASE)], device="cpu")[0])
    nudged = ds.copy(deep=True)
    nudged["W"].values[...] *= 1 + 1e-12
    assert _changed(ds, nudged) == set()
    nudged["W"].values[..., 0, 0] += 1e-6
    assert _changed(ds, nudged) == {"W"}


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


def test_the_cells_type_stub_declares_every_field_and_public_name():
    """attnsvm/config/cell.pyi (generated) is what type checkers read instead of cell.py: it
    declares every field with its type and default, and every public name of the module."""
    import ast
    import inspect

    from attnsvm.config import cell as cell_module

    stub = ast.parse(cell_module.stub())
    (cls,) = [n for n in stub.body if isinstance(n, ast.ClassDef)]
    fields = {
        n.target.id: ast.unparse(n.annotation) for n in cls.body if isinstance(n, ast.AnnAssign)
    }
    assert fields == {f.name: f.type for f in FIELDS}
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    public = {n for n, _ in inspect.getmembers(Cell) if not n.startswith("_")}
    assert public - set(fields) - {"inner_dim"} <= methods
    names = {n.name for n in stub.body if isinstance(n, ast.FunctionDef)}
    names |= {a.asname for n in stub.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert set(cell_module.__all__) - {"Cell"} <= names


def test_generated_files_are_current():
    from attnsvm import generate

    assert generate.stale() == [], "run: attnsvm generate"
