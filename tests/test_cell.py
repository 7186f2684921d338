import pytest

from attnsvm.config.cell import Cell, CellError, checkpoint_iterations


def test_defaults_are_the_e2_setting():
    c = Cell()
    assert (c.n, c.T, c.d, c.param, c.lr, c.iterations) == (6, 8, 10, "W", 0.1, 2000)
    assert c.inner_dim == 10


@pytest.mark.parametrize(
    "field,value,fragment",
    [
        ("T", 1, "T must be an integer >= 2, got 1"),
        ("d", 0, "d must be a positive integer, got 0"),
        ("n", 2.5, "n must be a positive integer, got 2.5"),
        ("head", "softmax", "head must be one of linear, relu, lambda, got 'softmax'"),
        ("param", "QK", "param must be one of W, KQ"),
        ("generator", "uniform", "generator must be one of"),
        ("m", 11, "m must be an integer in [1, d=10]"),
        ("lr", 0.0, "lr must be a positive finite number, got 0.0"),
        ("iterations", 0, "iterations must be a positive integer"),
        ("corr_threshold", 1.0, "corr_threshold must be a number in the open interval (0, 1)"),
        ("seed", -1, "seed must be a non-negative integer, got -1"),
        ("dtype", "float16", "dtype must be one of float64, float32"),
        ("train", "yes", "train must be true or false"),
    ],
)
def test_invalid_field_named_with_value(field, value, fragment):
    with pytest.raises(CellError) as err:
        Cell(**{field: value})
    assert fragment in str(err.value)


def test_cross_field_rules():
    with pytest.raises(CellError, match="toy2d"):
        Cell(generator="toy2d")
    with pytest.raises(CellError, match="d >= T"):
        Cell(generator="orthonormal", d=4, T=8)
    with pytest.raises(CellError, match="head 'relu' needs generator 'relu'"):
        Cell(head="relu")


def test_from_dict_unknown_key_hint():
    with pytest.raises(CellError, match="did you mean 'iterations'"):
        Cell.from_dict({"iteration": 10})


def test_shape_key_ignores_seed_only():
    assert Cell(seed=1).shape_key() == Cell(seed=2).shape_key()
    assert Cell(d=4).shape_key() != Cell(d=5).shape_key()
    assert Cell(seed=1).digest() != Cell(seed=2).digest()
    assert Cell.from_dict(Cell(d=4, seed=3).to_dict()) == Cell(d=4, seed=3)


def test_checkpoints():
    log = checkpoint_iterations(2000, 30, "log")
    assert log[0] == 1 and log[-1] == 2000 and log == sorted(set(log))
    assert checkpoint_iterations(2000, 20, "linear") == list(range(100, 2001, 100))
    assert checkpoint_iterations(7, 100, "log")[-1] == 7


def test_unused_fields_do_not_change_identity():
    assert Cell(param="W", m=3) == Cell(param="W")
    assert Cell(param="KQ", m=3) != Cell(param="KQ")
    assert Cell(head="linear", lam=2.0) == Cell(head="linear")
    assert Cell(generator="orthonormal", head="lambda", lam=2.0).lam == 2.0
