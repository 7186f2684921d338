"""The data of stored cells, regenerated bit for bit from docs/science.md's recipe alone.

docs/science.md §1 ("Regenerating the data bit for bit"), §8 (next-token prediction), §9 (real
tokens) and §15 say which generator, seed streams and draw order make every cell's data. This
test writes cells the way the workflow does (block stores collected into a sweep store), then
redraws their tokens, labels, queries and head with NumPy only (scikit-learn's bundled digits
and its logistic regression for §9), following the recipe (no attnsvm generator code), and
compares them with the stored arrays bit for bit; the flipped labels and the test sample,
which the stores keep as shares and errors, through the stored ``flip_share``,
``test_flip_share``, ``test_err_bayes`` and ``flip_fit_bayes``, and the initialization against
the trainer's.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr


def rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, stream]))


def normalize(a: np.ndarray) -> np.ndarray:
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def signal_noise(seed, stream, n, T, d, snr, flip):
    """docs/science.md §1 / §15, eq. (15.1)-(15.2): X, Y, flipped; v and z fixed."""
    g = rng(seed, stream)
    mu_pos, mu_neg = np.zeros(d), np.zeros(d)
    mu_pos[0], mu_neg[1] = snr, snr
    clean = np.where(g.random(n) < 0.5, 1.0, -1.0)
    X = g.standard_normal((n, T, d)) / np.sqrt(d)
    X[:, 0, :] += np.where(clean[:, None] > 0, mu_pos, mu_neg)
    flipped = g.random(n) < flip
    v = (mu_pos - mu_neg) / (np.linalg.norm(mu_pos - mu_neg) * snr)
    return X, np.where(flipped, -clean, clean), flipped, v


def gaussian(seed, n, T, d, generator, attention):
    """docs/science.md §1: v, Y, X, Z (and V for relu) from stream 0."""
    g = rng(seed, 0)
    v = normalize(g.standard_normal(d))
    Y = np.where(g.standard_normal(n) > 0, 1.0, -1.0)
    if generator == "orthonormal":
        X = np.linalg.qr(g.standard_normal((n, d, T)))[0].transpose(0, 2, 1)
        Y = np.ones(n)
    else:
        X = normalize(g.standard_normal((n, T, d)))
    Z = normalize(g.standard_normal((n, d)))
    if generator == "relu":
        g.standard_normal((d, d))
        v = np.ones(d)
    if attention == "self":
        Z = X[:, 0, :]
    return X, Y, Z, v


def write_sweep(tmp_path, name: str, fixed: dict, grid: dict, seeds: int) -> xr.Dataset:
    """The experiment's cells through the workflow's block writer and collector."""
    from attnsvm.plan import parse_experiment
    from attnsvm.sweep.collect import collect_sweep
    from attnsvm.sweep.worker import write_block

    exp = parse_experiment(name, {"figures": [], "fixed": fixed, "grid": grid, "seeds": seeds,
                                  "block_seconds": 0}, 64)  # fmt: skip
    paths = {
        b.name: write_block(b.cells, tmp_path / f"{b.name}.zarr", experiment=name,
                            block=b.name, device="cpu")
        for b in exp.blocks()
    }  # fmt: skip
    return collect_sweep(exp, paths).load()


def test_signal_noise_cells_regenerate_from_the_docs(tmp_path):
    fixed = {"generator": "signal_noise", "n": 7, "T": 3, "d": 9, "label_flip": 0.3,
             "n_test": 60, "iterations": 4, "checkpoint_count": 2}  # fmt: skip
    sweep = write_sweep(tmp_path, "b13", fixed, {"snr": [0.4, 2.0]}, seeds=3)
    from scipy.stats import norm

    for snr in (0.4, 2.0):
        for seed in range(3):
            cell = sweep.sel(snr=snr, seed=seed)
            X, Y, flipped, v = signal_noise(seed, 0, 7, 3, 9, snr, 0.3)
            assert np.array_equal(cell["X"].values, X)
            assert np.array_equal(cell["Y"].values, Y)
            assert np.array_equal(cell["v"].values, v)
            assert np.array_equal(cell["Z"].values, np.tile(np.eye(9)[0], (7, 1)))
            assert float(cell["flip_share"]) == np.mean(flipped)
            # the Bayes-optimal classifier fits a flipped label where it misses the clean one
            bayes_train = np.where(X[:, 0] @ v >= 0, 1.0, -1.0)
            fits = np.mean(bayes_train[flipped] == Y[flipped]) if flipped.any() else np.nan
            assert np.array_equal(float(cell["flip_fit_bayes"]), fits, equal_nan=True)
            Xt, Yt, ft, _ = signal_noise(seed, 2, 60, 3, 9, snr, 0.3)
            assert float(cell["test_flip_share"]) == np.mean(ft)
            bayes = np.where(Xt[:, 0] @ v >= 0, 1.0, -1.0)
            assert float(cell["test_err_bayes"]) == np.mean(bayes * Yt <= 0)
            q = norm.cdf(-snr * np.sqrt(9 / 2))
            assert float(cell["bayes_err"]) == pytest.approx(0.3 + 0.4 * q, rel=1e-15)


def weakly_relevant(seed, stream, n, T, d, norm, rho, flip):
    """docs/science.md §1 / §15, eq. (15.4)-(15.6): X and the stored labels Y."""
    mu_pos, mu_neg = np.zeros(d), np.zeros(d)
    mu_pos[0], mu_neg[1] = norm, norm
    y = np.where(np.arange(n) < n // 2, 1.0, -1.0)
    X = rng(seed, stream).standard_normal((n, T, d))
    X[:, 0] += np.where(y[:, None] > 0, mu_pos, mu_neg)
    X[:, 1] += rho * np.where(y[:, None] > 0, mu_pos, mu_neg)
    X[:, 2] += rho * np.where(y[:, None] > 0, mu_neg, mu_pos)
    half = int(np.ceil(n * flip)) // 2
    i = np.arange(n)
    flipped = (i < half) | ((n // 2 <= i) & (i < n // 2 + half))
    return X, np.where(flipped, -y, y), flipped


def test_weakly_relevant_cells_regenerate_from_the_docs(tmp_path):
    """§15, "Sakamoto & Sato's own setting": tokens, the fixed labels and flips, the query
    e_1, the fixed head nu; the clean test sample from stream 2 through the Bayes
    classifier's stored test error (the sign of <x_1 + rho (x_2 - x_3), e_1 - e_2>, (15.9))."""
    fixed = {"generator": "weakly_relevant", "n": 10, "T": 4, "d": 8, "rho": 0.1,
             "label_flip": 0.3, "n_test": 40, "param": "KQ", "init": "kaiming_q0",
             "optimizer": "plain", "lr": 0.005, "ridge": 0.0, "iterations": 4,
             "checkpoint_count": 2}  # fmt: skip
    sweep = write_sweep(tmp_path, "b17", fixed, {"signal_norm": [1.0, 4.0]}, seeds=2)
    for norm in (1.0, 4.0):
        for seed in range(2):
            cell = sweep.sel(signal_norm=norm, seed=seed)
            X, Y, flipped = weakly_relevant(seed, 0, 10, 4, 8, norm, 0.1, 0.3)
            assert np.array_equal(cell["X"].values, X) and np.array_equal(cell["Y"].values, Y)
            assert np.array_equal(cell["Z"].values, np.tile(np.eye(8)[0], (10, 1)))
            nu = (np.eye(8)[0] - np.eye(8)[1]) * norm
            assert np.array_equal(cell["v"].values, nu / np.linalg.norm(nu) / norm)
            assert float(cell["flip_share"]) == np.mean(flipped) == 0.2  # 2 floor(3 / 2) of 10
            Xt, Yt, ft = weakly_relevant(seed, 2, 40, 4, 8, norm, 0.1, 0.0)
            assert not ft.any() and float(cell["test_flip_share"]) == 0.0
            r = Xt[:, 0] + 0.1 * (Xt[:, 1] - Xt[:, 2])
            bayes = np.where(r[:, 0] - r[:, 1] >= 0, 1.0, -1.0)
            assert float(cell["test_err_bayes"]) == np.mean(bayes * Yt <= 0)


def magen(seed, stream, n, d, snr, flip):
    """docs/science.md §15, eq. (15.10)-(15.11): X, the stored labels Y, flipped."""
    g = rng(seed, stream)
    clean = np.where(g.random(n) < 0.5, 1.0, -1.0)
    noise = g.standard_normal((n, d)) / np.sqrt(d)
    noise[:, :2] = 0.0
    X = np.zeros((n, 2, d))
    X[:, 0, 0] = np.where(clean > 0, snr, 0.0)
    X[:, 0, 1] = np.where(clean > 0, 0.0, snr)
    X[:, 1] = noise
    flipped = g.random(n) < flip
    return X, np.where(flipped, -clean, clean), flipped


def test_magen_cells_regenerate_from_the_docs(tmp_path):
    """§15, "Magen et al.'s own setting": the noise-free signal token, the noise token off
    e_1 and e_2, the flips and the query e_1; the test sample from stream 2 through the
    stored flip share and the Bayes classifier's test error (the clean label, (15.12))."""
    fixed = {"generator": "magen", "T": 2, "d": 12, "n": 9, "label_flip": 0.2, "n_test": 50,
             "param": "W", "train_head": True, "optimizer": "plain", "lr": 10.0,
             "init": "zero", "iterations": 2, "checkpoint_count": 2}  # fmt: skip
    sweep = write_sweep(tmp_path, "b18", fixed, {"snr": [0.3, 1.2]}, seeds=2)
    for snr in (0.3, 1.2):
        for seed in range(2):
            cell = sweep.sel(snr=snr, seed=seed)
            X, Y, flipped = magen(seed, 0, 9, 12, snr, 0.2)
            assert np.array_equal(cell["X"].values, X) and np.array_equal(cell["Y"].values, Y)
            assert np.array_equal(cell["Z"].values, np.tile(np.eye(12)[0], (9, 1)))
            assert float(cell["flip_share"]) == np.mean(flipped)
            assert float(cell["bayes_err"]) == 0.2
            Xt, Yt, ft = magen(seed, 2, 50, 12, snr, 0.2)
            assert float(cell["test_flip_share"]) == np.mean(ft)
            clean = np.where(Xt[:, 0, 0] > 0, 1.0, -1.0)
            assert float(cell["test_err_bayes"]) == np.mean(clean * Yt <= 0) == np.mean(ft)


@pytest.mark.parametrize(
    ("generator", "attention"), [("gaussian", "cross"), ("gaussian", "self"), ("relu", "cross"),
                                 ("orthonormal", "cross")],
)  # fmt: skip
def test_gaussian_cells_regenerate_from_the_docs(tmp_path, generator, attention):
    fixed = {"generator": generator, "n": 5, "T": 3, "d": 6, "iterations": 4,
             "checkpoint_count": 2, "attention": attention}  # fmt: skip
    if generator == "relu":
        fixed["head"] = "relu"
    if generator == "orthonormal":
        fixed.update(head="lambda")
    if generator == "gaussian":
        fixed["n_test"] = 30
    sweep = write_sweep(tmp_path, "e", fixed, {"param": ["W", "KQ"]}, seeds=2)
    for seed in range(2):
        X, Y, Z, v = gaussian(seed, 5, 3, 6, generator, attention)
        for param in ("W", "KQ"):
            cell = sweep.sel(param=param, seed=seed)
            assert np.array_equal(cell["X"].values, X), (generator, seed)
            assert np.array_equal(cell["Y"].values, Y)
            assert np.array_equal(cell["Z"].values, Z)
            if "v" in cell:
                assert np.array_equal(cell["v"].values, v)
        if generator == "gaussian":  # the test sample: +1 is Bayes-optimal, labels are coins
            g = rng(seed, 2)
            Yt = np.where(g.standard_normal(30) > 0, 1.0, -1.0)
            cell = sweep.sel(param="W", seed=seed)
            assert float(cell["test_err_bayes"]) == np.mean(Yt < 0)
            assert float(cell["bayes_err"]) == 0.5


def test_the_initialization_follows_the_docs():
    """§3 (stream 1): W uniform in +-1/sqrt(d); KQ: K then Q; zero: K = 0.1 N(0, 1)."""
    from attnsvm import Cell
    from attnsvm.gd.data import make_init

    d, b = 6, 1 / np.sqrt(6)
    for seed in (0, 5):
        assert np.array_equal(make_init(Cell(d=d, seed=seed))["W"],
                              rng(seed, 1).uniform(-b, b, (d, d)))  # fmt: skip
        g = rng(seed, 1)
        K, Q = g.uniform(-b, b, (d, 3)), g.uniform(-b, b, (d, 3))
        init = make_init(Cell(d=d, seed=seed, param="KQ", m=3))
        assert np.array_equal(init["K"], K) and np.array_equal(init["Q"], Q)
        zero = make_init(Cell(d=d, seed=seed, param="KQ", init="zero"))
        assert np.array_equal(zero["K"], 0.1 * rng(seed, 1).standard_normal((d, d)))
        assert not zero["Q"].any()


def has_cycle(tokens, labels, K) -> bool:
    """§8: whether G^(0) (an edge y_i -> j for each sequence i ending in token 0 and each of its
    tokens j != y_i) has a directed cycle (depth-first search, written apart from attnsvm's)."""
    edges = {k: set() for k in range(K)}
    for row, y in zip(tokens, labels, strict=True):
        if row[-1] == 0:
            edges[int(y)] |= {int(j) for j in row if j != y}
    state = dict.fromkeys(range(K), 0)  # 0 unseen, 1 on the path, 2 done

    def visit(k) -> bool:
        state[k] = 1
        for j in edges[k]:
            if state[j] == 1 or (state[j] == 0 and visit(j)):
                return True
        state[k] = 2
        return False

    return any(state[k] == 0 and visit(k) for k in range(K))


def ntp(generator, seed, n, T, K, d):
    """docs/science.md §8's draws: embeddings from stream 3, tokens and labels from stream 2."""
    E = normalize(rng(seed, 3).standard_normal((K, d)))
    g = rng(seed, 2)
    if generator == "ntp_acyclic":
        tokens = np.argsort(g.random((n, K)), axis=1)[:, :T]
        priority = g.random((K, K))
        labels = np.array([row[np.argmax(priority[row[-1], row])] for row in tokens])
    else:
        others = 1 + np.argsort(g.random((n, K - 1)), axis=1)[:, : T - 1]
        tokens = np.concatenate([others, np.zeros((n, 1), int)], axis=1)
        while True:
            labels = tokens[np.arange(n), g.integers(0, T, n)]
            if has_cycle(tokens, labels, K):
                break
    position = np.argmax(tokens == labels[:, None], axis=1)  # tokens of a sequence are distinct
    return E[tokens], E[tokens[:, -1]], position


def test_ntp_cells_regenerate_from_the_docs(tmp_path):
    """§8: the embedded sequences, queries (last tokens) and next-token labels of the
    acyclic and cyclic generators, from the docs' draws; the store keeps each label as its
    position in the sequence (``opt``) and ``Y`` = +1."""
    n, T, K, d = 6, 4, 8, 5
    fixed = {"task": "ntp", "n": n, "T": T, "K": K, "d": d, "iterations": 4,
             "checkpoint_count": 2}  # fmt: skip
    sweep = write_sweep(tmp_path, "b7", fixed, {"generator": ["ntp_acyclic", "ntp_cyclic"]}, 3)
    for generator in ("ntp_acyclic", "ntp_cyclic"):
        for seed in range(3):
            cell = sweep.sel(generator=generator, seed=seed)
            X, Z, position = ntp(generator, seed, n, T, K, d)
            assert np.array_equal(cell["X"].values, X), (generator, seed)
            assert np.array_equal(cell["Z"].values, Z)
            assert np.array_equal(cell["opt"].values, position)
            assert np.array_equal(cell["Y"].values, np.ones(n))


def digits(seed, n, patch, positional, pos=3, neg=8):
    """docs/science.md §9's recipe for the ``digits`` generator: X, Y, Z, v."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    data = load_digits()
    images = data.images / 16.0
    pool_pos, pool_neg = images[data.target == pos], images[data.target == neg]
    centre = np.concatenate([pool_pos.ravel(), pool_neg.ravel()]).mean()
    g = rng(seed, 0)
    n_pos, n_neg = -(-n // 2), n // 2
    picked = np.concatenate([g.choice(pool_pos, n_pos, replace=False),
                             g.choice(pool_neg, n_neg, replace=False)])  # fmt: skip
    labels = np.r_[np.ones(n_pos), -np.ones(n_neg)]
    order = g.permutation(n)
    picked, labels = picked[order], labels[order]
    k = 8 // patch
    cut = [img[r * patch:(r + 1) * patch, c * patch:(c + 1) * patch].ravel()
           for img in picked for r in range(k) for c in range(k)]  # fmt: skip
    X = normalize(np.array(cut).reshape(n, k * k, patch * patch) - centre)
    if positional:
        X = np.concatenate([X, np.broadcast_to(np.eye(k * k), (n, k * k, k * k))], -1)
        X = X / np.sqrt(2)
    means = X.mean(axis=1)
    head = LogisticRegression(fit_intercept=False, C=1e4, max_iter=10_000, tol=1e-10)
    v = head.fit(means, labels).coef_[0]
    return X, labels, normalize(means), v / np.linalg.norm(v)


def test_real_token_cells_regenerate_from_the_docs(tmp_path):
    """§9: the digits generator's examples, patch tokens (with and without positions),
    queries and fitted head, from the docs' recipe (scikit-learn's bundled digits)."""
    fixed = {"generator": "digits", "n": 6, "iterations": 4, "checkpoint_count": 2}
    grid = {"patch": [2, 4], "positional": [False, True]}
    sweep = write_sweep(tmp_path, "b8", fixed, grid, seeds=2)
    for patch in (2, 4):
        for positional in (False, True):
            for seed in range(2):
                cell = sweep.sel(patch=patch, positional=positional, seed=seed)
                X, Y, Z, v = digits(seed, 6, patch, positional)
                T, d = X.shape[1:]
                assert np.array_equal(cell["X"].values[:, :T, :d], X), (patch, positional)
                assert np.array_equal(cell["Y"].values, Y)
                assert np.array_equal(cell["Z"].values[:, :d], Z)
                assert np.array_equal(cell["v"].values[:d], v)
