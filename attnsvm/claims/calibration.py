"""Coverage of the claims' interval methods, measured on known truths (docs/science.md §13).

``attnsvm claims --calibrate`` prints, for every (method, number of values, level) a
config's ledger decides at, the coverage of that interval: simulated for the mean (the
betting interval, valid for every distribution on its range by construction; measured on the
shapes that break asymptotic methods: :data:`SHAPES`), exact for the order-statistic and
exact binomial intervals (binomial sums), and from the stored table for the boundary slope
(:func:`build_boundary_table`, ``attnsvm/claims/calibration.json``, read by
:mod:`attnsvm.claims.table`; ``--write`` regenerates it). :func:`composite_cases` adds the
built intervals (a pooled mean over points that share seeds, a paired step, a slope, unions
and differences of exact intervals) on data built to share seeds, with a t interval that
treats the points as independent for comparison.

Every simulation is seeded per case (:func:`case_rng`), so a case gives the same numbers
alone or within the whole table. Monte Carlo precision: R repetitions per case give a
standard error of ``sqrt(c (1 - c) / R)``, printed with each case. A case without an
interval (or with an infinite end) never counts as covering.
"""

from __future__ import annotations

import functools
import json
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats

from attnsvm.atomic import write_text_atomic
from attnsvm.claims import boundary as BD
from attnsvm.claims import stats as S
from attnsvm.claims import table

TABLE_FORMAT = "attnsvm-calibration-2"
#: repetitions per case of the mean: standard error 0.0069 at coverage 0.95
REPETITIONS = 1000
#: the root of every case's generator
SEED = 20261129
#: the Bonferroni divisors of the levels the ledger decides at: 1 - (1 - 0.95) / k
DIVISORS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64)
#: those levels
LEVELS = tuple(round(1.0 - 0.05 / k, 12) for k in DIVISORS)

Draw = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


@dataclass(frozen=True)
class Distribution:
    """A known truth on [0, 1]: how to draw values and their exact mean."""

    name: str
    text: str
    draw: Draw
    mean: float


def _two_point(p: float) -> Draw:
    return lambda r, s: (r.random(s) < p).astype(float)


def _minority(share: float) -> Draw:
    """Most seeds at 0.99925 (a correlation of 0.9985 on [-1, 1]), a minority at 0.98 (0.96),
    each +- a uniform 0.00025: the pattern of the stored E2 W runs, §13."""

    def draw(r, s):
        base = np.where(r.random(s) < share, 0.98, 0.99925)
        return base + 0.00025 * (2.0 * r.random(s) - 1.0)

    return draw


#: the data the mean's interval is checked on (docs/science.md §13): the three shapes of the
#: bootstrap's calibration, on [0, 1], and those that break asymptotic methods
SHAPES = (
    Distribution("normal", "0.5 + 0.1 N(0, 1) clipped to [0, 1]",
                 lambda r, s: np.clip(0.5 + 0.1 * r.standard_normal(s), 0.0, 1.0), 0.5),
    Distribution("exponential", "min(Exp(1) / 10, 1), skewed",
                 lambda r, s: np.minimum(r.exponential(0.1, s), 1.0),
                 0.1 * (1.0 - math.exp(-10.0))),
    Distribution("beta", "Beta(0.5, 2), skewness 1.25", lambda r, s: r.beta(0.5, 2.0, s), 0.2),
    Distribution("two-point", "0 or 1 with probability 1/2", _two_point(0.5), 0.5),
    Distribution("two-point-rare", "1 with probability 0.05, else 0", _two_point(0.05), 0.05),
    Distribution("few-valued", "0.2, 0.5 or 0.9 with probabilities 0.3, 0.5, 0.2",
                 lambda r, s: np.choose(np.searchsorted([0.3, 0.8], r.random(s), side="right"),
                                        [0.2, 0.5, 0.9]),
                 0.3 * 0.2 + 0.5 * 0.5 + 0.2 * 0.9),
    Distribution("minority-10", "90% at 0.99925, 10% at 0.98 (+- 0.00025)", _minority(0.1),
                 0.9 * 0.99925 + 0.1 * 0.98),
    Distribution("minority-25", "75% at 0.99925, 25% at 0.98 (+- 0.00025)", _minority(0.25),
                 0.75 * 0.99925 + 0.25 * 0.98),
    Distribution("edge", "1 - Exp(mean 0.002): piled at the upper end",
                 lambda r, s: 1.0 - r.exponential(0.002, s), 1.0 - 0.002),
)  # fmt: skip


def case_rng(*parts: Any) -> np.random.Generator:
    """The generator of one case (its names hashed, independent of the other cases)."""
    return np.random.default_rng(S.seed_of(str(SEED), *map(str, parts)))


# --------------------------------------------------------------------------- the mean
def mean_hits(
    x: np.ndarray, truth: float, levels: Sequence[float], lower: float = 0.0, upper: float = 1.0
) -> np.ndarray:
    """Per level: [covered, missed below (lo > truth), missed above (hi < truth), left the
    range] of the betting intervals (:func:`attnsvm.claims.stats.mean_interval`) of the rows
    of ``x`` on ``[lower, upper]`` (counts). The interval holds the truth exactly when
    neither capital at the truth reaches ``2 / (1 - level)`` (its ends are the crossings,
    rounded outwards), so coverage needs no search for the ends; the ends of the first rows
    are computed to check that they stay in the range."""
    out = np.zeros((len(levels), 4), dtype=np.int64)
    z = (np.asarray(x, dtype=float) - lower) / (upper - lower)
    m = np.full(len(z), (truth - lower) / (upper - lower))
    up, down = S._log_capital(z, m, True), S._log_capital(z, m, False)
    lo, hi = S.betting_bounds(z[:20], 0.95)
    left = int(((lo < 0) | (hi > 1) | (lo > hi) | ~np.isfinite(lo) | ~np.isfinite(hi)).sum())
    for i, level in enumerate(levels):
        crit = math.log(2.0 / (1.0 - level))
        below, above = up >= crit, down >= crit
        out[i] = [int((~below & ~above).sum()), int(below.sum()), int(above.sum()), left]
    return out


def mean_case(dist: Distribution, n: int, levels: Sequence[float], reps: int = REPETITIONS,
              lower: float = 0.0, upper: float = 1.0) -> np.ndarray:  # fmt: skip
    """Coverage counts of the mean's interval on ``reps`` samples of n values of ``dist``
    mapped to ``[lower, upper]`` at every level (:func:`mean_hits`)."""
    rng = case_rng("mean", dist.name, n)
    x = lower + (upper - lower) * dist.draw(rng, (reps, n))
    truth = lower + (upper - lower) * dist.mean
    return mean_hits(x, truth, levels, lower, upper)


def n_min(coverage: np.ndarray, sizes: Sequence[int], level: float) -> int | None:
    """The smallest size from which every larger tabled size is calibrated at ``level``
    (``coverage``: (truths, sizes))."""
    ok = np.all(coverage >= level - table.TOLERANCE, axis=0)
    if not ok[-1]:
        return None
    bad = np.flatnonzero(~ok)
    return int(sizes[bad[-1] + 1]) if len(bad) else int(sizes[0])


def build_table(progress: Callable | None = None) -> dict[str, Any]:
    """The calibration table (module docstring): the boundary's."""
    return {
        "format": TABLE_FORMAT,
        "tolerance": table.TOLERANCE,
        "methods": {"boundary": build_boundary_table(progress=progress)},
    }


def _rounded(a: np.ndarray) -> list:
    return np.round(a, 6).tolist()


def write_table(doc: dict[str, Any], path: str | Path | None = None) -> Path:
    """Write the table (default: the stored one) and forget the cached one."""
    out = write_text_atomic(path or table.TABLE_PATH, json.dumps(doc, indent=1) + "\n")
    table.load.cache_clear()
    return out


# --------------------------------------------------------------------------- the boundary
#: the boundary's design (docs/science.md §15, eq. (15.14)): b18_magen's grid, n = 10 ... 80
#: and the SNR from 0.05 by steps of sqrt(2), level 0.15, a true boundary 0.4 (n / 10)^(-1/2)
BOUNDARY_ALONG = (10.0, 20.0, 40.0, 80.0)
BOUNDARY_ACROSS = tuple(0.05 * math.sqrt(2.0) ** k for k in range(11))
BOUNDARY_LEVEL = 0.15
BOUNDARY_SLOPE = -0.5
#: the boundary's sizes (seeds) and levels: its percentile interval at a tail of (1 - L) / 2
#: keeps at least 10 of :data:`attnsvm.claims.boundary.BOOTSTRAP` resamples beyond it
BOUNDARY_SIZES = (10, 12, 15, 20, 30, 40, 60)
BOUNDARY_LEVELS = (0.95, 0.975, 0.99)
#: repetitions per boundary case: standard error 0.0049 at coverage 0.95
BOUNDARY_REPETITIONS = 2000
#: the spread of a seed's offset (shared by its cells at every grid point) and of a cell
BOUNDARY_SEED_SD, BOUNDARY_CELL_SD = 0.02, 0.05


def _centred_exponential(r: np.random.Generator, shape) -> np.ndarray:
    return r.exponential(1.0, shape) - 1.0  # mean 0, sd 1, skewness 2


@dataclass(frozen=True)
class BoundaryTruth:
    """A known boundary: the mean curve through the level at ``c*`` (as a function of
    ``log(c / c*)``) and the noise that the seeds and cells add (standardized draws)."""

    name: str
    text: str
    curve: Callable[[np.ndarray], np.ndarray]
    noise: Draw


#: the curves and noises the boundary's interval is calibrated on
BOUNDARY_TRUTHS = (
    BoundaryTruth("log-linear", "0.15 - 0.05 log(c / c*), normal noise",
                  lambda u: BOUNDARY_LEVEL - 0.05 * u, lambda r, s: r.standard_normal(s)),
    BoundaryTruth("log-linear-skewed", "0.15 - 0.05 log(c / c*), Exp(1) - 1 noise (skewness 2)",
                  lambda u: BOUNDARY_LEVEL - 0.05 * u, _centred_exponential),
    BoundaryTruth("logistic", "0.3 / (1 + (c / c*)^2), normal noise",
                  lambda u: 2 * BOUNDARY_LEVEL / (1.0 + np.exp(2.0 * u)),
                  lambda r, s: r.standard_normal(s)),
)  # fmt: skip


@functools.cache
def boundary_curve(truth: BoundaryTruth) -> np.ndarray:
    """The mean value (along, across) of ``truth`` on the design's grid."""
    along, across = np.array(BOUNDARY_ALONG), np.array(BOUNDARY_ACROSS)
    star = 0.4 * (along / along[0]) ** BOUNDARY_SLOPE
    return truth.curve(np.log(across[None, :] / star[:, None]))


def boundary_values(truth: BoundaryTruth, seeds: int, rng: np.random.Generator) -> np.ndarray:
    """One replicate's per-cell values (seeds, along, across) of ``truth``: the curve, a
    seed's offset shared by its cells, and each cell's own noise."""
    mean = boundary_curve(truth)
    shared = BOUNDARY_SEED_SD * truth.noise(rng, (seeds, 1, 1))
    return mean[None] + shared + BOUNDARY_CELL_SD * truth.noise(rng, (seeds, *mean.shape))


def boundary_case(truth: BoundaryTruth, n: int, levels: Sequence[float],
                  reps: int = BOUNDARY_REPETITIONS) -> np.ndarray:  # fmt: skip
    """Per level: [covered, missed below, missed above, no interval] of the boundary slope's
    interval (:func:`attnsvm.claims.boundary.boundary_fit`, the ledger's own) on ``reps``
    replicates of n seeds of ``truth`` (counts)."""
    rng = case_rng("boundary", truth.name, n)
    out = np.zeros((len(levels), 4), dtype=np.int64)
    along, across = np.array(BOUNDARY_ALONG), np.array(BOUNDARY_ACROSS)
    for _ in range(reps):
        values = boundary_values(truth, n, rng)
        seed = int(rng.integers(0, 2**63))
        _, slopes = BD.bootstrap(along, across, values, BOUNDARY_LEVEL, True, seed)
        for i, level in enumerate(levels):
            lo, hi = BD.slope_interval(slopes, level, n)
            if math.isnan(lo):  # no interval: the ledger says INCONCLUSIVE
                out[i, 3] += 1
            elif lo > BOUNDARY_SLOPE:
                out[i, 1] += 1
            elif hi < BOUNDARY_SLOPE:
                out[i, 2] += 1
            else:
                out[i, 0] += 1
    return out


def build_boundary_table(sizes: Sequence[int] = BOUNDARY_SIZES,
                         reps: int = BOUNDARY_REPETITIONS,
                         progress: Callable | None = None) -> dict[str, Any]:  # fmt: skip
    """The boundary's part of the calibration table: per truth, level and size the coverage
    among the replicates with an interval, and the share without one."""
    levels = list(BOUNDARY_LEVELS)
    cover = np.zeros((len(BOUNDARY_TRUTHS), len(levels), len(sizes)))
    none = np.zeros_like(cover)
    for j, n in enumerate(sizes):
        for t, truth in enumerate(BOUNDARY_TRUTHS):
            t0 = time.perf_counter()
            hits = boundary_case(truth, n, levels, reps)
            cover[t, :, j] = hits[:, 0] / np.maximum(reps - hits[:, 3], 1)
            none[t, :, j] = hits[:, 3] / reps
            if progress:
                progress(f"boundary n={n} {truth.name}: {time.perf_counter() - t0:.1f} s")
    return {
        "method": S.BOUNDARY,
        "resamples": BD.BOOTSTRAP,
        "repetitions": reps,
        "seed": SEED,
        "design": {"along": list(BOUNDARY_ALONG), "across": list(BOUNDARY_ACROSS),
                   "level": BOUNDARY_LEVEL, "slope": BOUNDARY_SLOPE,
                   "seed_sd": BOUNDARY_SEED_SD, "cell_sd": BOUNDARY_CELL_SD},
        "truths": {t.name: t.text for t in BOUNDARY_TRUTHS},
        "levels": levels,
        "sizes": list(sizes),
        "coverage": {t.name: _rounded(cover[i]) for i, t in enumerate(BOUNDARY_TRUTHS)},
        "no_interval": {t.name: _rounded(none[i]) for i, t in enumerate(BOUNDARY_TRUTHS)},
        "n_min": [n_min(cover[:, i, :], sizes, lv) for i, lv in enumerate(levels)],
    }  # fmt: skip


# --------------------------------------------------------------------------- exact methods
def share_coverage(n: int, level: float, grid: int = 2001) -> float:
    """The exact binomial interval's smallest coverage over true shares on a grid of
    ``grid`` values in (0, 1): ``min_p sum_k P(Bin(n, p) = k) [p in CI(k)]``."""
    ks = np.arange(n + 1)
    ci = np.array([
        (S.binomial_interval(int(k), n, level).lo, S.binomial_interval(int(k), n, level).hi)
        for k in ks
    ])  # fmt: skip
    p = np.linspace(0.0, 1.0, grid + 2)[1:-1]
    inside = (ci[:, 0][:, None] <= p) & (p <= ci[:, 1][:, None])  # (k, p)
    pmf = stats.binom.pmf(ks[:, None], n, p)
    return float((pmf * inside).sum(axis=0).min())


def quantile_coverage(n: int, q: float, level: float) -> float | None:
    """Exact coverage of the order-statistic interval for continuous data (None: no
    interval at this size and level)."""
    ranks = S.order_statistic_ranks(n, q, level)
    return None if ranks is None else S.order_statistic_coverage(n, q, ranks)


# --------------------------------------------------------------------------- cases
@dataclass(frozen=True)
class Case:
    """One (method, number of values, level) the ledger decides at; ``q`` for a quantile."""

    method: str
    n: int
    level: float
    q: float | None = None

    @classmethod
    def of(cls, basis: dict) -> Case:
        return cls(basis["method"], int(basis["n"]), round(float(basis["level"]), 12),
                   basis.get("q"))  # fmt: skip


def check_case(case: Case, reps: int | None = None) -> dict[str, Any]:
    """The coverage of one case (exact, or simulated for the mean and the boundary: ``reps``
    repetitions, by default the table's), the nominal level, the Monte Carlo standard error
    and whether it is calibrated. A boundary's coverage counts the replicates that have an
    interval (the others are INCONCLUSIVE in the ledger; ``no_interval`` gives their share)."""
    if reps is None:
        reps = BOUNDARY_REPETITIONS if case.method == S.BOUNDARY else REPETITIONS
    out: dict[str, Any] = {"method": case.method, "n": case.n, "level": case.level}
    floor = case.level - table.TOLERANCE
    if case.method == S.SHARE:
        cov = share_coverage(case.n, case.level)
        out.update(coverage={"exact": cov}, se=0.0, ok=bool(cov >= floor))
    elif case.method == S.QUANTILE:
        cov = quantile_coverage(case.n, case.q if case.q is not None else 0.5, case.level)
        out.update(q=case.q, coverage={"exact": cov}, se=0.0,
                   ok=bool(cov is not None and cov >= floor))  # fmt: skip
    elif case.method == S.BOUNDARY:
        covs, none = {}, {}
        for truth in BOUNDARY_TRUTHS:
            hits = boundary_case(truth, case.n, [case.level], reps)[0]
            covs[truth.name] = float(hits[0] / max(reps - hits[3], 1))
            none[truth.name] = float(hits[3] / reps)
        se = math.sqrt(case.level * (1 - case.level) / reps)
        out.update(coverage=covs, no_interval=none, se=se, repetitions=reps,
                   ok=bool(all(c >= floor for c in covs.values())))  # fmt: skip
    else:
        covs, left = {}, 0
        for dist in SHAPES:
            hits = mean_case(dist, case.n, [case.level], reps)[0]
            covs[dist.name] = float(hits[0] / reps)
            left += int(hits[3])
        se = math.sqrt(case.level * (1 - case.level) / reps)
        ok = bool(all(c >= floor for c in covs.values()) and not left)
        out.update(coverage=covs, se=se, repetitions=reps, left_range=left, ok=ok)
    return out


def composite_cases(sizes: Iterable[int] = (5, 10, 20), reps: int = 1000) -> list[dict]:
    """Coverage of the built intervals on data built to share seeds (module docstring): P =
    4 points whose values share each seed's draw ``z_s`` (Beta(0.5, 2)) plus independent
    noise (uniform on +- 0.1), on the range [-0.1, 1.1], at the level 0.95."""
    out = []
    level, P, lower, upper = 0.95, 4, -0.1, 1.1
    for n in sizes:
        rng = case_rng("composite", n)
        z = rng.beta(0.5, 2.0, (reps, 1, n))
        x = z + 0.1 * (2.0 * rng.random((reps, P, n)) - 1.0)  # (reps, points, seeds)
        truth = 0.2  # every point's mean, and their average
        clustered = x.mean(axis=1)  # each seed's average over the points
        hits = mean_hits(clustered, truth, [level], lower, upper)[0]
        out.append(_composite("pooled mean, seeds as clusters", n, level, hits[0] / reps, reps))
        naive = _stratified_naive(x, truth, level)
        before = _composite("pooled mean, points as independent values (reference: what "
                            "ignoring shared seeds gives)", n, level, naive, reps)  # fmt: skip
        out.append({**before, "ok": True, "reference": True})
        step = x[:, 1] + 0.05 - x[:, 0]  # a step of 0.05 between two points, paired by seed
        hits = mean_hits(step, 0.05, [level], lower - upper + 0.05, upper - lower + 0.05)[0]
        out.append(_composite("step of means, paired by seed", n, level, hits[0] / reps, reps))
        xs = np.array([0.0, 1.0, 2.0, 3.0])
        w = S.ols_weights(xs)
        y = x + 0.02 * xs[None, :, None]
        slopes = np.einsum("p,rps->rs", w, y)
        ylo, yhi = lower, upper + 0.06
        lo = float(np.sum(np.where(w > 0, w * ylo, w * yhi)))
        hi = float(np.sum(np.where(w > 0, w * yhi, w * ylo)))
        hits = mean_hits(slopes, 0.02, [level], lo, hi)[0]
        out.append(_composite("slope of means, per-seed slopes", n, level, hits[0] / reps, reps))
        if S.order_statistic_ranks(n, 0.5, S.bonferroni(level, P)) is not None:
            out.append(_composite("pooled median, union of 4 points", n, level,
                                  _union_median(x, level), reps))  # fmt: skip
        out.append(_composite("step of shares, difference of exact intervals", n, level,
                              _share_step(rng, n, level, reps), reps))  # fmt: skip
    return out


def _composite(name: str, n: int, level: float, coverage: float, reps: int) -> dict:
    se = math.sqrt(level * (1 - level) / reps)
    return {"method": name, "n": n, "level": level, "coverage": {"composite": float(coverage)},
            "se": se, "repetitions": reps,
            "ok": bool(coverage >= level - table.TOLERANCE)}  # fmt: skip


def _stratified_naive(x: np.ndarray, truth: float, level: float) -> float:
    """Coverage of a t interval that treats the P n values as independent (what the ledger
    did before: strata per point, the seeds shared across them ignored)."""
    reps, P, n = x.shape
    flat = x.reshape(reps, P * n)
    m, s = flat.mean(axis=1), flat.std(axis=1, ddof=1) / math.sqrt(P * n)
    tq = stats.t.ppf(0.5 + level / 2, P * n - 1)
    return float(np.mean(np.abs(m - truth) <= tq * s))


def _union_median(x: np.ndarray, level: float) -> float:
    reps, P, n = x.shape
    ranks = S.order_statistic_ranks(n, 0.5, S.bonferroni(level, P))
    xs = np.sort(x, axis=2)
    lo = xs[:, :, ranks[0] - 1].min(axis=1)
    hi = xs[:, :, ranks[1] - 1].max(axis=1)
    truth = _median_truth()  # the median of Beta(0.5, 2) + U(-0.1, 0.1)
    return float(np.mean((lo <= truth) & (truth <= hi)))


@functools.cache
def _median_truth() -> float:
    """The median of Beta(0.5, 2) + U(-0.1, 0.1), by a large fixed sample."""
    rng = case_rng("median-truth")
    m = 4_000_000
    return float(np.median(rng.beta(0.5, 2.0, m) + 0.1 * (2.0 * rng.random(m) - 1.0)))


def _share_step(rng, n: int, level: float, reps: int) -> float:
    """Two shares 0.3 and 0.6 observed on the same seeds (a latent uniform per seed)."""
    u = rng.random((reps, n))
    a, b = (u < 0.3).sum(axis=1), (u < 0.6).sum(axis=1)
    each = S.bonferroni(level, 2)
    hits = 0
    for ka, kb in zip(a, b, strict=True):
        ia, ib = S.binomial_interval(int(ka), n, each), S.binomial_interval(int(kb), n, each)
        iv = S.difference(ia, ib, 1.0, level, (kb - ka) / n)
        hits += iv.lo <= 0.3 <= iv.hi
    return hits / reps


# --------------------------------------------------------------------------- the report
def table_summary() -> list[str]:
    """Lines of the stored table (the boundary's): per level, the smallest calibrated number
    of seeds and the lowest coverage from there on; and what the mean's rests on."""
    lines = [
        f"mean ({S.MEAN}): valid for every distribution on the variable's range by "
        f"construction; each case simulated on {len(SHAPES)} shapes: "
        + "; ".join(f"{d.name} {d.text}" for d in SHAPES)
    ]
    bd = table.load()["methods"]["boundary"]
    along = ", ".join(f"{a:g}" for a in bd["design"]["along"])
    lines.append(
        f"boundary slope ({bd['method']}, {bd['resamples']} resamples): {bd['repetitions']} "
        f"repetitions per case on b18_magen's grid (n {along}; "
        f"{len(bd['design']['across'])} SNRs), truths " + "; ".join(bd["truths"].values())
    )
    for i, level in enumerate(bd["levels"]):
        need = bd["n_min"][i]
        if need is None:
            lines.append(f"  level {level:.6g}: not calibrated at any tabled number of seeds")
            continue
        j = bd["sizes"].index(need)
        worst = min(min(c[i][j:]) for c in bd["coverage"].values())
        floor = level - table.TOLERANCE
        lines.append(f"  level {level:.6g}: calibrated from {need} seeds (lowest coverage "
                     f"from there on {worst:.4f}, floor {floor:.4f})")  # fmt: skip
    return lines


def case_text(r: dict) -> str:
    cov = ", ".join(f"{k} {'-' if v is None else f'{v:.4f}'}" for k, v in r["coverage"].items())
    q = f" q={r['q']}" if r.get("q") not in (None, 0.5) else ""
    se = f" (se {r['se']:.4f})" if r.get("se") else " (exact)"
    flag = "ref" if r.get("reference") else "ok " if r["ok"] else "LOW"
    return (f"{flag} {r['method']}{q}, n={r['n']}, level {r['level']:.6g}: coverage {cov}"
            f"{se}; floor {r['level'] - table.TOLERANCE:.4f}")  # fmt: skip
