"""Coverage of the claims' interval methods, measured on known truths (docs/science.md §13).

``attnsvm claims --calibrate`` prints, for every (method, number of values, level) a
config's ledger decides at, the coverage of that interval: simulated for the mean (the
studentized bootstrap, on normal, skewed and bounded data: :data:`DISTRIBUTIONS`), exact for
the order-statistic and exact binomial intervals (binomial sums). ``--write`` regenerates the
stored table of the mean (:func:`build_table`, ``attnsvm/claims/calibration.json``, read by
:mod:`attnsvm.claims.table`), from which the ledger decides where the mean's interval is
calibrated. :func:`composite_cases` adds the built intervals (a pooled mean over points that
share seeds, a paired step, a slope, unions and differences of exact intervals) on data built
to share seeds, with the stratified bootstrap the ledger used before for comparison.

Every simulation is seeded per case (:func:`case_rng`), so a case gives the same numbers
alone or within the whole table: a test recomputes a few cases of the stored table and
compares them exactly. Monte Carlo precision: :data:`REPETITIONS` repetitions per case give
a standard error of ``sqrt(c (1 - c) / R)``, 0.0034 at c = 0.95 (R = 4000), printed with
each case.
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

TABLE_FORMAT = "attnsvm-calibration-1"
#: repetitions per case: standard error 0.0034 at coverage 0.95
REPETITIONS = 4000
#: repetitions that share one set of resamples (a fresh set per chunk)
CHUNK = 200
#: the root of every case's generator
SEED = 20261129
#: the Bonferroni divisors of the table's levels: 1 - (1 - 0.95) / k
DIVISORS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64)
#: the table's levels
LEVELS = tuple(round(1.0 - 0.05 / k, 12) for k in DIVISORS)
#: the table's numbers of values
SIZES = (*range(3, 41), 44, 48, 56, 64, 80, 96, 128, 160, 200)

Draw = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


@dataclass(frozen=True)
class Distribution:
    """A known truth: how to draw values and their mean."""

    name: str
    text: str
    draw: Draw
    mean: float


#: the data the mean's interval is calibrated on: normal, skewed and bounded
DISTRIBUTIONS = (
    Distribution("normal", "N(0, 1)", lambda r, s: r.standard_normal(s), 0.0),
    Distribution("exponential", "Exp(1), skewness 2", lambda r, s: r.exponential(1.0, s), 1.0),
    Distribution(
        "beta", "Beta(0.5, 2), bounded, skewness 1.25", lambda r, s: r.beta(0.5, 2.0, s), 0.2
    ),  # fmt: skip
)


def case_rng(*parts: Any) -> np.random.Generator:
    """The generator of one case (its names hashed, independent of the other cases)."""
    return np.random.default_rng(S.seed_of(str(SEED), *map(str, parts)))


# --------------------------------------------------------------------------- the mean
def resample_counts(rng: np.random.Generator, n: int, B: int = S.N_RESAMPLES) -> np.ndarray:
    """B resamples of n values with replacement, as counts (B, n) of each value."""
    idx = rng.integers(0, n, size=(B, n)) + n * np.arange(B)[:, None]
    return np.bincount(idx.ravel(), minlength=B * n).reshape(B, n).astype(float)


def mean_hits(
    x: np.ndarray, truth: float, levels: Sequence[float], rng: np.random.Generator
) -> np.ndarray:
    """Per level: [covered, missed below (lo > truth), missed above (hi < truth)] of the
    studentized bootstrap intervals of the rows of ``x`` (counts; -1 where the level is
    beyond the resamples). Rows of a chunk of :data:`CHUNK` share one set of resamples,
    applied as a matrix product (the ledger draws each interval's own)."""
    out = np.zeros((len(levels), 3), dtype=np.int64)
    B = S.N_RESAMPLES
    ranks = [S.tail_rank(B, level) for level in levels]
    kth = sorted({k for j in ranks if j is not None for k in (j - 1, B - j)})
    n = x.shape[1]
    for start in range(0, len(x), CHUNK):
        xs = x[start : start + CHUNK]
        counts = resample_counts(rng, n)
        xc = xs - xs.mean(axis=1, keepdims=True)
        t = S.studentized(xc @ counts.T / n, (xc * xc) @ counts.T / n, n)
        part = np.partition(t, kth, axis=1) if kth else t
        m = xs.mean(axis=1)
        se = xs.std(axis=1, ddof=1) / math.sqrt(n)
        for i, j in enumerate(ranks):
            if j is None:
                out[i] = -1
                continue
            lo, hi = m - part[:, B - j] * se, m - part[:, j - 1] * se
            below, above = lo > truth, hi < truth
            out[i] += [int((~below & ~above).sum()), int(below.sum()), int(above.sum())]
    return out


def mean_case(dist: Distribution, n: int, levels: Sequence[float], reps: int = REPETITIONS):
    """Coverage counts of the mean's interval on ``reps`` samples of n values of ``dist``
    at every level (:func:`mean_hits`)."""
    rng = case_rng("mean", dist.name, n)
    x = dist.draw(rng, (reps, n))
    return mean_hits(x, dist.mean, levels, rng)


def n_min(coverage: np.ndarray, sizes: Sequence[int], level: float) -> int | None:
    """The smallest size from which every larger tabled size is calibrated at ``level``
    (``coverage``: (distributions, sizes))."""
    ok = np.all(coverage >= level - table.TOLERANCE, axis=0)
    if not ok[-1]:
        return None
    bad = np.flatnonzero(~ok)
    return int(sizes[bad[-1] + 1]) if len(bad) else int(sizes[0])


def build_table(
    sizes: Sequence[int] = SIZES, reps: int = REPETITIONS, progress: Callable | None = None
) -> dict[str, Any]:
    """The calibration table (module docstring): the mean's and the boundary's."""
    levels = list(LEVELS)
    cover = np.zeros((len(DISTRIBUTIONS), len(levels), len(sizes)))
    below, above = np.zeros_like(cover), np.zeros_like(cover)
    for j, n in enumerate(sizes):
        for d, dist in enumerate(DISTRIBUTIONS):
            t0 = time.perf_counter()
            hits = mean_case(dist, n, levels, reps)
            cover[d, :, j], below[d, :, j], above[d, :, j] = (hits / reps).T
            if progress:
                progress(f"mean n={n} {dist.name}: {time.perf_counter() - t0:.1f} s")
    return {
        "format": TABLE_FORMAT,
        "tolerance": table.TOLERANCE,
        "methods": {
            "mean": {
                "method": S.MEAN,
                "resamples": S.N_RESAMPLES,
                "tail_factor": S.MEAN_TAIL_FACTOR,
                "repetitions": reps,
                "seed": SEED,
                "distributions": {d.name: d.text for d in DISTRIBUTIONS},
                "levels": levels,
                "sizes": list(sizes),
                "coverage": {d.name: _rounded(cover[i]) for i, d in enumerate(DISTRIBUTIONS)},
                "missed_below": {d.name: _rounded(below[i]) for i, d in enumerate(DISTRIBUTIONS)},
                "missed_above": {d.name: _rounded(above[i]) for i, d in enumerate(DISTRIBUTIONS)},
                "n_min": [n_min(cover[:, i, :], sizes, lv) for i, lv in enumerate(levels)],
            },
            "boundary": build_boundary_table(progress=progress),
        },
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
        covs = {}
        for dist in DISTRIBUTIONS:
            hits = mean_case(dist, case.n, [case.level], reps)[0]
            covs[dist.name] = float(hits[0] / reps) if hits[0] >= 0 else None
        se = math.sqrt(case.level * (1 - case.level) / reps)
        ok = bool(all(c is not None and c >= floor for c in covs.values()))
        out.update(coverage=covs, se=se, repetitions=reps, ok=ok)
    return out


def composite_cases(sizes: Iterable[int] = (5, 10, 20), reps: int = 2000) -> list[dict]:
    """Coverage of the built intervals on data built to share seeds (module docstring): P =
    4 points whose values share each seed's draw ``z_s`` (exponential) plus independent
    noise, at the level 0.95."""
    out = []
    level, P = 0.95, 4
    for n in sizes:
        rng = case_rng("composite", n)
        z = rng.exponential(1.0, (reps, 1, n))
        x = z + 0.3 * rng.standard_normal((reps, P, n))  # (reps, points, seeds)
        truth = 1.0  # every point's mean, and their average
        clustered = x.mean(axis=1)  # each seed's average over the points
        hits = mean_hits(clustered, truth, [level], rng)[0]
        out.append(_composite("pooled mean, seeds as clusters", n, level, hits[0] / reps, reps))
        naive = _stratified_naive(x, truth, level, rng)
        before = _composite("pooled mean, points as independent values (reference: what "
                            "ignoring shared seeds gives)", n, level, naive, reps)  # fmt: skip
        out.append({**before, "ok": True, "reference": True})
        step = x[:, 1] + 0.5 - x[:, 0]  # a step of 0.5 between two points, paired by seed
        hits = mean_hits(step, 0.5, [level], rng)[0]
        out.append(_composite("step of means, paired by seed", n, level, hits[0] / reps, reps))
        xs = np.array([0.0, 1.0, 2.0, 3.0])
        y = x + 0.2 * xs[None, :, None]
        slopes = np.einsum("p,rps->rs", S.ols_weights(xs), y)
        hits = mean_hits(slopes, 0.2, [level], rng)[0]
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


def _stratified_naive(x: np.ndarray, truth: float, level: float, rng) -> float:
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
    truth = 1.0 + _median_offset()  # the median of z + 0.3 N(0, 1)
    return float(np.mean((lo <= truth) & (truth <= hi)))


@functools.cache
def _median_offset() -> float:
    """The median of Exp(1) + 0.3 N(0, 1) minus 1, by a large fixed sample."""
    rng = case_rng("median-offset")
    return float(np.median(rng.exponential(1.0, 4_000_000) + 0.3 * rng.standard_normal(4_000_000))
                 - 1.0)  # fmt: skip


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
    """Lines of the stored table: per level, the smallest calibrated size and the lowest
    coverage over the distributions from there on."""
    mean = table.load()["methods"]["mean"]
    sizes = mean["sizes"]
    lines = [
        f"mean ({mean['method']}, {mean['resamples']} resamples, tails x{mean['tail_factor']}): "
        f"{mean['repetitions']} repetitions per case (standard error "
        f"{math.sqrt(0.95 * 0.05 / mean['repetitions']):.4f} at 0.95), on "
        + "; ".join(f"{k} {v}" for k, v in mean["distributions"].items())
    ]
    for i, level in enumerate(mean["levels"]):
        need = mean["n_min"][i]
        if need is None:
            lines.append(f"  level {level:.6g}: not calibrated at any tabled size")
            continue
        j = sizes.index(need)
        worst = min(min(c[i][j:]) for c in mean["coverage"].values())
        floor = level - table.TOLERANCE
        lines.append(f"  level {level:.6g}: calibrated from {need} values (lowest coverage "
                     f"from there on {worst:.4f}, floor {floor:.4f})")  # fmt: skip
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
