import numpy as np

from attnsvm import codes
from attnsvm.tasks import metrics as M


def test_corr_is_a_cosine():
    A = np.arange(9.0).reshape(3, 3)
    assert np.isclose(M.corr(A, 2 * A), 1.0)
    assert np.isclose(M.corr(A, -A), -1.0)
    assert np.isnan(M.corr(A, None)) and np.isnan(M.corr(np.zeros((3, 3)), A))
    stack = np.stack([A, -A, np.zeros_like(A)])
    c = M.corr_batch(stack, A[None])
    assert np.allclose(c[:2], [1, -1]) and np.isnan(c[2])


def test_rank_is_relative_and_none_is_not_rank_one():
    rng = np.random.default_rng(0)
    U = rng.standard_normal((6, 2))
    W = U @ U.T * 1e6 + 1e-3 * np.eye(6)  # tiny tail relative to the top singular value
    assert M.rank(W, 1e-6) == 2
    assert M.rank(W * 1e-9, 1e-6) == 2  # scale-free
    assert M.rank(None) == -1
    assert M.rank(np.zeros((3, 3))) == 0


def test_effective_rank():
    assert np.isclose(M.effective_rank(np.eye(4)), 4.0)
    assert np.isclose(M.effective_rank(np.diag([1.0, 0, 0])), 1.0)


def test_softmax_mass_and_saturation():
    s = np.array([[0.9999, 0.0001], [0.5, 0.5]])
    assert np.isclose(M.softmax_mass(s), (0.9999 + 0.5) / 2)
    assert not M.is_saturated(s, 1e-3)
    assert M.is_saturated(s[:1], 1e-3)
    assert list(M.selected_tokens(s)) == [0, 0]


def test_convergence_type_rules():
    kw = dict(threshold=0.99)
    assert (
        M.convergence_type(
            saturated=False, alpha_is_opt=True, locally_optimal=True, correlation=1.0, **kw
        )
        == "unsaturated"
    )
    assert (
        M.convergence_type(
            saturated=True, alpha_is_opt=True, locally_optimal=True, correlation=0.995, **kw
        )
        == "global"
    )
    assert (
        M.convergence_type(
            saturated=True, alpha_is_opt=False, locally_optimal=True, correlation=0.995, **kw
        )
        == "local"
    )
    assert (
        M.convergence_type(
            saturated=True, alpha_is_opt=False, locally_optimal=False, correlation=0.995, **kw
        )
        == "not-local"
    )
    assert (
        M.convergence_type(
            saturated=True, alpha_is_opt=True, locally_optimal=True, correlation=float("nan"), **kw
        )
        == "not-local"
    )
    assert (
        M.convergence_type(
            saturated=True, alpha_is_opt=True, locally_optimal=True, correlation=0.98, **kw
        )
        == "not-local"
    )


def test_selection_type_is_the_papers_rule():
    """The class by selection ignores saturation and correlation (issue 12)."""
    assert M.selection_type(alpha_is_opt=True, locally_optimal=False) == "global"
    assert M.selection_type(alpha_is_opt=True, locally_optimal=True) == "global"
    assert M.selection_type(alpha_is_opt=False, locally_optimal=True) == "local"
    assert M.selection_type(alpha_is_opt=False, locally_optimal=False) == "not-local"
    assert M.corr_converged(0.995, 0.99) and not M.corr_converged(0.98, 0.99)
    assert not M.corr_converged(float("nan"), 0.99)
    assert codes.CONVERGENCE == ("global", "local", "not-local")
    assert {
        M.selection_type(alpha_is_opt=a, locally_optimal=b) for a in (0, 1) for b in (0, 1)
    } == set(codes.CONVERGENCE)


def test_strict_types_are_the_code_table():
    """Every class of the strict rule is a code of codes.CONVERGENCE_STRICT (one table)."""
    got = {
        M.convergence_type(
            saturated=sat, alpha_is_opt=opt, locally_optimal=loc, correlation=c, threshold=0.9
        )
        for sat in (False, True)
        for opt in (False, True)
        for loc in (False, True)
        for c in (0.5, 0.95)
    }
    assert got == set(codes.CONVERGENCE_STRICT)
