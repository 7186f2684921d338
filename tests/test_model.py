"""Model, heads, loss and gradients (docs/science.md §2-3)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

from attnsvm.gd.device import DeviceUnavailableError, resolve_device
from attnsvm.gd.kernel import Attention, attended_token
from attnsvm.gd.model import (
    RIDGE,
    head_output,
    logistic_loss,
    loss_and_grad,
    loss_fn,
)

HEAD_CASES = [("linear", 0.0), ("relu", 0.0), ("lambda", 0.3)]


def _problem(S=2, n=3, T=4, d=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((S, n, T, d))
    X /= np.linalg.norm(X, axis=-1, keepdims=True)
    Z = rng.standard_normal((S, n, d))
    Z /= np.linalg.norm(Z, axis=-1, keepdims=True)
    Y = np.where(rng.standard_normal((S, n)) > 0, 1.0, -1.0)
    v = rng.standard_normal((S, d))
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    V = rng.standard_normal((S, d, d))
    V /= np.linalg.norm(V, axis=(-2, -1), keepdims=True)
    return tuple(torch.as_tensor(a) for a in (X, Y, Z, v, V))


def _params(param, S, d, m, scale, seed=1):
    rng = np.random.default_rng(seed)
    if param == "W":
        return {"W": torch.as_tensor(scale * rng.standard_normal((S, d, d)))}
    k = np.sqrt(scale)
    return {
        "K": torch.as_tensor(k * rng.standard_normal((S, d, m))),
        "Q": torch.as_tensor(k * rng.standard_normal((S, d, m))),
    }


def _autograd(params, data, **kw):
    leaves = {k: p.clone().requires_grad_(True) for k, p in params.items()}
    loss, _ = loss_fn(leaves, *data, **kw)
    grads = torch.autograd.grad(loss.sum(), list(leaves.values()))
    return dict(zip(leaves, grads, strict=True))


def _central_fd(params, data, h=1e-5, **kw):
    out = {}
    for name, p in params.items():
        g = torch.zeros_like(p)
        flat = p.reshape(-1)
        for j in range(flat.numel()):
            e = torch.zeros_like(flat)
            e[j] = h
            up = dict(params, **{name: (flat + e).reshape(p.shape)})
            dn = dict(params, **{name: (flat - e).reshape(p.shape)})
            # loss is per seed; the seed owning entry j is the only one that moves
            g.reshape(-1)[j] = (loss_fn(up, *data, **kw)[0] - loss_fn(dn, *data, **kw)[0]).sum()
        out[name] = g / (2 * h)
    return out


@pytest.mark.parametrize("head,lam", HEAD_CASES)
@pytest.mark.parametrize("param", ["W", "KQ"])
@pytest.mark.parametrize("scale", [0.5, 50.0], ids=["moderate", "near-saturated"])
def test_gradients_match_finite_differences(head, lam, param, scale):
    data = _problem()
    S, d = data[0].shape[0], data[0].shape[-1]
    params = _params(param, S, d, m=3, scale=scale)
    kw = {"param": param, "head": head, "lam": lam, "ridge": RIDGE}
    if param == "KQ":
        kw["ridge"] = 1e-3  # large enough that the ridge term is visible to the check
    _, s = loss_fn(params, *data, **kw)
    if scale > 1:  # the "near-saturated" point really is near saturation
        assert s.max(-1).values.mean() > 0.97
        assert s.max() > 0.9999
    fd = _central_fd(params, data, **kw)
    ag = _autograd(params, data, **kw)
    _, _, hand = loss_and_grad(params, *data, **kw)
    for name in params:
        ref = fd[name]
        tol = max(1e-6 * ref.abs().max().item(), 1e-9)
        assert ref.abs().max() > 1e-5
        assert torch.allclose(ag[name], ref, rtol=0, atol=tol), name
        assert torch.allclose(hand[name], ref, rtol=0, atol=tol), name
        assert torch.allclose(hand[name], ag[name], rtol=1e-10, atol=1e-14), name


@pytest.mark.parametrize("head,lam", HEAD_CASES)
@pytest.mark.parametrize("param", ["W", "KQ"])
def test_hand_gradient_equals_autograd_when_saturated(head, lam, param):
    data = _problem(seed=3)
    S, d = data[0].shape[0], data[0].shape[-1]
    params = _params(param, S, d, m=4, scale=80.0, seed=4)
    kw = {"param": param, "head": head, "lam": lam}
    loss_a, s_a = loss_fn(params, *data, **kw)
    loss_h, s_h, hand = loss_and_grad(params, *data, **kw)
    assert torch.equal(s_a, s_h)
    assert torch.allclose(loss_a, loss_h, rtol=1e-14, atol=0)
    ag = _autograd(params, data, **kw)
    for name in params:
        assert torch.allclose(hand[name], ag[name], rtol=1e-9, atol=1e-300), name


def test_stable_token_equals_textbook_when_textbook_is_accurate():
    X, *_ = _problem(S=3, n=4, T=6, d=7)
    logits = torch.as_tensor(np.random.default_rng(5).standard_normal((3, 4, 6)) * 3)
    r, s = attended_token(X, logits)
    r_text, s_text = attended_token(X, logits, stable=False)
    assert torch.allclose(s, torch.softmax(logits, -1), rtol=1e-14, atol=0)
    assert torch.allclose(r, (s.unsqueeze(-1) * X).sum(-2), rtol=0, atol=1e-14)
    assert torch.allclose(r, r_text, rtol=0, atol=1e-14)


def _mp_logit_gradient(x, v, y, logits):
    """Exact (60-digit) dL/dlogits of one example, linear head, textbook formula."""
    mpmath.mp.dps = 60
    lg = [mpmath.mpf(float(a)) for a in logits]
    mx = max(lg)
    e = [mpmath.exp(a - mx) for a in lg]
    tot = sum(e)
    s = [a / tot for a in e]
    mv = [mpmath.mpf(float(b)) for b in v]
    gam = [mpmath.fsum(mpmath.mpf(float(a)) * b for a, b in zip(xt, mv, strict=True)) for xt in x]
    f = mpmath.fsum(st * g for st, g in zip(s, gam, strict=True))
    m = -mpmath.mpf(float(y)) * f
    g = -mpmath.mpf(float(y)) / (1 + mpmath.exp(-m))  # dL/df, n = 1
    return np.array([float(g * st * (gt - f)) for st, gt in zip(s, gam, strict=True)])


def test_stable_form_keeps_top_token_gradient_when_softmax_rounds_to_one():
    X, Y, _, v, _ = _problem(S=1, n=1, T=5, d=6, seed=7)
    logits = torch.tensor([[[3.0, 40.0, 0.0, -2.0, 1.0]]], dtype=torch.float64)
    ref = _mp_logit_gradient(X[0, 0].numpy(), v[0].numpy(), Y[0, 0].item(), logits[0, 0])
    top = 1
    assert torch.softmax(logits, -1)[0, 0, top].item() == 1.0  # s_top rounds to 1
    assert abs(ref[top]) > 1e-20  # ... but the exact top-token gradient is not zero

    def logit_grad(stable):
        lg = logits.clone().requires_grad_(True)
        r, _ = attended_token(X, lg, stable=stable)
        loss = logistic_loss(Y, head_output(r, "linear", v, None, 0.0))
        return torch.autograd.grad(loss.sum(), lg)[0][0, 0].numpy()

    stable, textbook = logit_grad(True), logit_grad(False)
    np.testing.assert_allclose(stable, ref, rtol=1e-10, atol=0)
    assert abs(stable.sum()) <= 1e-12 * np.abs(stable).max()  # softmax shift invariance
    # the textbook form loses the top token's term to cancellation
    assert abs(textbook[top] - ref[top]) > 0.5 * abs(ref[top])
    np.testing.assert_allclose(np.delete(textbook, top), np.delete(ref, top), rtol=1e-6)


def test_attention_logits_and_heads_match_numpy():
    X, Y, Z, v, V = _problem()
    W = _params("W", 2, 5, 5, 1.0)["W"]
    lg = Attention(X, Z).logits(W).numpy()
    ref = np.einsum("sntd,sde,sne->snt", X.numpy(), W.numpy(), Z.numpy())
    np.testing.assert_allclose(lg, ref, rtol=1e-13, atol=1e-14)
    r = torch.as_tensor(np.random.default_rng(2).standard_normal((2, 3, 5)))
    rn, vn, Vn = r.numpy(), v.numpy(), V.numpy()
    lin = np.einsum("snd,sd->sn", rn, vn)
    np.testing.assert_allclose(head_output(r, "linear", v, V, 0.0).numpy(), lin, rtol=1e-14)
    relu = np.maximum(np.einsum("snd,sde->sne", rn, Vn), 0).sum(-1)
    np.testing.assert_allclose(head_output(r, "relu", v, V, 0.0).numpy(), relu, rtol=1e-14)
    lamb = lin - 0.7 * (rn**2).sum(-1)
    np.testing.assert_allclose(head_output(r, "lambda", v, V, 0.7).numpy(), lamb, rtol=1e-13)
    with pytest.raises(ValueError, match="relu"):
        head_output(r, "relu", v, None, 0.0)
    with pytest.raises(ValueError, match="'tanh'"):
        head_output(r, "tanh", v, V, 0.0)


def test_logistic_loss_is_stable_and_exact():
    Y = torch.tensor([[1.0, -1.0, 1.0, 1.0]], dtype=torch.float64)
    f = torch.tensor([[1000.0, 1000.0, -40.0, 40.0]], dtype=torch.float64)
    loss = logistic_loss(Y, f)
    expected = (0.0 + 1000.0 + (40.0 + np.log1p(np.exp(-40.0))) + np.log1p(np.exp(-40.0))) / 4
    assert torch.isfinite(loss).all()
    assert loss.item() == pytest.approx(expected, rel=1e-15)
    tiny = logistic_loss(torch.ones(1, 1, dtype=torch.float64), torch.full((1, 1), 50.0))
    assert tiny.item() == pytest.approx(np.exp(-50.0), rel=1e-12)  # no 1 + tiny rounding


def test_kq_loss_includes_ridge():
    data = _problem()
    p = _params("KQ", 2, 5, 3, 1.0)
    W = {"W": p["K"] @ p["Q"].transpose(-1, -2)}
    base, _ = loss_fn(W, *data, param="W", head="linear", lam=0.0)
    with_ridge, _ = loss_fn(p, *data, param="KQ", head="linear", lam=0.0, ridge=0.01)
    norms = (p["K"] ** 2).sum((-2, -1)) + (p["Q"] ** 2).sum((-2, -1))
    assert torch.allclose(with_ridge, base + 0.01 * norms, rtol=1e-14)


def test_resolve_device():
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    assert resolve_device().type == expected
    with pytest.raises(ValueError, match="'tpu'"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(DeviceUnavailableError, match="CUDA is not available"):
            resolve_device("cuda")
