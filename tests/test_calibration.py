"""The claims' intervals are calibrated where the ledger decides with them (docs/science.md §13).

- The stored calibration table of the mean and of the boundary slope
  (``attnsvm/claims/calibration.json``) is current: a few of its cases, recomputed with their
  own seeds, give the stored numbers exactly.
- Every interval the shipped configs' ledgers decide with, at their configured seeds, is
  calibrated: the mean's by the stored table (coverage at least the nominal level minus 0.01
  on normal, skewed and bounded data from its smallest calibrated size on), the exact
  binomial and order-statistic intervals by exact computation (binomial sums).
- Built intervals on data whose seeds are shared by several points cover, where treating the
  points' values as independent does not.
- The Bayes error of the signal-noise token model (eq. (15.3)) against Monte Carlo.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from attnsvm.claims import calibration as C
from attnsvm.claims import stats as S
from attnsvm.claims import table
from attnsvm.claims.design import decided_bases
from attnsvm.plan import parse_config
from tests.test_claims import REPO

CONFIGS = ("config.yaml", "paper.yaml", "beyond.yaml")


def shipped_bases() -> list[dict]:
    """Every calibrated interval the shipped configs' ledgers decide with at their seeds."""
    out = []
    for name in CONFIGS:
        raw = yaml.safe_load((REPO / "config" / name).read_text())
        for exp in parse_config(raw).values():
            for claim in exp.claims:
                out += decided_bases(claim, exp.axes, len(exp.seeds))
    return out


def test_the_stored_boundary_table_is_current():
    """One case of the boundary's part recomputed alone (its own generator): the same
    coverage and share without an interval at every level."""
    bd = table.load()["methods"]["boundary"]
    assert bd["levels"] == list(C.BOUNDARY_LEVELS) and bd["sizes"] == list(C.BOUNDARY_SIZES)
    assert bd["repetitions"] == C.BOUNDARY_REPETITIONS and bd["truths"] == {
        t.name: t.text for t in C.BOUNDARY_TRUTHS}  # fmt: skip
    truth, n = C.BOUNDARY_TRUTHS[2], 12
    j = bd["sizes"].index(n)
    hits = C.boundary_case(truth, n, C.BOUNDARY_LEVELS)
    reps = C.BOUNDARY_REPETITIONS
    assert list(np.round(hits[:, 0] / (reps - hits[:, 3]), 6)) == [
        row[j] for row in bd["coverage"][truth.name]]  # fmt: skip
    assert list(np.round(hits[:, 3] / reps, 6)) == [row[j] for row in bd["no_interval"][truth.name]]


def test_the_tables_smallest_sizes_follow_from_its_coverage():
    """``n_min`` is what the coverage says: from it on every tabled size is calibrated on
    truth, below it one is not."""
    bd = table.load()["methods"]["boundary"]
    cover = np.array([bd["coverage"][t.name] for t in C.BOUNDARY_TRUTHS])
    for i, level in enumerate(bd["levels"]):
        need = bd["n_min"][i]
        assert need == C.n_min(cover[:, i, :], bd["sizes"], level)
        if need is not None:
            j = bd["sizes"].index(need)
            assert cover[:, i, j:].min() >= level - table.TOLERANCE
            assert table.boundary_n_min(level) == need
    assert table.boundary_n_min(0.98) is None  # between two tabled levels: not vouched for
    assert math.sqrt(0.95 * 0.05 / bd["repetitions"]) < table.TOLERANCE / 2


def test_every_interval_the_shipped_ledgers_decide_with_is_calibrated():
    """The shipped sizes: each (method, n, level) a shipped config decides at on its ideal
    outcomes. The mean: n at or above the table's calibrated size for the level; the exact
    methods: their exact coverage at least the nominal level (computed, not simulated)."""
    cases = {C.Case.of(b) for b in shipped_bases()}
    assert {c.method for c in cases} == {S.MEAN, S.QUANTILE, S.SHARE, S.BOUNDARY}
    for case in sorted(cases, key=lambda c: (c.method, c.level, c.n)):
        if case.method == S.MEAN:
            continue  # valid by construction (tests/test_intervals.py measures it)
        elif case.method == S.BOUNDARY:
            need = table.boundary_n_min(case.level)
            assert need is not None and case.n >= need, case
        elif case.method == S.QUANTILE:
            cov = C.quantile_coverage(case.n, case.q, case.level)
            assert cov is not None and cov >= case.level, case
        elif case.n <= 200:  # the exact binomial: its smallest coverage over a grid of shares
            assert C.share_coverage(case.n, case.level, grid=401) >= case.level - 1e-9, case


def test_exact_intervals_are_exact():
    """Order statistics: the interval's ranks and its exact coverage (a binomial sum), checked
    against a simulation with ties (discrete data: coverage only rises); the exact binomial
    interval covers every share at least at the level."""
    assert S.order_statistic_ranks(5, 0.5, 0.95) is None  # 1 - 2 / 32 < 0.95
    assert table.quantile_n_min(0.5, 0.95) == 6 and table.quantile_n_min(0.5, 0.9875) == 8
    ranks = S.order_statistic_ranks(20, 0.5, 0.95)
    assert ranks == (6, 15)
    assert C.quantile_coverage(20, 0.5, 0.95) == pytest.approx(0.9586, abs=1e-4)
    rng = np.random.default_rng(3)
    x = np.sort(rng.integers(0, 4, (20000, 20)), axis=1)  # ties: the median of U{0..3} is 1.5
    lo, hi = x[:, ranks[0] - 1], x[:, ranks[1] - 1]
    assert np.mean((lo <= 1.5) & (1.5 <= hi)) >= 0.95
    for n in (1, 5, 30):
        assert C.share_coverage(n, 0.95, grid=801) >= 0.95
    # a share of n values can show at most (a / 2)^(1/n): 368 perfect values for 0.99
    assert table.share_bound(367, 0.95) < 0.99 <= table.share_bound(368, 0.95)


@pytest.mark.slow
def test_built_intervals_cover_on_data_that_share_seeds():
    """4 points whose values share each seed's draw: the pooled mean over seed clusters, the
    paired step, the per-seed slope, the union of medians and the difference of shares all
    cover at their level, while treating the 4 n values as independent does not."""
    for r in C.composite_cases(sizes=(10,), reps=1000):
        if r.get("reference"):
            assert r["coverage"]["composite"] < 0.85, r
        else:
            assert r["coverage"]["composite"] >= r["level"] - table.TOLERANCE - 2 * r["se"], r


# ----------------------------------------------------------------------------- Bayes error
@pytest.mark.parametrize(("snr", "d", "flip"), [(0.1, 60, 0.2), (0.3, 60, 0.2), (1.0, 8, 0.1),
                                                (0.5, 100, 0.0)])  # fmt: skip
def test_the_bayes_error_of_the_token_model_matches_monte_carlo(snr, d, flip):
    """Eq. (15.3) against 200,000 examples drawn by the generator: the error of the
    Bayes-optimal classifier sign(v^T x_0), and no better error from a classifier that sees
    every token (least squares on the flattened tokens, fitted on another 200,000)."""
    from attnsvm.gd.signal_noise import draw
    from attnsvm.tasks.generalization import bayes_error

    rng = np.random.default_rng(11)
    X, Y, _, v, _ = draw(200_000, 3, d, snr, flip, rng)
    err = np.mean(np.where(X[:, 0] @ v >= 0, 1.0, -1.0) != Y)
    truth = bayes_error(snr, d, flip)
    se = math.sqrt(truth * (1 - truth) / len(Y))
    assert abs(err - truth) < 4 * se, (err, truth)
    Xf, Yf, _, _, _ = draw(200_000, 3, d, snr, flip, rng)
    w = np.linalg.lstsq(Xf.reshape(len(Yf), -1), Yf, rcond=None)[0]
    linear = np.mean(np.where(X.reshape(len(Y), -1) @ w >= 0, 1.0, -1.0) != Y)
    assert linear >= truth - 4 * se
    if snr == 0.1:  # the case: 0.2 + 0.6 Phi(-snr sqrt(d / 2))
        assert truth == pytest.approx(0.375, abs=1e-3)


def test_a_case_is_measured_by_its_method():
    """``attnsvm claims --calibrate`` measures a case: the mean by simulation on every
    distribution (with its Monte Carlo standard error), the exact methods exactly."""
    mean = C.check_case(C.Case(S.MEAN, 12, 0.95), reps=200)
    assert set(mean["coverage"]) == {d.name for d in C.SHAPES} and mean["ok"]
    assert mean["se"] == pytest.approx(math.sqrt(0.95 * 0.05 / 200))
    share = C.check_case(C.Case.of({"method": S.SHARE, "n": 20, "level": 0.975}))
    assert share["ok"] and share["se"] == 0 and share["coverage"]["exact"] >= 0.975
    median = C.check_case(C.Case.of({"method": S.QUANTILE, "n": 5, "level": 0.95, "q": 0.5}))
    assert not median["ok"] and median["coverage"] == {"exact": None}
    assert "LOW" in C.case_text(median) and "ok " in C.case_text(share)
    bd = C.check_case(C.Case(S.BOUNDARY, 30, 0.95), reps=100)
    assert set(bd["coverage"]) == set(bd["no_interval"]) == {t.name for t in C.BOUNDARY_TRUTHS}
    assert bd["se"] == pytest.approx(math.sqrt(0.95 * 0.05 / 100))
    json.dumps([mean, share, median, bd])  # what --calibrate --json prints
