"""Next-token prediction (docs/science.md §8): priority graphs and SCCs, the NTP-SVM against
an independent cvxpy solve, W_fin by its equations, the gradient, and the paper's claims."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from attnsvm.config.cell import Cell, CellError
from attnsvm.gd.model import Batch, NextToken
from attnsvm.ntp.data import NTPData, cyclic, embeddings, make_ntp_data, text, text_windows
from attnsvm.ntp.graph import has_cycle, priority_graphs
from attnsvm.ntp.svm import fin_basis, ntp_constraints, project, solve_ntp_svm
from attnsvm.ntp.wfin import GRAD_TOL, projected_gradient_norm, solve_wfin
from attnsvm.svm.frobenius import violation
from attnsvm.tasks import run_cells


def _reachability(edges: np.ndarray, K: int) -> np.ndarray:
    """Transitive closure by repeated boolean squaring (independent of scipy's SCCs)."""
    R = np.eye(K, dtype=bool)
    R[edges[:, 0], edges[:, 1]] = True
    for _ in range(K):
        R = R | ((R.astype(int) @ R.astype(int)) > 0)
    return R


def test_scc_hand_made_graph():
    # last token 4 everywhere: 0 <-> 1 (a cycle), 2 -> 3; token 4 below all
    tokens = np.array([[0, 1, 4], [1, 0, 4], [2, 3, 4], [0, 2, 4]])
    labels = np.array([0, 1, 2, 0])
    g = priority_graphs(tokens, labels, 5)
    sc = g.scc[4]
    assert sc[0] == sc[1] and len({sc[0], sc[2], sc[3], sc[4]}) == 4
    assert g.cyclic_components() == [2]
    edges = {tuple(e) for e in g.edges.tolist()}
    assert edges == {(4, 0, 1), (4, 0, 4), (4, 1, 0), (4, 1, 4), (4, 2, 3), (4, 2, 4), (4, 0, 2)}
    same = dict(zip(map(tuple, g.edges.tolist()), g.same_scc, strict=True))
    assert same[(4, 0, 1)] and same[(4, 1, 0)] and not same[(4, 0, 2)]
    # a 3-cycle through two graphs: only G^(3) has it
    tokens = np.array([[0, 1, 3], [1, 2, 3], [2, 0, 3], [0, 1, 2]])
    labels = np.array([0, 1, 2, 1])
    g = priority_graphs(tokens, labels, 4)
    assert g.cyclic_components() == [3]
    assert len(set(g.scc[2])) == 4  # G^(2): the single edge 1 -> 0 (and 1 -> 2)


@pytest.mark.parametrize("seed", range(5))
def test_scc_matches_mutual_reachability(seed):
    rng = np.random.default_rng(seed)
    K, n, T = 7, 12, 4
    tokens = np.argsort(rng.random((n, K)), axis=1)[:, :T]
    tokens[:, -1] = rng.integers(0, 2, n)  # two queries, several sequences each
    tokens[:, :-1] = np.where(tokens[:, :-1] == tokens[:, -1:], 6, tokens[:, :-1])
    labels = tokens[np.arange(n), rng.integers(0, T, n)]
    g = priority_graphs(tokens, labels, K)
    for k in g.queries:
        R = _reachability(g.edges[g.edges[:, 0] == k, 1:], K)
        mutual = R & R.T
        assert np.array_equal(mutual, g.scc[k][:, None] == g.scc[k][None, :])


def test_generators_acyclic_cyclic_text():
    for seed in range(4):
        a = make_ntp_data("ntp_acyclic", 8, 4, 6, 8, seed)
        assert np.all((a.tokens == a.labels[:, None]).any(axis=1))
        assert not has_cycle(a.tokens, a.labels, 6)
        c = make_ntp_data("ntp_cyclic", 6, 4, 6, 8, seed)
        assert has_cycle(c.tokens, c.labels, 6)
        assert np.all(c.label_mask.any(axis=1))
    np.testing.assert_allclose(np.linalg.norm(embeddings(6, 8, 0), axis=1), 1.0)
    win, nxt, vocab = text_windows(12, 5)
    assert len(vocab) == 12 and len(win) > 100 and np.all((win == nxt[:, None]).any(axis=1))
    toks, labs = text(20, 5, 12, 0)
    assert toks.shape == (20, 5) and np.array_equal(toks, text(20, 5, 12, 0)[0])
    with pytest.raises(ValueError, match="no cyclic priority graph"):
        cyclic(1, 2, 6, 0)  # one sequence has no cycle


def test_cell_rules_for_ntp():
    c = Cell(task="ntp", generator="ntp_acyclic", n=6, T=4, K=6, d=8)
    assert c.to_dict()["K"] == 6 and "K" not in Cell().to_dict()
    assert Cell(K=9).K == 6  # normalized away outside ntp: identities of old cells kept
    with pytest.raises(CellError, match="go together"):
        Cell(task="ntp")
    with pytest.raises(CellError, match="T <= K"):
        Cell(task="ntp", generator="ntp_cyclic", T=8, K=6)
    with pytest.raises(CellError, match="K must be an integer >= 2"):
        Cell(task="ntp", generator="ntp_text", K=1)


def _cvxpy_svm(cons) -> tuple[np.ndarray, float]:
    """The NTP-SVM by a per-row cvxpy model (an independent formulation)."""
    import cvxpy as cp

    d = cons.d
    W = cp.Variable((d, d))
    rows = [cons.left[k] @ W @ cons.right[k] for k in range(cons.n_rows)]
    con = [r == b if e else r >= b for r, b, e in zip(rows, cons.rhs, cons.equality, strict=True)]
    prob = cp.Problem(cp.Minimize(cp.sum_squares(W)), con)
    prob.solve(solver=cp.CLARABEL)
    assert prob.status == cp.OPTIMAL
    return W.value, float(np.sqrt(prob.value))


@pytest.mark.parametrize("generator", ["ntp_acyclic", "ntp_cyclic", "ntp_text"])
def test_ntp_svm_matches_cvxpy(generator):
    for seed in range(2):
        data = make_ntp_data(generator, 8, 4, 6, 8, seed)
        g = priority_graphs(data.tokens, data.labels, 6)
        cons = ntp_constraints(data.E, g)
        res = solve_ntp_svm(cons, "fro")
        assert res.solved and violation(cons, res.W) <= 1e-9
        W_ref, obj_ref = _cvxpy_svm(cons)
        assert abs(res.objective - obj_ref) <= 1e-6 * obj_ref
        np.testing.assert_allclose(res.W, W_ref, atol=1e-5)
        basis = fin_basis(cons)  # W_svm is orthogonal to S_fin
        assert np.linalg.norm(project(basis, res.W)) <= 1e-8 * res.objective
        nuc = solve_ntp_svm(cons, "nuc")
        assert nuc.solved and violation(cons, nuc.W) <= 1e-8


def test_wfin_tiny_case_by_its_equations():
    # every sequence is (0, 1, 2), query 2; label 0 twice and 1 once: one SCC {0, 1}.
    # L_bar(u) = (2 (-log sigma(u)) - log sigma(-u)) / 3 with u = (e_0 - e_1)^T W e_2: u = log 2
    E = embeddings(3, 4, 7)
    data = NTPData(E, np.array([[0, 1, 2]] * 3), np.array([0, 0, 1]))
    g = priority_graphs(data.tokens, data.labels, 3)
    basis = fin_basis(ntp_constraints(E, g))
    assert basis.shape[0] == 1
    fin = solve_wfin(data, g, basis)
    assert fin.solved
    a, z = E[0] - E[1], E[2]
    W_exact = np.log(2.0) * np.outer(a, z) / (a @ a * (z @ z))
    np.testing.assert_allclose(fin.W, W_exact, atol=1e-12)
    assert projected_gradient_norm(data, g, basis, fin.W) <= GRAD_TOL


def test_wfin_solves_the_optimality_equations_on_cyclic_data():
    for seed in range(4):
        data = make_ntp_data("ntp_cyclic", 8, 4, 6, 8, seed)
        g = priority_graphs(data.tokens, data.labels, 6)
        basis = fin_basis(ntp_constraints(data.E, g))
        fin = solve_wfin(data, g, basis)
        assert fin.solved and basis.shape[0] >= 1
        assert projected_gradient_norm(data, g, basis, fin.W) <= GRAD_TOL
        np.testing.assert_allclose(project(basis, fin.W), fin.W, atol=1e-12)  # W_fin in S_fin
        # a perturbation inside S_fin does not lower the reduced loss
        red_loss = _reduced_loss(data, g, basis)
        for b in basis:
            assert red_loss(fin.W + 1e-3 * b) >= red_loss(fin.W) - 1e-15


def _reduced_loss(data, g, basis):
    from attnsvm.ntp.wfin import _loss_grad_hess, reduced_dataset

    red = reduced_dataset(data, g, basis)
    return lambda W: _loss_grad_hess(red, np.einsum("ij,bij->b", W, basis), False)[0]


def test_gradient_matches_autograd():
    rng = np.random.default_rng(0)
    data = make_ntp_data("ntp_cyclic", 6, 4, 6, 5, 1)
    X = torch.tensor(data.X[None])
    Z = torch.tensor(data.Z[None])
    lab = torch.tensor(data.label_mask[None])
    W = torch.tensor(rng.standard_normal((1, 5, 5)), requires_grad=True)
    loss, p, _, (G,) = NextToken(Batch(X, Z=Z, label=lab))([W.detach()])
    s = torch.softmax(torch.einsum("sntd,sde,sne->snt", X, W, Z), -1)
    ref = -torch.log((s * lab).sum(-1)).mean()
    ref.backward()
    torch.testing.assert_close(G, W.grad, rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(loss[0], ref.detach(), rtol=1e-12, atol=0)


def _ntp_cells(generator, seeds, **kw):
    base = dict(task="ntp", generator=generator, n=6, T=4, K=6, d=8, iterations=2000)
    base.update(kw)
    return [Cell(**base, seed=s) for s in seeds]


def test_acyclic_alignment_claim():
    """The paper's claim at its sizes (n = 6, T = 4, K = 6, d = 8): on acyclic graphs
    corr(W(k), W_svm) >= 0.99, and W_fin = 0."""
    torch.set_num_threads(1)
    for res in run_cells(_ntp_cells("ntp_acyclic", range(8))):
        assert res.status == "ok", res.message
        assert res.scalars["ntp_acyclic"] == 1.0 and res.svms["ntp_svm"].solved
        assert res.scalars["corr_ntp_svm"] >= 0.99
        assert res.scalars["objective_ntp_fin"] == 0.0
        corr = res.curves["corr_ntp_svm"]
        assert corr[-1] > corr[len(corr) // 2]  # still rising


def test_cyclic_finite_part_converges_to_wfin():
    """On cyclic graphs Pi_{S_fin} W(k) reaches W_fin up to the step of normalized GD: within
    lr of it at the end (ten times closer than at the start), and about lr / 0.1 times
    closer with a smaller step lr run for as long (lr x iterations fixed)."""
    torch.set_num_threads(1)
    runs = {
        lr: run_cells(_ntp_cells("ntp_cyclic", range(4), lr=lr, iterations=round(200 / lr)))
        for lr in (0.1, 0.02)
    }
    for lr, results in runs.items():
        for res in results:
            assert res.status == "ok" and res.svms["ntp_fin"].solved
            assert res.scalars["ntp_cyclic_sccs"] >= 1
            dist = res.curves["fin_dist"]
            assert dist[-1] <= lr and dist[-1] <= 0.1 * dist.max()
            assert res.scalars["scc_mass"] >= 0.99  # hard retrieval of the label's SCC
    for big, small in zip(runs[0.1], runs[0.02], strict=True):
        assert small.scalars["fin_dist"] <= 2 * (0.02 / 0.1) * big.scalars["fin_dist"]


def test_ridge_field_reaches_ntp_training():
    """The cell field ``ridge`` is next-token prediction's ridge on K and Q (docs/science.md §3,
    §8): a ridge of 0.5 gives another trajectory than the machine-epsilon default."""
    torch.set_num_threads(1)
    kw = dict(param="KQ", iterations=30, checkpoint_count=5)
    runs = [run_cells(_ntp_cells("ntp_acyclic", [0], ridge=r, **kw))[0] for r in (0.5, 2**-52)]
    assert all(r.status == "ok" for r in runs), [r.message for r in runs]
    assert not np.array_equal(runs[0].W, runs[1].W)
