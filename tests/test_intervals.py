"""The public intervals of the claims (docs/claims.md, "Intervals"; docs/science.md §13).

``attnsvm.claims.mean_interval`` covers at least its level on the shapes that break
asymptotic methods (two-point, few-valued, a 10% and a 25% minority of seeds elsewhere,
values piled at an edge, and the bootstrap's three), on [0, 1] and [-1, 1], at 4 to 50
values and at the levels the ledger decides at; it never leaves the range and is
deterministic. Its capital is the paper's, recomputed by a plain loop.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnsvm.claims import calibration as C
from attnsvm.claims import mean_interval, median_interval, share_interval
from attnsvm.claims import stats as S

#: the ledger's levels: 0.95 and its Bonferroni levels over 2, 4 and 16 tests
LEVELS = (0.95, 0.975, 0.9875, 1 - 0.05 / 16)
SIZES = (4, 5, 6, 8, 10, 15, 20, 30, 50)
REPS = 300  # the betting interval covers far above its level: 300 resolve a shortfall


@pytest.mark.parametrize(("lower", "upper"), [(0.0, 1.0), (-1.0, 1.0)])
def test_the_mean_interval_covers_every_hard_shape(lower, upper):
    worst = {}
    for dist in C.SHAPES:
        for n in SIZES:
            hits = C.mean_case(dist, n, LEVELS, REPS, lower, upper)
            assert not hits[:, 3].any(), (dist.name, n)  # never outside the range
            for level, h in zip(LEVELS, hits, strict=True):
                cov = h[0] / REPS
                worst[(dist.name, level)] = min(worst.get((dist.name, level), 1.0), cov)
                assert cov >= level - 0.01, (dist.name, n, level, cov)
    assert min(worst.values()) >= 0.94


def test_the_public_intervals():
    x = [0.977, 0.999, 0.998, 0.9985, 0.9979, 0.9991, 0.9988, 0.9983]
    a = mean_interval(x, 0.95, -1.0, 1.0)
    assert a == mean_interval(x, 0.95, -1.0, 1.0)  # deterministic
    assert -1.0 <= a[0] <= np.mean(x) <= a[1] <= 1.0
    assert mean_interval([0.2], 0.95, 0, 1)[0] >= 0 and mean_interval([], 0.95, 0, 1) is None
    assert mean_interval(x, 0.95, -math.inf, 1.0) is None  # no finite range: no interval
    with pytest.raises(ValueError, match="outside the range"):
        mean_interval([1.5], 0.95, 0, 1)
    # nested in the level: a higher level never gives a narrower interval
    b = mean_interval(x, 0.99, -1.0, 1.0)
    assert b[0] <= a[0] and a[1] <= b[1]
    assert median_interval(list(range(5)), 0.95) is None  # 1 - 2 / 32 < 0.95
    assert median_interval(list(range(20)), 0.95) == (5.0, 14.0)
    lo, hi = share_interval(10, 10, 0.95)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** (1 / 10))


def _capital_loop(x, m, up):
    """The hedged capital's one side, written from the paper (arXiv 2010.09686, §5): the
    average over the constant bets of prod (1 + lambda (x_i - m)), lambda = f / m, or
    prod (1 - lambda (x_i - m)), lambda = f / (1 - m)."""
    total = 0.0
    for f in S.BET_FRACTIONS:
        k = 1.0
        for xi in x:
            k *= 1 + f / m * (xi - m) if up else 1 - f / (1 - m) * (xi - m)
        total += k
    return total / len(S.BET_FRACTIONS)


def test_the_capital_is_the_papers_and_decides_the_interval():
    rng = np.random.default_rng(5)
    x = rng.beta(2.0, 5.0, 12)
    lo, hi = S.betting_bounds(x, 0.95)
    for m, up in ((0.2, True), (0.45, False), (0.05, True)):
        assert math.log(_capital_loop(x, m, up)) == pytest.approx(
            float(S._log_capital(x, np.asarray(m), up)), rel=1e-12)  # fmt: skip
    # the ends: the capital reaches 2 / alpha just outside, not inside
    crit = 2 / 0.05
    assert _capital_loop(x, lo - 1e-6, True) >= crit > _capital_loop(x, lo + 1e-6, True)
    assert _capital_loop(x, hi + 1e-6, False) >= crit > _capital_loop(x, hi - 1e-6, False)


def test_the_p_value_is_monotone_in_the_evidence():
    """Values further below a threshold never give a larger p-value of 'the mean is below'
    (fail_p of a claim 'mean >= t' that FAILs), and the p-value is the level at which the
    interval's end reaches the threshold."""
    rng = np.random.default_rng(7)
    x = 0.3 + 0.05 * rng.random(30)
    ps = [S.betting_p(x - d, 0.5, up=False) for d in (0.0, 0.01, 0.05, 0.1)]
    assert ps == sorted(ps, reverse=True) and ps[-1] < ps[0] < 0.05
    p = ps[0]
    assert S.betting_bounds(x, 1 - p * 1.001)[1] < 0.5 <= S.betting_bounds(x, 1 - p * 0.999)[1]
