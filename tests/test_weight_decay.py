"""Weight decay and the factorization (docs/science.md §4, "Weight decay"): known answers for
the penalty, the prox and the stationarity residuals, a trained W checked against a loss
written here from docs/science.md §2 alone, and weight decay 0 as the old code path."""

from __future__ import annotations

import numpy as np
import pytest

from attnsvm.config.cell import Cell
from attnsvm.config.fields import DEFAULTS, PROBE_BASE
from attnsvm.gd import weight_decay as WD
from attnsvm.gd.train import stack_cells, train_batch
from attnsvm.tasks import run_cells
from attnsvm.tasks.measure import stored_scalars

SMALL = {"n": 3, "T": 4, "d": 4}


def _orthogonal(rng, d):
    return np.linalg.qr(rng.standard_normal((d, d)))[0]


def test_balanced_factorization_penalty_is_the_nuclear_norm():
    """(||K||_F^2 + ||Q||_F^2) / 2 over K Q^T = W is smallest at the balanced factorization
    K = U sqrt(S), Q = V sqrt(S), where it equals ||W||_* (the AM-GM bound)."""
    rng = np.random.default_rng(0)
    W = rng.standard_normal((5, 3)) @ rng.standard_normal((3, 5))  # rank 3
    U, s, Vt = np.linalg.svd(W)
    K, Q = U * np.sqrt(s), Vt.T * np.sqrt(s)
    np.testing.assert_allclose(K @ Q.T, W, atol=1e-12)
    penalty = 0.5 * (np.sum(K * K) + np.sum(Q * Q))
    np.testing.assert_allclose(penalty, s.sum(), rtol=1e-12)
    for _ in range(20):  # any other factorization K A, Q A^{-T} pays more
        A = np.eye(5) + 0.3 * rng.standard_normal((5, 5))
        K2, Q2 = K @ A, Q @ np.linalg.inv(A).T
        np.testing.assert_allclose(K2 @ Q2.T, W, atol=1e-9)
        assert 0.5 * (np.sum(K2 * K2) + np.sum(Q2 * Q2)) >= s.sum() - 1e-12


def test_prox_nuclear_soft_thresholds_and_truncates():
    rng = np.random.default_rng(1)
    U, V = _orthogonal(rng, 3), _orthogonal(rng, 3)
    A = U @ np.diag([3.0, 1.5, 0.5]) @ V.T
    np.testing.assert_allclose(WD.prox_nuclear(A, 1.0), U @ np.diag([2.0, 0.5, 0.0]) @ V.T,
                               atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(WD.prox_nuclear(A, 1.0, rank=1),
                               U @ np.diag([2.0, 0.0, 0.0]) @ V.T, atol=1e-12)  # fmt: skip


def test_prox_residuals_vanish_exactly_at_each_problems_stationary_points():
    rng = np.random.default_rng(2)
    lam = 0.3
    U, V = _orthogonal(rng, 4), _orthogonal(rng, 4)
    W = U[:, :2] @ np.diag([2.0, 0.7]) @ V[:, :2].T  # rank 2
    # Frobenius stationarity: -G = lam W
    r = WD.prox_residuals(W, -lam * W, lam, rank=None)
    assert r["prox_residual_fro"] < 1e-14
    assert r["prox_residual_nuc"] > 0.1
    # nuclear stationarity: -G = lam (U V^T + P) with ||P||_op <= 1 on the complement
    P = 0.8 * U[:, 2:3] @ V[:, 2:3].T
    G = -lam * (U[:, :2] @ V[:, :2].T + P)
    r = WD.prox_residuals(W, G, lam, rank=None)
    assert r["prox_residual_nuc"] < 1e-14
    assert r["prox_residual_fro"] > 0.1
    # a complement above 1 is not stationary without a rank bound, and is with rank <= 2
    G = -lam * (U[:, :2] @ V[:, :2].T + 1.5 * U[:, 2:3] @ V[:, 2:3].T)
    assert WD.prox_residuals(W, G, lam, rank=None)["prox_residual_nuc"] > 0.1
    assert WD.prox_residuals(W, G, lam, rank=2)["prox_residual_nuc"] < 1e-14
    assert np.isnan(WD.prox_residuals(0 * W, G, lam, None)["prox_residual_fro"])
    with pytest.raises(ValueError, match="weight_decay > 0"):
        WD.prox_residuals(W, G, 0.0, None)


def _regularized_loss(W, X, Y, Z, v, lam):
    """docs/science.md §2 and §4 "Weight decay", written here from the text alone:
    (1/n) sum_i log(1 + exp(-Y_i v^T X_i^T softmax(X_i W z_i))) + (lam / 2) ||W||_F^2."""
    total = 0.0
    for Xi, yi, zi in zip(X, Y, Z, strict=True):
        a = Xi @ W @ zi
        s = np.exp(a - a.max())
        s /= s.sum()
        total += np.logaddexp(0.0, -yi * (v @ (Xi.T @ s)))
    return total / len(Y) + 0.5 * lam * np.sum(W * W)


def test_trained_W_is_a_stationary_point_of_the_regularized_loss():
    """Plain GD with weight decay on W ends where the gradient of L + (lam/2)||W||_F^2 (a
    finite difference of the loss above) vanishes; without weight decay it does not."""
    lam = 0.1
    cell = Cell(seed=3, optimizer="plain", lr=1.0, iterations=1500, weight_decay=lam, **SMALL)
    b = stack_cells([cell])
    kw = {"param": "W", "optimizer": "plain", "lr": 1.0, "iterations": 1500,
          "checkpoints": cell.checkpoints(), "device": "cpu"}  # fmt: skip
    args = (b["X"], b["Y"], b["Z"], b["v"], b["V"], b["init"])
    res = train_batch(*args, weight_decay=lam, **kw)
    plain = train_batch(*args, **kw)
    X, Y, Z, v = (np.asarray(b[k][0], float) for k in ("X", "Y", "Z", "v"))

    def fd_grad(W, lam_):
        g, h = np.zeros_like(W), 1e-6
        for idx in np.ndindex(W.shape):
            e = np.zeros_like(W)
            e[idx] = h
            g[idx] = (_regularized_loss(W + e, X, Y, Z, v, lam_)
                      - _regularized_loss(W - e, X, Y, Z, v, lam_)) / (2 * h)  # fmt: skip
        return g

    W = res.W[0, -1]
    assert np.linalg.norm(fd_grad(W, lam)) < 1e-7 * max(1.0, np.linalg.norm(W) * lam)
    assert np.linalg.norm(fd_grad(plain.W[0, -1], lam)) > 1e-3  # the same run without decay
    # the stored loss is the regularized one
    np.testing.assert_allclose(res.loss[0, -1], _regularized_loss(W, X, Y, Z, v, lam), rtol=1e-9)


@pytest.mark.parametrize(("param", "m"), [("W", None), ("KQ", None), ("KQ", 2)])
def test_trained_cells_store_the_residual_of_their_own_problem(param, m):
    """A trained cell's residuals: W runs are stationary for the Frobenius-regularized loss,
    K Q^T runs (m = d, and m < d with its rank bound) for the nuclear-regularized one, and
    each is far from stationary for the other problem."""
    kw = {"m": m} if m else {}
    cell = Cell(seed=1, optimizer="plain", lr=1.0, iterations=1500, param=param,
                weight_decay=0.02, **kw, **SMALL)  # fmt: skip
    (res,) = run_cells([cell], device="cpu")
    assert res.status == "ok", res.message
    s = res.scalars
    own, other = ("fro", "nuc") if param == "W" else ("nuc", "fro")
    assert s[f"prox_residual_{own}"] < 1e-4, s
    assert s[f"prox_residual_{other}"] > 0.05, s


def test_weight_decay_zero_is_the_old_code_path():
    """At the defaults (weight decay 0, initial scale 1) the loop trains the model itself (no
    wrapper, no rescaled init), the cell keeps its description and digest, and it stores no
    residuals: every stored value of an existing config is unchanged."""
    assert DEFAULTS["weight_decay"] == 0.0 and DEFAULTS["init_scale"] == 1.0
    cell = Cell(**PROBE_BASE)
    model = object()
    assert WD.wrap(model, cell.settings("train")) is model
    assert isinstance(WD.wrap(model, cell.replace(weight_decay=0.1).settings("train")),
                      WD.WeightDecay)  # fmt: skip
    for name in ("weight_decay", "init_scale"):
        assert name not in cell.to_dict()
    assert cell.replace(weight_decay=0.0, init_scale=1.0).digest() == cell.digest()
    assert cell.replace(weight_decay=0.1).digest() != cell.digest()
    assert not set(WD.SCALARS) & set(stored_scalars(cell))
    assert set(WD.SCALARS) <= set(stored_scalars(cell.replace(weight_decay=0.1)))


def test_weight_decay_refuses_the_polyak_step():
    with pytest.raises(ValueError, match="polyak"):
        Cell(optimizer="polyak", weight_decay=0.1, **SMALL)
