"""The step rules of docs/science.md §10 against hand-computed steps, and in training."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnsvm.config.cell import Cell
from attnsvm.config.settings import Settings
from attnsvm.gd.optimizers import ADAM_BETAS, ADAM_EPS, RULES, STEEPEST, make_rule
from attnsvm.gd.train import stack_cells, train_cells

RNG = np.random.default_rng(0)


def _rule(name, lr, theta, loss, settings=None):
    """``step(G)``: the rule's next step ``theta(k) - theta(k+1)`` at ``theta`` and ``loss``."""
    rule = make_rule(name, lr, settings=settings)

    def step(G):
        rule.k += 1
        return rule.step(G, theta, loss)

    step.rule = rule
    return step


def _grads(shape, k=3):
    return [torch.as_tensor(RNG.standard_normal(shape)) for _ in range(k)]


@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 3, 4, 2)])
def test_sign_and_spectral_steps_by_hand(shape):
    G = _grads(shape, 1)[0]
    G[..., 0, 0] = 0.0
    theta = torch.zeros(shape, dtype=torch.float64)
    loss = torch.ones(shape[-3], dtype=torch.float64)
    sign = _rule("sign", 0.3, theta, loss)(G.clone()).numpy()
    np.testing.assert_array_equal(sign, 0.3 * np.sign(G.numpy()))
    spec = _rule("spectral", 0.3, theta, loss)(G.clone()).numpy()
    for idx in np.ndindex(*shape[:-2]):
        U, s, Vt = np.linalg.svd(G.numpy()[idx], full_matrices=False)
        np.testing.assert_allclose(spec[idx], 0.3 * U @ Vt, atol=1e-12)
        assert np.linalg.norm(spec[idx], 2) == pytest.approx(0.3)  # unit spectral norm


def test_spectral_step_of_a_rank_deficient_gradient_stays_in_its_span():
    u, w = RNG.standard_normal((4, 1)), RNG.standard_normal((4, 1))
    G = torch.as_tensor(np.stack([u @ w.T, np.zeros((4, 4))]))
    theta, loss = torch.zeros_like(G), torch.ones(2, dtype=torch.float64)
    step = _rule("spectral", 1.0, theta, loss)(G).numpy()
    want = (u / np.linalg.norm(u)) @ (w / np.linalg.norm(w)).T
    np.testing.assert_allclose(step[0], want, atol=1e-12)
    assert (step[1] == 0).all()


def test_adam_matches_torch_optim_adam_over_steps():
    shape = (3, 4, 4)
    grads = _grads(shape, 5)
    theta = torch.as_tensor(RNG.standard_normal(shape))
    rule = _rule("adam", 0.05, theta, torch.ones(3, dtype=torch.float64))
    p = torch.nn.Parameter(theta.clone())
    opt = torch.optim.Adam([p], lr=0.05, betas=ADAM_BETAS, eps=ADAM_EPS)
    ours = theta.clone()
    for G in grads:
        ours -= rule(G.clone())
        p.grad = G.clone()
        opt.step()
    np.testing.assert_allclose(ours.numpy(), p.detach().numpy(), rtol=1e-12, atol=1e-14)
    # first step by hand: m = (1-b1) G, v = (1-b2) G^2, bias-corrected ratio = sign(G)
    first = _rule("adam", 0.05, theta, None)(grads[0].clone()).numpy()
    np.testing.assert_allclose(first, 0.05 * np.sign(grads[0].numpy()), rtol=1e-12)


@pytest.mark.parametrize(("name", "p"), [("mirror1p5", 1.5), ("mirror3", 3.0)])
def test_mirror_step_by_hand(name, p):
    shape = (2, 3, 3)
    W0 = RNG.standard_normal(shape)
    grads = _grads(shape, 2)
    rule = make_rule(name, 0.2)
    W, phi = W0.copy(), np.sign(W0) * np.abs(W0) ** (p - 1)
    theta = torch.as_tensor(W0.copy())
    for G in grads:
        theta = rule(theta, G.clone(), None)
        g = G.numpy()
        phi = phi - 0.2 * g / np.linalg.norm(g, axis=(-2, -1), keepdims=True)
        W = np.sign(phi) * np.abs(phi) ** (1 / (p - 1))
    np.testing.assert_allclose(theta.numpy(), W, rtol=1e-12, atol=1e-14)


def test_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="'rmsprop'"):
        make_rule("rmsprop", 0.1)
    # every value of the cell field is a rule of the one registry
    from attnsvm.config.fields import CHOICES

    assert set(CHOICES["optimizer"]) <= set(RULES) and set(STEEPEST) < set(RULES)


E2 = dict(n=4, T=5, d=6, iterations=60, checkpoint_count=5)


@pytest.mark.parametrize("name", STEEPEST)
@pytest.mark.parametrize("param", ["W", "KQ"])
def test_each_rule_trains_bit_reproducibly_and_lowers_the_loss(name, param):
    lr = 0.05
    cells = [Cell(seed=s, param=param, optimizer=name, lr=lr, **E2) for s in range(3)]
    a = train_cells(cells, device="cpu")
    b = train_cells(cells, device="cpu")
    assert a.W.tobytes() == b.W.tobytes() and a.finite.all()
    assert (a.loss[:, -1] < a.loss[:, 0]).all()
    one = train_cells(cells[1:2], device="cpu")  # a seed does not depend on its batch
    np.testing.assert_allclose(one.W[0], a.W[1], rtol=1e-12, atol=1e-14)
    assert stack_cells(cells)["X"].shape[0] == 3


@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 3, 4, 2)])
def test_polyak_step_by_hand(shape):
    """``lr (L - L*) / ||G||^2 G`` per seed (||G|| over K and Q together), 0 at the floor,
    its length capped at POLYAK_MAX_STEP."""
    from attnsvm.gd.optimizers import POLYAK_MAX_STEP

    G = _grads(shape, 1)[0]
    seeds = shape[-3]
    loss = torch.as_tensor(RNG.uniform(0.5, 1.0, seeds))
    rule = _rule("polyak", 0.7, torch.zeros(shape, dtype=torch.float64), loss)
    floor = loss.clone()
    floor[0] = loss[0] - 0.25  # seed 0 above its floor, the others at it
    rule.rule.floor = floor
    step = rule(G.clone()).numpy()
    g = G.numpy()
    seed_g = [g[..., s, :, :] for s in range(seeds)]  # (factor,) d, m of one seed
    want0 = 0.7 * 0.25 / np.sum(seed_g[0] ** 2) * seed_g[0]
    np.testing.assert_allclose(step[..., 0, :, :], want0, rtol=1e-12)
    assert not step[..., 1:, :, :].any()
    rule.rule.floor = floor - 1e9  # a huge gap: the step is cut to the cap
    capped = rule(G.clone()).numpy()[..., 0, :, :]
    assert np.linalg.norm(capped) == pytest.approx(POLYAK_MAX_STEP)
    rule.rule.floor = floor  # a vanishing gradient (saturated attention): capped, finite
    tiny = rule(G.clone() * 1e-200).numpy()
    assert np.isfinite(tiny).all()
    assert np.linalg.norm(tiny[..., 0, :, :]) == pytest.approx(POLYAK_MAX_STEP)
    assert not rule(torch.zeros(shape, dtype=torch.float64)).any()  # G = 0: no step


def test_polyak_floor_is_the_loss_infimum_of_the_fixed_head():
    """L* = mean_i log(1 + exp(-max_t Y_i v^T x_it)) lies below the loss at any W, and W
    along the Att-SVM direction of the optimal tokens approaches it."""
    from attnsvm.gd.model import loss_fn
    from attnsvm.gd.optimizers import loss_floor
    from attnsvm.svm.constraints import att_svm_constraints
    from attnsvm.svm.frobenius import solve_frobenius

    cells = [Cell(seed=s, n=4, T=5, d=8) for s in range(3)]
    data = stack_cells(cells)
    X, Y, Z, v = (torch.as_tensor(data[k]) for k in ("X", "Y", "Z", "v"))
    floor = loss_floor((X, Y, Z, v, None), "linear")
    gamma = Y.numpy()[..., None] * np.einsum("sntd,sd->snt", X.numpy(), v.numpy())
    np.testing.assert_allclose(floor.numpy(), np.log1p(np.exp(-gamma.max(-1))).mean(-1))
    opts = dict(param="W", head="linear", lam=0.0, ridge=0.0, stable=True)
    for _ in range(20):
        W = torch.as_tensor(RNG.standard_normal((3, 8, 8)) * 5)
        loss, _ = loss_fn({"W": W}, X, Y, Z, v, None, **opts)
        assert (loss >= floor).all()
    for s in range(3):  # d >= max(T - 1, n): the SVM of opt is feasible
        opt = gamma[s].argmax(-1)
        svm = solve_frobenius(att_svm_constraints(X[s].numpy(), Z[s].numpy(), opt))
        assert svm.status == "optimal"
        far = torch.as_tensor(50.0 * svm.W / np.linalg.norm(svm.W))[None]
        loss, _ = loss_fn({"W": far}, X[s : s + 1], Y[s : s + 1], Z[s : s + 1],
                          v[s : s + 1], None, **opts)  # fmt: skip
        assert float(loss[0]) == pytest.approx(float(floor[s]), rel=1e-6)


def test_polyak_is_refused_where_its_floor_is_undefined():
    from attnsvm.config.cell import CellError

    for bad in (dict(head="relu", generator="relu"), dict(attention="causal"), dict(heads=2),
                dict(train_head=True)):  # fmt: skip
        with pytest.raises(CellError, match="polyak"):
            Cell(optimizer="polyak", **bad)
    Cell(optimizer="polyak", attention="self")  # cross and self attention are fine


def test_adam_betas_are_cell_fields_that_reach_the_rule():
    """``adam_beta1`` / ``adam_beta2`` (docs/science.md §10) are the betas of the Adam rule:
    the rule of a cell's settings steps as torch's Adam with those betas, a cell at the
    defaults trains as before (same digest, same trajectory as the default rule), and
    another beta_2 gives another trajectory."""
    from attnsvm.config.cell import CellError

    shape = (2, 3, 3)
    grads = _grads(shape, 4)
    theta = torch.as_tensor(RNG.standard_normal(shape))
    settings = Settings.of("train", optimizer="adam", adam_beta1=0.5, adam_beta2=0.95)
    rule = _rule("adam", 0.05, None, None, settings)
    p = torch.nn.Parameter(theta.clone())
    opt = torch.optim.Adam([p], lr=0.05, betas=(0.5, 0.95), eps=ADAM_EPS)
    ours = theta.clone()
    for G in grads:
        ours -= rule(G.clone())
        p.grad = G.clone()
        opt.step()
    np.testing.assert_allclose(ours.numpy(), p.detach().numpy(), rtol=1e-12, atol=1e-14)

    base = dict(optimizer="adam", n=4, T=4, d=5, iterations=60, lr=0.05)
    default = Cell(**base)
    assert (default.adam_beta1, default.adam_beta2) == ADAM_BETAS
    assert Cell(**base, adam_beta2=ADAM_BETAS[1]).digest() == default.digest()
    assert Cell(optimizer="sign", adam_beta2=0.5) == Cell(optimizer="sign")  # reset: not adam
    W = {b2: train_cells([Cell(**base, adam_beta2=b2)], device="cpu").W for b2 in (0.999, 0.95)}
    assert not np.array_equal(W[0.999], W[0.95])
    # betas (0, 0): m = G, v = G^2, no bias correction: the step is sign descent's
    W0 = train_cells([Cell(**base, adam_beta1=0.0, adam_beta2=0.0)], device="cpu").W
    sign = train_cells([Cell(**{**base, "optimizer": "sign"})], device="cpu").W
    np.testing.assert_allclose(W0, sign)
    explicit = make_rule("adam", 0.05)
    assert explicit.betas == make_rule("adam", 0.05, settings=default.settings("train")).betas
    for bad in (1.0, -0.1):
        with pytest.raises(CellError, match="adam_beta2 must be a number in"):
            Cell(optimizer="adam", adam_beta2=bad)


@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 3, 4, 2)])
def test_signum_steps_by_hand(shape):
    """Signum (docs/science.md §10): ``m <- beta m + (1 - beta) G``, step ``lr sign(m)``,
    over several gradients, computed here in numpy from the docs."""
    grads = _grads(shape, 4)
    settings = Settings.of("train", optimizer="signum", momentum=0.7)
    step = _rule("signum", 0.3, None, None, settings)
    m = np.zeros(shape)
    for G in grads:
        m = 0.7 * m + 0.3 * G.numpy()
        np.testing.assert_array_equal(step(G.clone()).numpy(), 0.3 * np.sign(m))


def test_newton_schulz_approximates_the_polar_factor():
    """Muon's orthogonalization (docs/science.md §10), written here in numpy from the docs:
    the same matrix to rounding; it keeps the gradient's singular vectors, its singular
    values land in [0.6, 1.25] (the reference's coefficients do not converge to exactly 1),
    a wide and a tall matrix are transposes of each other's, and G = 0 gives 0."""
    from attnsvm.gd.optimizers import newton_schulz

    for shape in [(4, 4), (3, 5), (5, 3), (2, 4, 4)]:
        G = RNG.standard_normal(shape)
        X = G / np.linalg.norm(G, axis=(-2, -1), keepdims=True)
        tall = shape[-2] > shape[-1]
        X = np.swapaxes(X, -1, -2) if tall else X
        for _ in range(5):
            A = X @ np.swapaxes(X, -1, -2)
            X = 3.4445 * X + (-4.7750 * A + 2.0315 * A @ A) @ X
        X = np.swapaxes(X, -1, -2) if tall else X
        ours = newton_schulz(torch.as_tensor(G)).numpy()
        np.testing.assert_allclose(ours, X, rtol=1e-10, atol=1e-12)
        for idx in np.ndindex(*shape[:-2]):
            U, s, Vt = np.linalg.svd(G[idx], full_matrices=False)
            sx = np.linalg.svd(ours[idx], compute_uv=False)
            assert sx.min() >= 0.6 and sx.max() <= 1.25, sx
            # the same singular vectors: U^T X V is diagonal
            D = U.T @ ours[idx] @ Vt.T
            np.testing.assert_allclose(D - np.diag(np.diag(D)), 0, atol=1e-10)
        wide = newton_schulz(torch.as_tensor(np.swapaxes(G, -1, -2))).numpy()
        np.testing.assert_allclose(np.swapaxes(wide, -1, -2), ours, rtol=1e-12, atol=1e-14)
    assert (newton_schulz(torch.zeros(2, 3, 3, dtype=torch.float64)) == 0).all()


def test_muon_steps_by_hand():
    """Muon (docs/science.md §10): momentum B, the Nesterov update, Newton-Schulz, scale
    ``sqrt(max(1, rows / cols))``, over several gradients; a tall block (rows > cols)."""
    from attnsvm.gd.optimizers import newton_schulz

    shape = (2, 5, 3)
    grads = _grads(shape, 4)
    settings = Settings.of("train", optimizer="muon", momentum=0.8)
    step = _rule("muon", 0.1, None, None, settings)
    B = torch.zeros(shape, dtype=torch.float64)
    for G in grads:
        B = 0.8 * B + 0.2 * G
        want = 0.1 * np.sqrt(5 / 3) * newton_schulz(0.2 * G + 0.8 * B).numpy()
        np.testing.assert_allclose(step(G.clone()).numpy(), want, rtol=1e-12, atol=1e-14)


def test_momentum_is_a_cell_field_of_signum_and_muon_only():
    """``momentum`` reaches Signum and Muon; other optimizers' cells reset it (the same
    digest as before the field existed); Signum with momentum 0 trains as sign descent, bit
    for bit; another momentum gives another trajectory; bad values are refused."""
    from attnsvm.config.cell import CellError

    base = dict(n=4, T=4, d=5, iterations=80, lr=0.05)
    assert Cell(**base, optimizer="sign", momentum=0.5) == Cell(**base, optimizer="sign")
    assert "momentum" not in Cell(**base).to_dict()
    signum0 = train_cells([Cell(**base, optimizer="signum", momentum=0.0)], device="cpu").W
    sign = train_cells([Cell(**base, optimizer="sign")], device="cpu").W
    np.testing.assert_array_equal(signum0, sign)
    W = {(o, b): train_cells([Cell(**base, optimizer=o, momentum=b)], device="cpu").W
         for o in ("signum", "muon") for b in (0.5, 0.9)}  # fmt: skip
    assert len({w.tobytes() for w in W.values()}) == len(W)
    for bad in (1.0, -0.1):
        with pytest.raises(CellError, match="momentum must be a number in"):
            Cell(optimizer="muon", momentum=bad)
