"""The claims ledger: verdicts on stores with a known truth, honest intervals, the rate fit,
the one config validation, the workflow's ledger and report page, and ``attnsvm claims``.

Synthetic sweeps (:func:`synthetic`) hold per-seed values drawn around a known truth, with
failed, nonfinite and missing cells and unsolved SVMs; a claim on them must PASS when the truth
lies clearly on the predicted side, FAIL when it lies clearly on the other, and be
INCONCLUSIVE when the truth sits on the threshold. The intervals' coverage is
tests/test_calibration.py's; the rate fit is checked for recovering a planted exponent.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml
from pydantic import TypeAdapter

from attnsvm import codes
from attnsvm.claims import stats as S
from attnsvm.claims.evaluate import evaluate_claim, evaluate_claims
from attnsvm.claims.ledger import csv_text, text_table
from attnsvm.config.claims import Claim
from attnsvm.config.errors import ConfigError
from attnsvm.plan import parse_config
from attnsvm.tasks.metrics import MIN_FIT_POINTS, tail_rate, tail_window

REPO = Path(__file__).resolve().parents[1]
BASE = {
    "statement": "s",
    "theory": "t",
    "source": {"type": "conjecture", "cite": "a test"},
    "margin": 0.01,
}


def claims(*raw: dict):
    """Claim models of ``raw`` claims (the shape a config gives them)."""
    return TypeAdapter(list[Claim]).validate_python([{**BASE, **r} for r in raw])


def synthetic(
    means: dict[int, float],
    seeds: int,
    sd: float = 0.01,
    seed: int = 0,
    status: dict[tuple[int, int], str] | None = None,
    unsolved: tuple[tuple[int, int], ...] = (),
    share: dict[int, float] | None = None,
    gap: float = 0.1,
) -> xr.Dataset:
    """A sweep with axis ``d`` (the keys of ``means``): ``corr_fro_alpha`` ~ N(mean_d, sd),
    ``corr_nuc_alpha`` = corr_fro_alpha - gap + N(0, sd / 2), ``convergence`` global with
    probability ``share[d]``; ``status``: (d index, seed) -> a cell status; ``unsolved``:
    cells whose Frobenius SVM has no certified answer (NaN values, svm_status infeasible)."""
    rng = np.random.default_rng(seed)
    ds = list(means)
    shape = (len(ds), seeds)
    corr = np.stack([rng.normal(means[d], sd, seeds) for d in ds])
    st = np.zeros(shape, np.int8)
    for (i, s), name in (status or {}).items():
        st[i, s] = codes.CELL_STATUS.index(name)
    svm_status = np.zeros((*shape, 2), np.int8)
    for i, s in unsolved:
        corr[i, s] = np.nan
        svm_status[i, s, 0] = codes.SVM_STATUS.index("infeasible")
    p = share or dict.fromkeys(ds, 0.5)
    conv = np.stack([np.where(rng.random(seeds) < p[d], 0, 2) for d in ds]).astype(np.int8)
    dims = ("d", "seed")
    return xr.Dataset(
        {
            "status": (dims, st),
            "corr_fro_alpha": (dims, corr),
            "corr_nuc_alpha": (dims, corr - gap + rng.normal(0, sd / 2, shape)),
            "convergence": (dims, conv),
            "svm_status": ((*dims, "svm"), svm_status),
        },
        coords={"d": ds, "seed": np.arange(seeds), "svm": ["fro_alpha", "nuc_alpha"]},
        attrs={"axes": ["d"]},
    )


def verdict_of(sweep, **raw) -> dict:
    (claim,) = claims({"name": "c", **raw})
    return evaluate_claim(sweep, claim, "x")


# ----------------------------------------------------------------------------- verdicts
def test_level_claims_pass_fail_and_inconclusive_on_a_known_truth():
    sweep = synthetic({2: 0.8, 8: 0.8}, 40, sd=0.01)
    level = {"variable": "corr_fro_alpha", "op": ">="}
    assert verdict_of(sweep, **level, threshold=0.5)["verdict"] == "PASS"
    assert verdict_of(sweep, **level, threshold=0.85)["verdict"] == "FAIL"
    # the truth on the threshold: the interval straddles it
    assert verdict_of(sweep, **level, threshold=0.8)["verdict"] == "INCONCLUSIVE"
    # comparators and ranges
    assert verdict_of(sweep, variable="corr_fro_alpha", op="<", threshold=0.5)["verdict"] == "FAIL"
    assert verdict_of(sweep, variable="corr_fro_alpha", op="between",
                      threshold=[0.5, 0.9])["verdict"] == "PASS"  # fmt: skip
    # a paired difference: corr_fro - corr_nuc is 0.1 in every cell, up to noise, on [-2, 2]
    e = verdict_of(sweep, variable="corr_fro_alpha", minus="corr_nuc_alpha", op=">",
                   threshold=-0.5)  # fmt: skip
    assert e["verdict"] == "PASS" and e["estimate"] == pytest.approx(0.1, abs=1e-3)
    assert -2 <= e["interval"][0] < 0.1 < e["interval"][1] <= 2
    # near the end of the range a mean needs many values: a distribution that puts a few
    # seeds at -1 is not ruled out by 20 values at 0.995 (valid for every distribution)
    const = synthetic({2: 0.995}, 20, sd=0.0)
    e = verdict_of(const, variable="corr_fro_alpha", op=">=", threshold=0.9)
    assert e["verdict"] == "INCONCLUSIVE" and e["method"] == S.MEAN
    e = verdict_of(const, variable="corr_fro_alpha", aggregate="median", op=">=", threshold=0.9)
    assert e["verdict"] == "PASS" and e["method"] == "order statistics"


def test_every_point_shows_where_a_claim_fails():
    """A claim that holds at d = 8 and fails at d = 2: pooled it may pass, per point it
    fails at d = 2, and ``scope: every`` FAILs and names the point."""
    sweep = synthetic({2: 0.5, 8: 0.9}, 60, sd=0.002)
    raw = {"variable": "corr_fro_alpha", "op": ">=", "threshold": 0.6}
    pooled = verdict_of(sweep, **raw)
    rows = {r["label"]: r["verdict"] for r in pooled["rows"]}
    assert rows == {"pooled": "INCONCLUSIVE", "d=2": "FAIL", "d=8": "PASS"}
    # the pooled interval is never narrower than the spread of the points it pools
    lo, hi = pooled["interval"]
    assert lo <= 0.501 and hi >= 0.899 and "spread" in pooled["method"]
    # the points' rows are at the Bonferroni level, so their verdicts hold together
    assert {r["confidence"] for r in pooled["rows"] if r["level"] == "point"} == {0.975}
    every = verdict_of(sweep, **raw, scope="every")
    assert every["verdict"] == "FAIL" and every["decided_by"] == "d=2"
    # Bonferroni: each point's interval at 1 - 0.05 / 2
    assert every["interval_confidence"] == pytest.approx(0.975)
    assert verdict_of(sweep, **raw, where={"d": 8}, scope="every")["verdict"] == "PASS"


def test_shares_use_the_exact_binomial_interval():
    sweep = synthetic({2: 0.9}, 200, share={2: 0.9}, seed=3)
    k = int((sweep["convergence"] == 0).sum())
    e = verdict_of(sweep, variable="convergence", aggregate="share", per_seed="global",
                   op=">=", threshold=0.8)  # fmt: skip
    from scipy.stats import binomtest

    ci = binomtest(k, 200).proportion_ci(0.95, method="exact")
    assert e["estimate"] == k / 200 and e["interval"] == [ci.low, ci.high]
    assert e["verdict"] == "PASS" and e["method"] == "exact binomial"
    # a numeric per-seed threshold: the share of seeds with corr >= 0.9 (all of them)
    e = verdict_of(sweep, variable="corr_fro_alpha", aggregate="share", per_seed={">=": 0.8},
                   op=">=", threshold=0.95)  # fmt: skip
    assert e["estimate"] == 1.0 and e["verdict"] == "PASS"


def test_failed_uncertified_and_excluded_cells_are_counted_apart():
    status = {(0, 0): "failed", (0, 1): "nonfinite", (1, 0): "missing"}
    sweep = synthetic({2: 0.99, 8: 0.99}, 10, status=status, unsolved=((1, 5), (1, 6)))
    sweep["saturated"] = (("d", "seed"), np.ones((2, 10)))
    sweep["saturated"][0, 9] = 0.0
    e = verdict_of(sweep, variable="corr_fro_alpha", op=">=", threshold=0.9,
                   given={"saturated": 1})  # fmt: skip
    assert e["n_cells"] == 20 and e["n_values"] == 20 - 3 - 2 - 1
    assert e["excluded"] == {
        "failed": 1, "nonfinite": 1, "missing": 1, "not_given": 1, "no_value": 2, "seen": 0
    }  # fmt: skip
    assert e["no_value_svm_status"] == {"fro_alpha": {"infeasible": 2}}
    # every cell of the selected points is in exactly one count
    assert e["n_values"] + sum(e["excluded"].values()) == e["n_cells"]
    for row in e["rows"]:
        assert row["n_values"] + sum(row["excluded"].values()) == row["n_cells"]


def test_too_few_values_are_inconclusive_never_a_verdict():
    # a mean of few values: an interval (valid at every n), too wide to decide
    three = verdict_of(synthetic({2: 0.5}, 3, sd=1e-4), variable="corr_fro_alpha", op=">=",
                       threshold=0.0)  # fmt: skip
    assert three["verdict"] == "INCONCLUSIVE" and -1 <= three["interval"][0] < 0
    sweep = synthetic({2: 0.5}, 30, sd=1e-4)
    assert verdict_of(sweep, variable="corr_fro_alpha", op=">=", threshold=0.0)["verdict"] == "PASS"
    sweep = synthetic({2: 0.999}, 4, sd=1e-4)
    e = verdict_of(sweep, variable="corr_fro_alpha", aggregate="median", op=">=", threshold=0.9)
    assert e["verdict"] == "INCONCLUSIVE" and "no order-statistic interval" in e["method"]
    sweep = synthetic({2: 0.999}, 4, status={(0, s): "failed" for s in range(4)})
    e = verdict_of(sweep, variable="convergence", aggregate="share", per_seed="global",
                   op=">=", threshold=0.1)  # fmt: skip
    assert e["verdict"] == "INCONCLUSIVE" and e["excluded"]["failed"] == 4


def test_the_seed_is_the_unit():
    """Points that share seeds are not independent: one seed at 8 grid points is one unit
    (INCONCLUSIVE, whatever its 8 values), and a pooled mean resamples each seed's values at
    all points together: on data built so that a seed's draw is shared by every point, its
    interval is as wide as the seeds allow, not as the points x seeds values would suggest."""
    one = synthetic({d: 0.5 for d in range(2, 10)}, 1, sd=0.001)
    e = verdict_of(one, variable="corr_fro_alpha", op=">=", threshold=0.0)
    assert e["verdict"] == "INCONCLUSIVE" and e["n_values"] == 8
    assert e["rows"][0]["basis"][0]["n"] == 1  # one seed: one value, whatever its 8 points
    # 4 points, 12 seeds: every point sees its seed's shared draw z_s plus a little noise
    rng = np.random.default_rng(5)
    z = rng.exponential(0.01, 12)
    shared = synthetic({d: 0.0 for d in (2, 4, 8, 16)}, 12, sd=0.0)
    shared["corr_fro_alpha"][:] = 0.5 + z[None, :] + rng.normal(0, 1e-4, (4, 12))
    e = verdict_of(shared, variable="corr_fro_alpha", op=">=", threshold=0.0)
    pooled = e["rows"][0]
    assert pooled["label"] == "pooled" and "seed clusters" in pooled["method"]
    assert pooled["basis"] == [{"method": S.MEAN, "n": 12, "level": 0.95}]
    # a t interval over the 48 values as if they were independent is far narrower
    from scipy import stats

    x = shared["corr_fro_alpha"].values.ravel()
    naive = 2 * stats.t.ppf(0.975, 47) * x.std(ddof=1) / np.sqrt(48)
    assert pooled["interval"][1] - pooled["interval"][0] > 1.5 * naive
    mixed = synthetic({2: 0.5, 3: 0.5}, 40, sd=0.001, status={(1, s): "failed" for s in range(5)})
    assert verdict_of(mixed, variable="corr_fro_alpha", op=">=", threshold=0.0)["verdict"] == "PASS"


def test_trend_claims_on_a_known_truth():
    up = synthetic({2: -0.5, 4: 0.0, 8: 0.5}, 60, sd=0.005)
    mono = {"kind": "monotone", "variable": "corr_fro_alpha", "along": "d"}
    assert verdict_of(up, **mono)["verdict"] == "PASS"
    e = verdict_of(up, **mono, direction="decreasing")
    assert e["verdict"] == "FAIL" and e["decided_by"] == "d: 2 -> 4"
    steps = [r for r in e["rows"] if r["level"] == "step"]
    assert [r["confidence"] for r in steps] == [pytest.approx(0.975)] * 2  # Bonferroni
    # an order along the axis: a comparison of two of its values
    assert verdict_of(up, **mono, order=[8, 2])["verdict"] == "FAIL"
    # a flat stretch: within the tolerance it passes, without it the evidence cannot decide
    flat = synthetic({2: 0.0, 4: 0.0, 8: 0.0}, 60, sd=0.005)
    assert verdict_of(flat, **mono)["verdict"] == "INCONCLUSIVE"
    assert verdict_of(flat, **mono, tolerance=0.6)["verdict"] == "PASS"
    # slope and exponent: corr = -0.6 + 0.3 log2(d)
    line = synthetic({2: -0.3, 4: 0.0, 8: 0.3, 16: 0.6}, 60, sd=0.002)
    e = verdict_of(line, kind="slope", variable="corr_fro_alpha", along="d", x="log",
                   op="between", threshold=[0.2, 0.9])  # fmt: skip
    assert e["verdict"] == "PASS"
    assert e["estimate"] == pytest.approx(0.3 / np.log(2), rel=0.05)
    e = verdict_of(line, kind="slope", variable="corr_fro_alpha", along="d", op="<",
                   threshold=0)  # fmt: skip
    assert e["verdict"] == "FAIL"


def test_share_steps_are_never_certain_from_agreeing_seeds():
    """Two groups whose seeds all agree give a degenerate bootstrap ([0, 0]); a step between
    shares uses exact intervals instead, so 8 of 8 against 8 of 8 cannot PASS or FAIL."""
    sweep = synthetic({2: 0.9, 4: 0.9}, 8, share={2: 1.0, 4: 1.0})
    e = verdict_of(sweep, kind="monotone", variable="convergence", aggregate="share",
                   per_seed="global", along="d")  # fmt: skip
    assert e["verdict"] == "INCONCLUSIVE" and e["interval"][0] < 0 < e["interval"][1]


def test_verdicts_are_reproducible_and_independent_of_other_claims():
    sweep = synthetic({2: 0.5, 8: 0.6}, 40, sd=0.02)
    a = {"name": "a", "variable": "corr_fro_alpha", "op": ">=", "threshold": 0.5}
    b = {"name": "b", "variable": "corr_fro_alpha", "op": ">=", "threshold": 0.0}
    once = evaluate_claims(sweep, claims(a, b), "x")
    again = evaluate_claims(sweep, claims(b, a), "x")
    assert json.dumps(once[0]) == json.dumps(again[1])
    assert json.dumps(once[1]) == json.dumps(again[0])
    assert csv_text(once) == csv_text(evaluate_claims(sweep, claims(a, b), "x"))
    # no resampling coin: another name gives the same interval
    c = evaluate_claims(sweep, claims({**a, "name": "c"}), "x")[0]
    assert c["estimate"] == once[0]["estimate"] and c["interval"] == once[0]["interval"]


def test_ledger_table_and_csv_are_complete():
    import io

    import pandas as pd

    sweep = synthetic({2: 0.9, 8: 0.999}, 20, status={(0, 0): "failed"})
    entries = evaluate_claims(sweep, claims(
        {"name": "lvl", "variable": "corr_fro_alpha", "op": ">=", "threshold": 0.95},
        {"name": "mono", "kind": "monotone", "variable": "corr_fro_alpha", "along": "d"},
    ), "x")  # fmt: skip
    frame = pd.read_csv(io.StringIO(csv_text(entries)))
    heads = frame[frame.level == "claim"]
    assert list(heads.claim) == ["lvl", "mono"]
    assert list(heads.verdict) == [e["verdict"] for e in entries]
    assert set(frame.level) == {"claim", "pooled", "point", "group", "step"}
    assert int(heads.failed.iloc[0]) == 1
    text = text_table(entries)
    assert "x/lvl" in text and "1 failed" in text and "where: " in text


# ----------------------------------------------------------------------------- intervals
def test_intervals_are_seeded_and_combine_by_bonferroni():
    x = np.random.default_rng(0).uniform(0.1, 0.5, 30)
    a = S.mean_iv(x, 0.95, (0.0, 1.0))
    assert a == S.mean_iv(x, 0.95, (0.0, 1.0)) and a.lo < 0.3 < a.hi and a.method == S.MEAN
    assert not S.mean_iv(x, 0.95, None).defined  # no range: no interval
    # two intervals that hold together: their difference and union hold every parameter
    i1, i2 = S.binomial_interval(3, 10, 0.975), S.binomial_interval(8, 10, 0.975)
    d = S.difference(i1, i2, 1.0, 0.95, 0.5)
    assert (d.lo, d.hi) == (i2.lo - i1.hi, i2.hi - i1.lo)
    assert [b["n"] for b in d.basis] == [10, 10]
    u = S.union([i1, i2], 0.55, 0.95)
    assert (u.lo, u.hi) == (i1.lo, i2.hi)
    # a slope from intervals: its extremes over their box
    c = S.combination([-0.5, 0.5], [i1, i2], 0.95, 0.25)
    assert c.lo == pytest.approx(0.5 * (i2.lo - i1.hi))
    assert c.hi == pytest.approx(0.5 * (i2.hi - i1.lo))
    assert S.verdict(np.nan, 1.0, ">=", 0) == "INCONCLUSIVE"
    assert S.combine(["PASS", "INCONCLUSIVE"]) == "INCONCLUSIVE"
    assert S.combine(["PASS", "FAIL", "INCONCLUSIVE"]) == "FAIL"


# ----------------------------------------------------------------------------- the rate fit
def test_rate_fit_recovers_a_planted_exponent():
    k = np.unique(np.round(np.geomspace(1, 5000, 60))).astype(float)
    exact = tail_rate(k, 3.0 * k**-1.7)
    assert exact.rate == pytest.approx(1.7, abs=1e-10)
    assert exact.points == int(tail_window(k).sum()) and exact.first >= np.sqrt(5000)
    assert exact.last == 5000
    rng = np.random.default_rng(1)
    covered = 0
    for _ in range(200):
        y = 2.0 * k**-0.8 * np.exp(rng.normal(0, 0.05, len(k)))
        fit = tail_rate(k, y)
        covered += fit.lo <= 0.8 <= fit.hi
        assert abs(fit.rate - 0.8) < 0.1
    assert covered >= 180  # a 95% t interval: 190 expected
    # values at the floor (rounding of 1 - corr) and non-finite values are not fitted
    y = np.where(k > 1000, 1e-14, k**-1.0)
    fit = tail_rate(k, y, floor=1e-12)
    assert fit.last <= 1000 and fit.rate == pytest.approx(1.0)
    few = tail_rate(k[:5], k[:5] ** -1.0)  # tail 3, 4, 5
    assert few.points < MIN_FIT_POINTS and np.isnan(few.rate)


def test_rate_fit_is_scipys_linregress_bit_for_bit():
    from scipy import stats

    from attnsvm.tasks.metrics import RATE_CONFIDENCE

    rng = np.random.default_rng(2)
    k = np.unique(np.round(np.geomspace(1, 2000, 28))).astype(float)
    for scale in (0.0, 1e-3, 0.5):
        y = 1.5 * k**-0.9 * np.exp(rng.normal(0, scale, len(k)))
        fit = tail_rate(k, y)
        use = tail_window(k)
        ref = stats.linregress(np.log(k[use]), np.log(y[use]))
        half = float(stats.t.ppf(0.5 + RATE_CONFIDENCE / 2, use.sum() - 2)) * float(ref.stderr)
        assert fit.rate == -float(ref.slope)
        assert (fit.lo, fit.hi) == (-float(ref.slope) - half, -float(ref.slope) + half)


def test_offselection_mass_is_exact_far_below_rounding():
    from attnsvm.tasks.metrics import offselection_mass

    s = np.array([[[1 - 2e-30, 1e-30, 1e-30], [0.5, 0.25, 0.25]]])  # (C=1, n=2, T=3)
    assert offselection_mass(s, np.array([0, 0]))[0] == pytest.approx((2e-30 + 0.5) / 2)
    assert offselection_mass(s[:, :1], np.array([0]))[0] == pytest.approx(2e-30)


def test_trained_cells_store_their_rates_and_normalized_gd_is_faster():
    from attnsvm import Cell
    from attnsvm.tasks import run_cells

    cells = [
        Cell(n=4, T=4, d=6, iterations=400, checkpoint_count=40, optimizer=o, seed=0)
        for o in ("plain", "normalized")
    ]
    plain, normalized = run_cells(cells, device="cpu")
    for res in (plain, normalized):
        sc = res.scalars
        assert sc["rate_corr_lo"] <= sc["rate_corr"] <= sc["rate_corr_hi"]
        assert sc["rate_corr_points"] >= MIN_FIT_POINTS and sc["rate_corr_last"] == 400
        assert res.curves["offmass"].shape == (len(res.iterations),)
    assert normalized.scalars["rate_corr"] > plain.scalars["rate_corr"] > 0


# ----------------------------------------------------------------------------- declared variables
PROBES = [
    {},
    {"param": "KQ"},
    {"param": "KQ", "m": 2},
    {"train": False},
    {"generator": "relu", "head": "relu"},
    {"generator": "orthonormal", "head": "lambda", "T": 3, "d": 4},
    {"norm_svms": True},
    {"train_head": True},
    {"heads": 2},
    {"heads": 2, "param": "KQ"},
    {"task": "regpath", "checkpoint_count": 4},
    {"task": "ntp", "generator": "ntp_acyclic", "K": 4},
    {"attention": "causal"},
    {"attention": "self", "optimizer": "polyak"},
    {"generator": "signal_noise", "label_flip": 0.3, "n_test": 10},
    {"generator": "weakly_relevant", "n_test": 10, "param": "KQ", "init": "kaiming_q0"},
    {
        "generator": "magen",
        "T": 2,
        "train_head": True,
        "label_flip": 0.3,
        "n_test": 10,
        "init": "zero",
    },
    {"n_test": 10, "attention": "self", "param": "KQ"},
    {"weight_decay": 0.1, "optimizer": "plain"},
    {"weight_decay": 0.1, "param": "KQ", "m": 2},
    {"weight_decay": 0.1, "train_head": True},
    {"weight_decay": 0.1, "heads": 2},
    {"batch_size": 2},
]


@pytest.mark.slow
def test_every_task_stores_exactly_the_scalars_it_declares():
    """What a claim may name is what the task declares (:attr:`attnsvm.tasks.Task.scalars`),
    and that is what its cells store, in every branch of every task."""
    from attnsvm import Cell
    from attnsvm.tasks import run_cells, task_for

    base = {"d": 4, "T": 3, "n": 3, "iterations": 40, "checkpoint_count": 8}
    cells = [Cell(**{**base, **p}) for p in PROBES]
    for cell, res in zip(cells, run_cells(cells, device="cpu"), strict=True):
        assert res.status == "ok", res.message
        assert set(task_for(cell).scalars(cell)) == set(res.scalars), cell.to_dict()


# ----------------------------------------------------------------------------- the one validation
def config() -> dict:
    return yaml.safe_load((REPO / "config/config.yaml").read_text())


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"variable": "corr_fro_alha"}, "variable 'corr_fro_alha' is not stored by the cells at "
         "param='W'; did you mean 'corr_fro_alpha'?"),
        ({"varible": "x"}, "unknown key 'varible'; did you mean 'variable'?"),
        ({"where": {"parm": "W"}}, "where 'parm' is not a grid axis of the experiment; did you "
         "mean 'param'?"),
        ({"where": {"param": "Q"}}, "where param: 'Q' is not a value of the axis"),
        ({"op": "=>"}, "'op' must be '>=', '>', '<=', '<' or 'between', got '=>'"),
        ({"kind": "trend"}, "unknown kind 'trend' (allowed: level, monotone, slope, boundary)"),
        ({"figure": "e3"}, "figure 'e3' is not drawn by the experiment"),
        ({"variable": "corr_v"}, "variable 'corr_v' is not stored by the cells"),
        ({"threshold": [0.9]}, "op '>=' needs a finite number as threshold"),
        ({"aggregate": "quantile"}, "'q' goes with aggregate: quantile"),
        ({"confidence": 1.5}, "'confidence' must be less than 1, got 1.5"),
    ],
)  # fmt: skip
def test_a_bad_claim_is_one_error_before_any_work(edit, message):
    c = config()
    c["experiments"]["e2_local"]["claims"][0].update(edit)
    with pytest.raises(ConfigError) as err:
        parse_config(c)
    text = str(err.value)
    assert text.startswith("experiment 'e2_local': claim 'w_direction': ") and "\n" not in text
    assert message in text


def test_claims_about_axes_values_and_checkpoints_are_checked():
    c = config()
    e6 = c["experiments"]["e6_types"]["claims"]
    bad = copy.deepcopy(c)
    bad["experiments"]["e6_types"]["claims"][0]["along"] = "n"
    with pytest.raises(ConfigError, match="along 'n' is not a grid axis"):
        parse_config(bad)
    bad = copy.deepcopy(c)
    bad["experiments"]["e6_types"]["claims"][0]["per_seed"] = "glob"
    with pytest.raises(ConfigError, match="'glob' is not a value of convergence; did you mean"):
        parse_config(bad)
    bad = copy.deepcopy(c)
    bad["experiments"]["e2_local"]["claims"][1]["name"] = "w_direction"
    with pytest.raises(ConfigError, match="the name is used twice"):
        parse_config(bad)
    # a rate needs dense checkpoints in the tail of the trajectory
    bad = copy.deepcopy(c)
    bad["experiments"]["b12_rates"]["fixed"]["checkpoint_count"] = 6
    with pytest.raises(ConfigError, match="a rate needs 5 checkpoints"):
        parse_config(bad)
    assert e6[0]["kind"] == "slope"


def test_shipped_configs_state_the_theorys_claims():
    """Every shipped config's claims validate, name a theory, a baseline and, where the
    experiment draws it, a figure; a statement about every point ("at every") holds at every
    point; the claims the issue asks for are there, the paper's predictions in paper.yaml."""
    names = {}
    for name in ("config.yaml", "paper.yaml", "beyond.yaml"):
        raw = yaml.safe_load((REPO / "config" / name).read_text())
        exps = parse_config(raw)
        for exp in exps.values():
            for claim in exp.claims:
                assert claim.theory and claim.statement and claim.note, claim.name
                assert claim.figure in exp.figures, claim.name
                assert claim.baseline is not None, claim.name
                if "at every" in claim.statement and claim.kind == "level":
                    assert claim.scope == "every", claim.name
                names.setdefault(name, set()).add(f"{exp.name}/{claim.name}")
    assert {"e2_local/w_direction", "e2_local/kq_direction", "e6_types/w_global_share_grows_with_d",
            "b10_norms/adam_prefers_max", "b12_rates/normalized_rate_beats_plain",
            "b12_rates/polyak_rate_beats_plain"} <= names["config.yaml"]  # fmt: skip
    paper = {
        "e2_local/w_direction", "e2_local/kq_direction", "e2_local/softmax_saturates",
        "e2_local/selection_locally_optimal", "e3_rank/feasible_when_d_large",
        "e3_rank/nuclear_rank_below_frobenius", "e3_rank/frobenius_rank_is_n5",
        "e4_relu/gen_svm_predicts_gd", "e4_relu/svmeq_beats_mm_gen",
        "e4_relu/svmeq_improves_with_d", "e5_lambda/selected_tokens_rise_with_lambda",
        "e6_types/w_global_share_rises", "e6_types/kq_global_share_grows_with_d",
        "b4_regpath/w_regpath_direction", "b4_regpath/kq_regpath_direction",
    }  # fmt: skip
    assert paper <= names["paper.yaml"]
    assert any(n.startswith("b12_rates/") for n in names["beyond.yaml"])


def test_paper_claims_are_decidable_by_their_seeds():
    """config/paper.yaml gives every claim seeds enough that its ideal outcomes PASS and
    FAIL (docs/science.md §13; ``attnsvm check-config`` prints the same analysis)."""
    from attnsvm.claims.design import decidability

    raw = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())
    for exp in parse_config(raw).values():
        for claim in exp.claims:
            d = decidability(claim, exp.axes, len(exp.seeds))
            assert d["can_pass"] and d["can_fail"], (exp.name, claim.name, d)


def test_decidability_before_the_run():
    """The seeds a claim needs: a share >= 0.99 needs 368 perfect seeds at 0.95 (the exact
    binomial bound); a mean the table's calibrated size; both directions are reported."""
    from attnsvm.claims.design import by_design, decidability, design_text, seeds_needed

    (share,) = claims({"name": "s", "variable": "convergence", "aggregate": "share",
                       "per_seed": "global", "op": ">=", "threshold": 0.99})  # fmt: skip
    d = decidability(share, {"d": [2]}, 24)
    assert (d["can_pass"], d["can_fail"]) == (False, True)
    assert d["seeds_to_pass"] == 368 and d["seeds_to_fail"] <= 24 and by_design(d)
    assert design_text("e/s", d, 24) == (
        "e/s: cannot PASS with 24 seeds per grid point (24 cells); needs 368"
    )
    assert decidability(share, {"d": [2]}, 368)["can_pass"]
    # a share at 4 points at once: each point's bound at the Bonferroni level
    assert decidability(share, {"d": [2, 4, 8, 16]}, 24)["seeds_to_pass"] > 368
    (mean,) = claims({"name": "m", "variable": "corr_fro_alpha", "op": ">=", "threshold": 0.99})
    d = decidability(mean, {"d": [2]}, 2)
    k = seeds_needed(d)
    # a mean on [-1, 1] near its end: hundreds of values, even all at 1, to rule out a few at -1
    assert by_design(d) and k > 300 and not d["can_pass"] and d["can_fail"]
    assert not by_design(decidability(mean, {"d": [2]}, k))
    assert by_design(decidability(mean, {"d": [2]}, k - 1))


def test_a_given_is_stated_before_the_run_and_its_shortfall_after():
    """check-config states how many cells per grid point must meet a claim's ``given``; after
    a run in which too few did (a known truth: ~20% converge globally), the ledger says the
    claim is INCONCLUSIVE for that reason, not by design; when every cell meets it, nothing."""
    from attnsvm.claims.design import decidability, design_text, given_shortfall, seeds_needed
    from attnsvm.claims.ledger import design_note

    raw = {"variable": "corr_fro_alpha", "op": ">=", "threshold": 0.0,
           "given": {"convergence": "global"}}  # fmt: skip
    (claim,) = claims({"name": "c", **raw})
    d = decidability(claim, {"d": [2, 8]}, 12)
    need = seeds_needed(d)
    assert d["can_pass"] and d["can_fail"] and need <= 12
    assert design_text("e/c", d, 24, claim.given) == (
        f"e/c: decidable with 12 seeds per grid point (24 cells) if at least {need} cells per "
        "grid point meet its given (convergence == global); the others are counted apart"
    )
    rare = verdict_of(synthetic({2: 0.9, 8: 0.9}, 12, sd=0.002, share={2: 0.2, 8: 0.2}), **raw)
    rare["design"] = d
    assert rare["verdict"] == "INCONCLUSIVE" and rare["excluded"]["not_given"] > 12
    dropped = rare["excluded"]["not_given"]
    assert (
        design_note(rare)
        == given_shortfall(rare)
        == (
            f"INCONCLUSIVE: {dropped} of 24 cells do not meet its given; at least {need} per grid "
            "point meeting it would decide it"
        )
    )
    every = verdict_of(synthetic({2: 0.9, 8: 0.9}, 12, sd=0.002, share={2: 1.0, 8: 1.0}),
                       **raw)  # fmt: skip
    every["design"] = d
    assert every["verdict"] == "PASS" and design_note(every) is None


# ----------------------------------------------------------------------------- baselines, gate
def test_a_baseline_is_a_control_row_and_a_passing_one_is_flagged():
    """The claim evaluated on its baseline beside it: the nuclear SVM (0.1 lower) must not
    reach the Frobenius claim's threshold; a baseline that does is flagged in the entry, the
    table and the summary."""
    from attnsvm.claims.ledger import summary_lines

    sweep = synthetic({2: 0.5, 8: 0.5}, 60, sd=0.002, gap=0.6)
    base = {"name": "the nuclear SVM", "variable": "corr_nuc_alpha"}
    e = verdict_of(sweep, variable="corr_fro_alpha", op=">=", threshold=0.2, baseline=base)
    assert e["verdict"] == "PASS" and e["control"]["verdict"] == "FAIL"
    assert not e["control"]["passes"] and e["control"]["name"] == "the nuclear SVM"
    weak = verdict_of(sweep, variable="corr_fro_alpha", op=">=", threshold=-0.5, baseline=base)
    assert weak["verdict"] == "PASS" and weak["control"]["passes"]
    assert "!! the baseline passes" in text_table([weak])
    assert any("baselines that PASS" in line and "x/c" in line for line in summary_lines([weak]))
    assert "control" in set(pd_levels(csv_text([e])))
    # where-substitution: the same claim at another grid point
    at = verdict_of(synthetic({2: -0.1, 8: 0.5}, 60, sd=0.002), variable="corr_fro_alpha",
                    where={"d": 8}, op=">=", threshold=0.2,
                    baseline={"name": "d = 2", "where": {"d": 2}})  # fmt: skip
    assert at["verdict"] == "PASS" and at["control"]["verdict"] == "FAIL"


def pd_levels(text: str) -> list[str]:
    import io

    import pandas as pd

    return list(pd.read_csv(io.StringIO(text)).level)


def test_null_models_leave_no_effect():
    """shuffle: a clear trend dealt out at random is no trend (its control never PASSes,
    whatever cells are missing); sign: a clear positive difference with random signs is no
    difference."""
    up = synthetic({2: -0.5, 4: 0.0, 8: 0.5}, 60, sd=0.005,
                   status={(0, s): "failed" for s in range(10)})  # fmt: skip
    e = verdict_of(up, kind="monotone", variable="corr_fro_alpha", along="d",
                   baseline={"name": "no trend", "null_model": "shuffle"})  # fmt: skip
    assert e["verdict"] == "PASS" and e["control"]["verdict"] != "PASS"
    sweep = synthetic({2: 0.5}, 60, sd=0.01, gap=0.6)
    e = verdict_of(sweep, variable="corr_fro_alpha", minus="corr_nuc_alpha", op=">", threshold=0,
                   baseline={"name": "no difference", "null_model": "sign"})  # fmt: skip
    assert e["verdict"] == "PASS" and e["control"]["verdict"] != "PASS"


@pytest.mark.parametrize(
    ("claim", "message"),
    [
        ({"variable": "corr_fro_alpha", "op": ">=", "threshold": 0.9,
          "baseline": {"name": "x", "null_model": "shuffle"}}, "'shuffle' permutes a trend"),
        ({"variable": "convergence", "aggregate": "share", "per_seed": "global", "op": ">=",
          "threshold": 0.5, "baseline": {"name": "x", "null_model": "sign"}}, "'sign' goes with"),
        ({"variable": "corr_fro_alpha", "op": ">=", "threshold": 0.9,
          "baseline": {"name": "x"}}, "a baseline names what it changes"),
    ],
)  # fmt: skip
def test_a_baseline_that_changes_nothing_or_does_not_fit_is_refused(claim, message):
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match=message):
        claims({"name": "c", **claim})


def test_a_baseline_names_what_the_experiment_has():
    c = config()
    c["experiments"]["e2_local"]["claims"][0]["baseline"] = {"name": "x", "variable": "corr_nuk"}
    with pytest.raises(ConfigError, match="claim 'w_direction': baseline: variable 'corr_nuk'"):
        parse_config(c)


def test_the_family_wise_gate_is_holms():
    """Holm's step-down over the claims' fail_p: the k-th smallest is held while it is at
    most alpha / (m - k + 1); a FAIL that holds only at its own level does not fail the gate
    of many claims."""
    from attnsvm.claims.ledger import holm_gate

    def entries(*ps):
        return [{"experiment": "x", "name": f"c{i}", "fail_p": p} for i, p in enumerate(ps)]

    gate = holm_gate(entries(0.01, 0.02, 0.5))
    assert gate["held"] == ["x/c0", "x/c1"] and not gate["passes"]
    assert holm_gate(entries(0.02, 0.03, 0.04))["passes"]  # 0.02 > 0.05 / 3
    assert holm_gate(entries(0.04))["held"] == ["x/c0"]
    # fail_p of a real FAIL: far from the threshold it holds at any level, near it does not
    sweep = synthetic({2: 0.5}, 60, sd=0.002)
    from attnsvm.claims.evaluate import _Reader
    from attnsvm.claims.ledger import fail_p

    (far,) = claims({"name": "far", "variable": "corr_fro_alpha", "op": ">=", "threshold": 0.9})
    hi = verdict_of(sweep, variable="corr_fro_alpha", op=">=", threshold=0.9)["interval"][1]
    (near,) = claims({"name": "near", "variable": "corr_fro_alpha", "op": ">=",
                      "threshold": hi + 1e-4})  # fmt: skip
    reader = _Reader(sweep)
    assert evaluate_claim(reader, near, "x")["verdict"] == "FAIL"
    assert fail_p(reader, far, "x") < fail_p(reader, near, "x") <= 0.05 + 1e-12


def test_a_variable_the_store_lacks_is_one_line_not_a_traceback():
    """Results of an earlier attnsvm lack a variable a claim (or its baseline) reads: the
    reader raises a ValueError naming it, which `attnsvm claims` prints as one line."""
    from attnsvm.claims.evaluate import MissingVariableError, _Reader

    sweep = synthetic({2: 0.95}, 5).drop_vars("corr_fro_alpha")
    (claim,) = claims({"name": "c", "variable": "corr_fro_alpha", "op": ">=", "threshold": 0.9})
    with pytest.raises(ValueError, match="has no variable 'corr_fro_alpha'") as err:
        evaluate_claim(_Reader(sweep), claim, "x")
    assert isinstance(err.value, MissingVariableError) and "\n" not in str(err.value)


# ----------------------------------------------------------------------------- on disk, CLI
def _stamped(claim: dict) -> dict:
    """``claim`` with ``written_against`` recorded for seeds the tiny run does not use, so it
    is decided (not exploratory) on all of them."""
    from pydantic import TypeAdapter

    from attnsvm.config.claims import Claim, claim_hash

    model = TypeAdapter(Claim).validate_python(claim)
    return {**claim, "written_against": {"hash": claim_hash(model), "seeds": [1000, 1000]}}


def tiny_config(results: Path, threshold: float) -> dict:
    return {
        "results": str(results),
        "block_seconds": 0,
        "experiments": {
            "tiny": {
                "figures": ["rates"],
                "fixed": {"n": 4, "T": 4, "d": 6, "iterations": 200, "checkpoint_count": 30},
                "grid": {"optimizer": ["plain", "normalized"]},
                "seeds": 6,
                "claims": [
                    _stamped(c)
                    for c in [
                        {
                            **BASE,
                            "name": "fast",
                            "figure": "rates",
                            "kind": "monotone",
                            "variable": "rate_corr",
                            "aggregate": "median",
                            "along": "optimizer",
                            "order": ["plain", "normalized"],
                        },
                        {
                            **BASE,
                            "name": "aligned",
                            "variable": "corr_matching",
                            "where": {"optimizer": "normalized"},
                            "op": ">=",
                            "threshold": threshold,
                        },
                    ]
                ],  # fmt: skip
            }
        },
    }


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The tiny config's stores written as the workflow writes them (blocks, sweep)."""
    from attnsvm.plan import Plan
    from attnsvm.sweep.collect import collect_experiment
    from attnsvm.sweep.worker import write_block

    root = tmp_path_factory.mktemp("tiny")
    plan = Plan.from_config(tiny_config(root / "results", 0.5))
    exp = plan.experiments["tiny"]
    paths = [
        str(write_block(b.cells, plan.paths.block("tiny", b.name), experiment="tiny",
                        block=b.name, device="cpu"))
        for b in exp.blocks()
    ]  # fmt: skip
    collect_experiment(plan.experiment_config("tiny"), paths, plan.paths.sweep("tiny"))
    return root, plan


def _cli(root: Path, config: dict, *args: str) -> subprocess.CompletedProcess:
    path = root / f"config_{config['experiments']['tiny']['claims'][1]['threshold']}.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run(
        [sys.executable, "-m", "attnsvm.cli", "claims", "--configfile", str(path), *args],
        capture_output=True, text=True, cwd=root,
    )  # fmt: skip


def test_attnsvm_claims_exits_nonzero_on_a_false_claim(tiny_run):
    root, _ = tiny_run
    true = _cli(root, tiny_config(root / "results", 0.5))
    assert true.returncode == 0, true.stdout + true.stderr
    assert "tiny/aligned" in true.stdout and "tiny/fast" in true.stdout
    false = _cli(root, tiny_config(root / "results", 0.99999999))
    assert false.returncode == 1, false.stdout + false.stderr
    assert "FAIL         tiny/aligned" in false.stdout
    assert "family-wise gate (Holm over 2 claim(s), alpha 0.05): 1 FAIL(s) hold" in false.stdout
    as_json = _cli(root, tiny_config(root / "results", 0.5), "--json")
    doc = json.loads(as_json.stdout)
    assert {e["name"] for e in doc["claims"]} == {"fast", "aligned"}
    assert doc["gate"] == {"alpha": 0.05, "claims": 2, "held": [], "passes": True}
    missing = _cli(root, tiny_config(root / "elsewhere", 0.5))
    assert missing.returncode == 3 and "has not been run in" in missing.stderr
    assert "0 of 2 blocks" in missing.stderr
    # the same results read with another config's cells: not evaluated, one line, exit 3
    other = tiny_config(root / "results", 0.5)
    other["experiments"]["tiny"]["fixed"]["iterations"] = 201
    foreign = _cli(root, other)
    assert foreign.returncode == 3 and foreign.stdout == "", foreign.stdout
    assert foreign.stderr.strip().endswith("has not been run in "
                                           f"{root / 'results'}/: 0 of 2 blocks of its "
                                           "experiments with claims")  # fmt: skip
    bad = tiny_config(root / "results", 0.5)
    bad["experiments"]["tiny"]["claims"][0]["along"] = "lr"
    broken = _cli(root, bad)
    assert broken.returncode == 2 and "along 'lr' is not a grid axis" in broken.stderr


def test_ledger_files_and_report_page(tiny_run, tmp_path):
    import pandas as pd
    from docutils.core import publish_parts

    from attnsvm.claims.ledger import read_ledger, write_ledger
    from attnsvm.report.claims_page import write_claims_page

    root, plan = tiny_run
    js, csv = tmp_path / "claims.json", tmp_path / "claims.csv"
    write_ledger(plan.paths.sweep("tiny"), plan.claims_config("tiny"), "tiny", js, csv)
    doc = read_ledger(js)
    assert doc["experiment"] == "tiny" and [c["name"] for c in doc["claims"]] == ["fast", "aligned"]
    assert sum(doc["counts"].values()) == 2
    frame = pd.read_csv(csv)
    assert set(frame.claim) == {"fast", "aligned"}
    before = js.read_text()
    write_ledger(plan.paths.sweep("tiny"), plan.claims_config("tiny"), "tiny", js, csv)
    assert js.read_text() == before  # deterministic
    rst, html = tmp_path / "claims.rst", tmp_path / "claims.html"
    write_claims_page({"tiny": js}, plan.figure_pngs(), rst, html)
    body = publish_parts(rst.read_text(), writer="html",
                         settings_overrides={"halt_level": 2})["body"]  # fmt: skip
    png = plan.paths.figure("tiny", "rates", "png").replace("/", "%2F")
    assert f"javascript:app.showResultInfo('{png}')" in body
    assert "of 2 claims in 1 experiment" in body
    page = html.read_text()
    assert "tiny / fast" in page and "step: optimizer: plain -&gt; normalized" in page


def test_rates_figure_from_the_tiny_run(tiny_run, tmp_path):
    from docutils.core import publish_parts

    from attnsvm.report.draw import make_figure
    from attnsvm.sweep.summary import summarize

    _, plan = tiny_run
    sweep = xr.open_zarr(plan.paths.sweep("tiny")).load()
    summary = summarize(sweep)
    pdf, png, cap = tmp_path / "r.pdf", tmp_path / "r.png", tmp_path / "r.caption.rst"
    make_figure("rates", sweep, summary, pdf, png, cap)
    assert pdf.stat().st_size > 1000 and png.stat().st_size > 1000
    text = cap.read_text()
    mean = float(summary["rate_corr_mean"].sel(optimizer="normalized"))
    assert f"optimizer = normalized: {mean:.3g}" in text
    publish_parts(text, writer="html", settings_overrides={"halt_level": 2})


def _shipped(experiment: str) -> dict:
    """The claims of ``experiment`` in config/config.yaml, by name."""
    raw = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    return {c["name"]: c for c in raw["experiments"][experiment]["claims"]}


def _planted(axis: str, values: list, columns: dict[str, list[float]], seeds: int = 8):
    """A sweep with one grid axis whose per-cell variables are ``columns[name][i]`` at value
    i, plus noise of 0.002 (flags stay exact), every SVM certified."""
    rng = np.random.default_rng(3)
    dims, shape = (axis, "seed"), (len(values), seeds)
    data = {"status": (dims, np.zeros(shape, np.int8))}
    for name, means in columns.items():
        flag = name == "saturated"
        noise = 0.0 if flag else rng.normal(0, 0.002, shape)
        data[name] = (dims, np.broadcast_to(np.asarray(means, float)[:, None], shape) + noise)
    svms = sorted({n.split("_", 1)[1] for n in columns if n.startswith(("corr_", "mratio_"))})
    data["svm_status"] = ((*dims, "svm"), np.zeros((*shape, len(svms)), np.int8))
    coords = {axis: values, "seed": np.arange(seeds), "svm": svms}
    return xr.Dataset(data, coords=coords, attrs={"axes": [axis]})


def test_issue_29_claims_on_known_data():
    """The claims issue 29 added to config/config.yaml, on planted data: Adam's max-entry lead
    at small beta_2 and its fall at 0.999, the spectral margin ratio's lead and its rise from
    normalized GD, and saturation without the ridge: PASS on the truth they state, FAIL on
    its opposite."""
    others = ("fro", "nuc", "l1p5", "l3")
    adam = _shipped("b10_adam_betas")

    def betas(lead_095, lead_0999):
        cols = {f"corr_{n}_alpha": [0.9, 0.9] for n in others}
        cols["corr_max_alpha"] = [0.4 + lead_095, 0.4 + lead_0999]
        cols = {k: [v - 0.5 if k != "corr_max_alpha" else v for v in vs] for k, vs in cols.items()}
        return _planted("adam_beta2", [0.95, 0.999], cols, seeds=150)

    # a mean lead on [-2, 2]: valid for every distribution there, so 150 seeds and a lead of 0.5
    for truth, verdict in ((betas(0.5, -0.5), "PASS"), (betas(-0.5, 0.5), "FAIL")):
        for name in ("adam_small_beta2_prefers_max", "adam_max_lead_falls_with_beta2"):
            (claim,) = claims({k: v for k, v in adam[name].items() if k != "figure"})
            assert evaluate_claim(truth, claim, "x")["verdict"] == verdict, (name, verdict)
    norms = _shipped("b10_norms")

    def spectral(spec_normalized, spec_spectral):
        cols = {f"mratio_{n}_alpha": [0.7, 0.7] for n in (*others, "max")}
        cols["mratio_spec_alpha"] = [spec_normalized, spec_spectral]
        return _planted("optimizer", ["normalized", "spectral"], cols)

    for truth, verdict in ((spectral(0.6, 0.8), "PASS"), (spectral(0.8, 0.6), "FAIL")):
        for name in ("spectral_prefers_spec_margin", "spectral_margin_above_normalized"):
            (claim,) = claims({k: v for k, v in norms[name].items() if k != "figure"})
            assert evaluate_claim(truth, claim, "x")["verdict"] == verdict, (name, verdict)
    ridge = _shipped("b11_joint_head_noridge")["kq_trained_head_saturates_without_ridge"]
    (claim,) = claims({k: v for k, v in ridge.items() if k != "figure"})
    for share, verdict in ((1.0, "PASS"), (0.0, "FAIL")):
        truth = _planted("d", [8], {"saturated": [share]}, seeds=6)
        truth = truth.expand_dims(train_head=[True]).transpose("d", "train_head", "seed", ...)
        truth.attrs["axes"] = ["d", "train_head"]
        assert evaluate_claim(truth, claim, "x")["verdict"] == verdict, (share, verdict)
