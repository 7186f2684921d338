"""The one table of what every stored variable and coordinate means (CF / xarray attributes).

Block stores, the sweep store and the summary (``docs/store.md``) take the attributes of each
variable from here (those of the grid axes, the cell fields, from the field registry
:data:`attnsvm.config.fields.FIELDS`): ``long_name`` and ``description`` always, ``units``
where one exists (``"1"`` for dimensionless ratios, ``"s"`` for seconds) and ``flag_values`` /
``flag_meanings`` for status codes (:mod:`attnsvm.codes`). Families of variables
(``corr_<svm>``, ``curve_<x>``, ``<x>_mean`` of the summary, ...) are described by pattern,
so a new SVM or metric is described as soon as its parts are. :func:`annotate` also gives
every dimension a coordinate.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # annotate() only calls methods of the Dataset it is given
    import xarray as xr

from attnsvm import codes
from attnsvm.config.fields import FIELDS

UNDESCRIBED = "no description in attnsvm.variables"
"""``description`` of a variable that this table does not know (a test forbids it)."""

#: The SVMs of a linear-head cell (``svm`` coordinate), docs/science.md section 4.
SVMS = {
    "fro_alpha": "the Frobenius Att-SVM W_mm(alpha) of GD's final selection alpha",
    "nuc_alpha": "the nuclear Att-SVM_* W_mm_*(alpha) of GD's final selection alpha",
    "fro_opt": "the Frobenius Att-SVM W_mm(opt) of the optimal tokens",
    "nuc_opt": "the nuclear Att-SVM_* W_mm_*(opt) of the optimal tokens",
    "lowrank_alpha": "the rank-m constrained nuclear Att-SVM of GD's alpha (attnsvm.svm.lowrank)",
    "max_alpha": "the max-entry Att-SVM min max_ij |W_ij| of GD's alpha (docs/science.md "
    "section 10; an LP)",
    "spec_alpha": "the spectral-norm Att-SVM of GD's alpha (section 10; an SDP)",
    "l1p5_alpha": "the entrywise l_1.5-norm Att-SVM of GD's alpha (section 10)",
    "l3_alpha": "the entrywise l_3-norm Att-SVM of GD's alpha (section 10)",
    "matching": "the SVM matching the parameterization (Frobenius for W, nuclear for KQ)",
    "svmeq": "the Gen-SVM solution W_svmeq = W_fin + C W_mm_gen",
    "mm_gen": "the max-margin part W_mm_gen of the Gen-SVM",
    "single": "the single-token Frobenius SVM of GD's alpha",
    "ntp_svm": "the NTP-SVM W_svm of the token-priority graphs (docs/science.md section 8; "
    "Frobenius for W runs, nuclear for KQ)",
    "ntp_fin": "W_fin, the loss minimizer on the reduced dataset over S_fin (section 8)",
    "ntp_pred": "W_fin + R(k) W_svm / ||W_svm||, R(k) = <W(k), W_svm> / ||W_svm|| (section 8)",
}

#: The convergence rates of a trajectory (docs/science.md section 14): name -> what decays.
RATES = {
    "corr": "1 - corr(W(k), S) with S the matching SVM of GD's final selection alpha "
    "(Frobenius for W, nuclear for KQ)",
    "mass": "the softmax mass outside GD's final selection, mean_i sum_{t != alpha_i} s_it(k) "
    "(curve_offmass)",
}
#: The scalars stored per rate: part -> (long name, units, description), ``{}`` the quantity.
RATE_PARTS: dict[str, tuple[str, str | None, str]] = {
    "": (
        "rate of {}",
        "1",
        "fitted exponent b of y(k) ~ C k^-b, y(k) = {}: least squares of log y on log k over "
        "the tail checkpoints k >= sqrt(K) (docs/science.md section 14); NaN with fewer than 5 "
        "usable checkpoints",
    ),
    "_lo": (
        "lower end of the rate of {}",
        "1",
        "lower end of the 95% t interval of the rate of {}",
    ),
    "_hi": (
        "upper end of the rate of {}",
        "1",
        "upper end of the 95% t interval of the rate of {}",
    ),
    "_points": ("checkpoints of the rate fit of {}", "1", "checkpoints used in the fit of {}"),
    "_first": ("first iteration of the rate fit of {}", None, "first checkpoint of the fit of {}"),
    "_last": ("last iteration of the rate fit of {}", None, "last checkpoint of the fit of {}"),
}

# name: (long_name, units or None, description)
_TABLE: dict[str, tuple[str, str | None, str]] = {
    # status (codes.py)
    "status": ("cell status", None, codes.__doc__ or ""),
    "message": ("error message", None, "error text of a failed or nonfinite cell, else ''"),
    "device": (
        "training device",
        None,
        "device the cell was trained on (cpu, cuda:0, ...), with ', fused loop' where the fused "
        "training loop computed it (docs/science.md section 3, Fused step)",
    ),
    "convergence": (
        "convergence type",
        None,
        "convergence type of the GD run by its selection alpha at the last iterate, the "
        "paper's rule (docs/science.md section 5): global, local, not-local; -1: not applicable "
        "(nonlinear heads, untrained or failed cells)",
    ),
    "convergence_strict": (
        "convergence type, strict rule",
        None,
        "the strict rule (docs/science.md section 5): unsaturated first, then global / local / "
        "not-local with corr >= threshold; -1: not applicable",
    ),
    # data (section 1)
    "X": ("tokens", None, "tokens x_it of example i (docs/science.md section 1)"),
    "Y": ("labels", None, "label y_i in {-1, +1} of example i (+1 for task ntp: opt)"),
    "Z": ("queries", None, "query z_i of example i"),
    "v": (
        "head vector",
        None,
        "linear head v: the fixed head, or the final v of a trained "
        "head (train_head, docs/science.md section 11)",
    ),
    "V": ("relu head matrix", None, "matrix V of the relu head (relu generator only)"),
    "alpha": (
        "selected tokens",
        None,
        "GD's selected token per example at the last checkpoint (the optimal tokens when "
        "untrained); -1: padding",
    ),
    "opt": (
        "optimal tokens",
        None,
        "opt_i = argmax_t gamma_it, the optimal token per example (task ntp: the first "
        "position holding the next-token label)",
    ),
    # trajectory (section 3)
    "W": (
        "attention weights W(k)",
        None,
        "checkpointed W(k) of GD, K(k) Q(k)^T for KQ runs (docs/science.md section 3)",
    ),
    "softmax": ("attention probabilities", "1", "softmax(X_i W z_i) at every checkpoint"),
    # SVMs (section 4)
    "svm_W": ("SVM solution", None, "solution of each SVM of coordinate svm; NaN when unsolved"),
    "svm_status": ("SVM solve status", None, "status code of each SVM solve"),
    "svm_objective": ("SVM objective", None, "norm of the SVM solution (its objective)"),
    "svm_seconds": ("SVM solve time", "s", "wall time of the SVM solve"),
    "svm_solver": ("SVM solver", None, "name of the solver that produced the solution"),
    "gen_W_mm_gen": ("Gen-SVM max-margin part", None, "W_mm_gen of the Gen-SVM (section 4)"),
    "gen_W_fin": ("Gen-SVM finite part", None, "W_fin of the Gen-SVM (section 4)"),
    "gen_W_svmeq": ("Gen-SVM solution", None, "W_svmeq = W_fin + C W_mm_gen (section 4)"),
    "gen_relevant": ("relevant tokens", None, "1 for the tokens of the relevant set O_i"),
    "gen_C": ("Gen-SVM scale", None, "the constant C of W_svmeq = W_fin + C W_mm_gen"),
    "gen_status": ("Gen-SVM solve status", None, "status code of the mm_gen and fin solves"),
    # scalars (section 5)
    "alpha_is_opt": ("alpha = opt", None, "1 if GD selects the optimal token of every example"),
    "saturated": ("softmax saturated", None, "1 if the final softmax is saturated (section 5)"),
    "corr_converged": (
        "corr converged",
        None,
        "1 if corr(W_GD, SVM(alpha)) >= corr_threshold (a convergence diagnostic, section 5)",
    ),
    "locally_optimal": (
        "locally optimal selection",
        None,
        "1 if GD's selection alpha is locally optimal (section 5)",
    ),
    "softmax_mass": ("softmax mass", "1", "mean final softmax probability of alpha"),
    "loss": ("final loss", None, "training loss at the last checkpoint"),
    "wnorm": ("final norm", None, "||W(k)||_F at the last checkpoint"),
    "rank_gd": ("rank of W_GD", None, "rank of the final W (relative tolerance rank_tol)"),
    "erank_gd": ("effective rank of W_GD", None, "exp of the entropy of its singular values"),
    "svm_margin": ("SVM margin", None, "1 / ||W_mm(alpha)||_F"),
    "support_share": (
        "support-vector share",
        "1",
        "share of non-selected tokens that are support vectors of W_mm(alpha)",
    ),
    "all_support": ("all tokens support vectors", None, "1 if support_share is 1"),
    "max_masked_prob": (
        "largest masked probability",
        "1",
        "largest final softmax probability outside the relevant set",
    ),
    "n_relevant": ("relevant tokens per example", None, "mean size of the relevant set O_i"),
    "ambiguous": (
        "ambiguous softmax",
        None,
        "1 if the final softmax has entries in (1e-6, relevant_tol)",
    ),
    "status_mm_gen_feasible": ("W_mm_gen feasible", None, "1 if the Gen-SVM max-margin part is"),
    "lowrank_gap": (
        "rank-m excess",
        "1",
        "relative excess of the rank-m objective over the convex bound (0: certified)",
    ),
    "lowrank_certified": ("rank-m certified", None, "1 if the rank-m solution reaches the bound"),
    "lowrank_agree": ("agreeing restarts", None, "restarts within 1e-4 of the best objective"),
    # weight decay (section 4, "Weight decay"; attnsvm.gd.weight_decay)
    "prox_residual_nuc": (
        "nuclear prox residual",
        "1",
        "||W - prox(W - G / lambda)||_F / max(||W||_F, ||G / lambda||_F) at the final W, the "
        "prox of ||.||_* with rank <= m (KQ; none for W), G the unregularized loss gradient: "
        "0 iff W is stationary for L(W) + lambda ||W||_* (section 4, weight decay)",
    ),
    "prox_residual_fro": (
        "Frobenius prox residual",
        "1",
        "||W + G / lambda||_F / (2 max(||W||_F, ||G / lambda||_F)) at the final W, G the "
        "unregularized loss gradient: 0 iff W is stationary for L(W) + (lambda / 2) ||W||_F^2, "
        "at most 1 (section 4, weight decay)",
    ),
    # next-token prediction (section 8)
    "fin_dist": (
        "distance to W_fin",
        None,
        "||Pi_{S_fin} W(k) - W_fin||_F, the finite part's distance to W_fin (section 8); "
        "NaN for acyclic graphs (S_fin = {0})",
    ),
    "fin_dist_rel": ("relative distance to W_fin", "1", "fin_dist / ||W_fin||_F (NaN if 0)"),
    "scc_mass": (
        "softmax mass on the label's SCC",
        "1",
        "mean over sequences of the softmax mass on the tokens in the label's SCC",
    ),
    "ntp_graphs": ("priority graphs", "1", "distinct last tokens k, one graph G^(k) each"),
    "ntp_edges": ("graph edges", "1", "distinct edges (k, i, j) of all priority graphs"),
    "ntp_cyclic_sccs": ("cyclic SCCs", "1", "SCCs with more than one token, over all graphs"),
    "ntp_largest_scc": ("largest SCC", "1", "tokens in the largest SCC (1: acyclic)"),
    "ntp_cyclic_tokens": ("tokens in cyclic SCCs", "1", "sum of the sizes of the cyclic SCCs"),
    "ntp_eq_rows": ("equality rows", "1", "NTP-SVM rows inside an SCC (== 0)"),
    "ntp_ineq_rows": ("margin rows", "1", "NTP-SVM rows between SCCs (>= 1)"),
    "ntp_acyclic": ("acyclic graphs", None, "1 if every priority graph is acyclic"),
    # multi-head attention (section 12)
    "head_alpha": ("selected tokens of head h", None, "argmax_t s_iht at the last checkpoint"),
    "head_alpha_is_opt": ("head h selects opt", None, "1 if head h selects opt everywhere"),
    "head_locally_optimal": ("head h locally optimal", None, "1 if alpha_h is locally optimal"),
    "head_corr": (
        "final corr of head h with its SVM",
        "1",
        "corr(W_h, SVM(alpha_h)): Frobenius Att-SVM for W runs, nuclear for KQ (section 12)",
    ),
    "head_curve_corr": ("corr of head h with its SVM", "1", "head_corr at every checkpoint"),
    "head_wnorm": ("final norm of head h", None, "||W_h||_F at the last checkpoint"),
    "head_svm_objective": ("objective of head h's SVM", None, "norm of SVM(alpha_h)"),
    "head_W": ("final W_h", None, "W_h (K_h Q_h^T for KQ) at the last checkpoint"),
    "head_svm_W": ("SVM of head h", None, "SVM(alpha_h) of head h's own selection; NaN unsolved"),
    "head_corr_min": ("smallest head corr", "1", "min over heads of head_corr (section 12)"),
    "head_corr_mean": ("mean head corr", "1", "mean over heads of head_corr (section 12)"),
    "head_agreement": (
        "head agreement",
        "1",
        "share of examples on which every head selects the same token (section 12)",
    ),
    "head_global_share": ("heads selecting opt", "1", "share of heads with alpha_h = opt"),
    # trained head (section 11)
    "corr_v": (
        "corr with the max-margin head",
        "1",
        "corr(v, v_mm) = <v, v_mm> / (||v|| ||v_mm||) with v_mm the hard-margin SVM of the "
        "attended tokens x_{i,alpha_i} with labels Y_i (docs/science.md section 11); NaN when "
        "they are not separable",
    ),
    "vmm_feasible": (
        "max-margin head feasible",
        None,
        "1 if the attended tokens are linearly separable through the origin (v_mm certified), "
        "0 if not, NaN if not solved",
    ),
    "vmm_margin": ("max-margin head margin", None, "1 / ||v_mm||, the largest margin"),
    "v_margin": (
        "GD head margin",
        None,
        "min_i Y_i v^T x_{i,alpha_i} / ||v|| of the final head v (section 11)",
    ),
    "vnorm": ("head norm", None, "||v(k)|| of the trained head"),
    "alpha_is_opt_init": (
        "alpha = opt of the initial head",
        None,
        "1 if GD's selection is the optimal selection of the initial head v(0) (section 11)",
    ),
    "offmass": (
        "softmax mass outside the selection",
        "1",
        "mean_i sum_{t != alpha_i} s_it with alpha GD's final selection (docs/science.md "
        "section 14), summed directly (exact far below 1e-16)",
    ),
    # generalization and label noise (section 15; cells with n_test > 0)
    "test_loss": ("test loss", None, "logistic loss of the trained model on the test sample"),
    "test_err": (
        "test error",
        "1",
        "share of test examples with Y_i f_i <= 0 (test labels flipped like the training ones)",
    ),
    "test_flip_share": ("test flip share", "1", "share of the test sample's labels flipped"),
    "test_excess": (
        "excess test error",
        "1",
        "test_err - test_flip_share, the excess over the test sample's flipped share; the "
        "best possible is the Bayes error (test_err_bayes), above the flip share at low SNR",
    ),
    "train_err": ("training error", "1", "share of training examples with Y_i f_i <= 0"),
    "flip_share": ("flip share", "1", "share of the training labels flipped"),
    "flip_fit": (
        "flipped labels fit",
        "1",
        "share of the flipped training labels the model fits (Y_i f_i > 0); NaN if none",
    ),
    "test_err_svm": (
        "test error of the SVM direction",
        "1",
        "test error of attention along W_mm(alpha) at infinite norm (hard selection)",
    ),
    "test_err_mm": (
        "test error of the max-margin interpolator",
        "1",
        "test error of attention along W_mm(opt), the Att-SVM of the stored (flipped) labels' "
        "optimal tokens, at infinite norm (section 15); NaN when it is infeasible",
    ),
    "test_excess_mm": (
        "excess test error of the interpolator",
        "1",
        "test_err_mm - test_flip_share (> 0: harmful overfitting, section 15)",
    ),
    "gd_mm_gap": ("GD - interpolator test error", "1", "test_err - test_err_mm"),
    "bayes_err": (
        "Bayes error",
        "1",
        "the token model's Bayes error, p + (1 - 2p) Phi(-snr sqrt(d/2)) for signal_noise "
        "(label_flip p), Phi(-||mu|| sqrt((1 + 2 rho^2) / 2)) for weakly_relevant (clean test "
        "labels), p for magen, 1/2 where labels are independent of the tokens (section 15)",
    ),
    "test_err_bayes": (
        "test error of the Bayes classifier",
        "1",
        "test error of the Bayes-optimal classifier, sign(v^T x_0) of the signal token "
        "(signal_noise), sign of <x_1 + rho x_2 - rho x_3, e_1 - e_2> (weakly_relevant), the "
        "clean label, which the tokens determine (magen), +1 where labels are independent of "
        "the tokens, on the test sample",
    ),
    "flip_fit_bayes": (
        "flipped labels the Bayes classifier fits",
        "1",
        "share of the flipped training labels the Bayes-optimal classifier fits (where it "
        "misses the clean label); NaN if none is flipped",
    ),
    "train_err_mm": (
        "training error of the max-margin interpolator",
        "1",
        "share of training labels that attention along W_mm(opt) at infinite norm does not "
        "fit: 0 where it interpolates, > 0 where an example has no token of positive score",
    ),
    "test_err_minnorm": (
        "test error of the min-norm interpolator",
        "1",
        "magen: test error of Magen et al.'s min-norm interpolator of (v, p) at infinite "
        "attention norm (section 15, eq. (15.13)); NaN when no candidate is realizable",
    ),
    "train_err_minnorm": (
        "training error of the min-norm interpolator",
        "1",
        "magen: share of training labels the min-norm interpolator does not fit (0: it "
        "interpolates)",
    ),
    "minnorm_benign": (
        "min-norm selection benign",
        "1",
        "magen: 1 where the min-norm interpolator's selection is the benign one (each signal "
        "serves its clean examples, the flipped ones attend to their noise token)",
    ),
    "minnorm_vnorm": (
        "min-norm head norm",
        None,
        "magen: ||v_mm|| of the min-norm interpolator (section 15, eq. (15.13))",
    ),
    "fit_iteration": (
        "iteration of the fit",
        None,
        "first checkpoint iteration with the run's smallest training error (section 15)",
    ),
    "test_err_at_fit": (
        "test error at the fit",
        "1",
        "test error at fit_iteration; test_err_at_fit - test_err > 0: delayed generalization",
    ),
    "overfit_iteration": (
        "iteration of the overfitting",
        None,
        "first checkpoint iteration with training error 0, every flipped label fit; the last "
        "checkpoint where none (weakly_relevant, section 15)",
    ),
    "test_err_at_overfit": (
        "test error at the overfitting",
        "1",
        "test error at overfit_iteration; test_err_at_overfit - test_err > 0: generalization "
        "acquired after the overfitting (weakly_relevant, section 15)",
    ),
    "curve_radius": ("radius R", None, "radius of the regularization path at this checkpoint"),
    "curve_gd_margin": (
        "GD margin",
        None,
        "min constraint value of W(k) / ||W(k)||_F (Att-SVM constraints of alpha)",
    ),
    "curve_softmax_mass": ("softmax mass", "1", "mean softmax probability of alpha vs k"),
    "curve_loss": ("loss", None, "training loss vs checkpoint"),
    "curve_wnorm": ("norm", None, "||W(k)||_F vs checkpoint"),
    # summary counts
    "count_status": ("cells per status", "1", "number of seeds per cell status"),
    "count_convergence": ("runs per convergence type", "1", "number of seeds per type"),
    "share_convergence": (
        "share per convergence type",
        "1",
        "share among the seeds that have a convergence type",
    ),
    "count_convergence_strict": (
        "runs per convergence type (strict rule)",
        "1",
        "number of seeds per type of the strict rule",
    ),
    "share_convergence_strict": (
        "share per convergence type (strict rule)",
        "1",
        "share among the seeds that have a type of the strict rule",
    ),
    "count_svm_status": ("SVM solves per status", "1", "number of seeds per SVM status"),
}

#: The range of values each per-cell scalar can take (docs/science.md §13): a mean's interval
#: is valid for every distribution on it, so a claim may state a mean only of a variable with
#: a finite range. Flags and shares lie in [0, 1]; correlations (``corr_<svm>``,
#: ``head_corr*``, ``corr_v``) in [-1, 1]. A variable not here (a norm, a loss, a rank, a
#: margin ratio, a rate) has no finite range: state a median, a quantile or a share of it.
UNIT = (0.0, 1.0)
RANGES: dict[str, tuple[float, float]] = {
    **dict.fromkeys((
        "alpha_is_opt", "saturated", "corr_converged", "locally_optimal", "softmax_mass",
        "support_share", "all_support", "max_masked_prob", "ambiguous",
        "status_mm_gen_feasible", "lowrank_certified", "prox_residual_fro", "scc_mass",
        "ntp_acyclic", "head_alpha_is_opt", "head_locally_optimal", "head_agreement",
        "head_global_share", "vmm_feasible", "alpha_is_opt_init", "offmass", "test_err",
        "test_flip_share", "train_err", "flip_share", "flip_fit", "test_err_svm",
        "test_err_mm", "bayes_err", "test_err_bayes", "flip_fit_bayes", "train_err_mm",
        "test_err_minnorm", "train_err_minnorm", "minnorm_benign", "test_err_at_fit",
        "test_err_at_overfit",
    ), UNIT),
    **dict.fromkeys(("test_excess", "test_excess_mm", "gd_mm_gap"), (-1.0, 1.0)),
    **dict.fromkeys(("head_corr", "head_corr_min", "head_corr_mean", "corr_v"), (-1.0, 1.0)),
}  # fmt: skip


def value_range(name: str) -> tuple[float, float] | None:
    """The finite range ``(lower, upper)`` of the per-cell scalar ``name`` (:data:`RANGES`;
    ``corr_<svm>`` in [-1, 1], ``feasible_<svm>`` in [0, 1]), or None where it has none."""
    if name in RANGES:
        return RANGES[name]
    for prefix, bounds in (("corr_", (-1.0, 1.0)), ("feasible_", UNIT)):
        if name.startswith(prefix) and name[len(prefix) :] in SVMS:
            return bounds
    return None


#: Coordinates: (long_name, units or None, description).
COORDS: dict[str, tuple[str, str | None, str]] = {
    "cell": ("cell", None, "position of the cell in its block"),
    "seed": ("seed", None, "random seed of data and initialization"),
    "checkpoint": ("checkpoint", None, "index of the checkpoint (a radius for regpath)"),
    "iteration": ("iteration k", None, "GD iteration of the checkpoint"),
    "example": ("example i", None, "example index (n T (example, query) pairs for sequence)"),
    "token": ("token t", None, "token index"),
    "row": ("row", None, "row of a d x d matrix"),
    "col": ("column", None, "column of a d x d matrix"),
    "feature": ("feature", None, "coordinate of a d-dimensional vector"),
    "feature2": ("feature (second)", None, "second coordinate of the relu head's V"),
    "svm": ("SVM", None, "which SVM: " + "; ".join(f"{k}: {v}" for k, v in list(SVMS.items())[:4])),
    "gen_svm": ("Gen-SVM part", None, "mm_gen: max-margin part; fin: finite part"),
    "status": ("cell status", None, "ok, nonfinite, failed, missing (docs/store.md)"),
    "convergence": ("convergence type", None, "global, local, not-local (by GD's selection)"),
    "convergence_strict": (
        "convergence type, strict rule",
        None,
        "global, local, not-local, unsaturated (unsaturated first, then corr >= threshold)",
    ),
    "svm_status": ("SVM status", None, " ".join(codes.SVM_STATUS)),
    "attention_head": ("attention head h", None, "head h of a multi-head cell (section 12)"),
}

#: grid axes: every cell field, described by its registry entry
COORDS.update({f.name: (f.long_name, f.units, f.doc) for f in FIELDS})

_FLAGS = {
    "status": codes.CELL_STATUS,
    "svm_status": codes.SVM_STATUS,
    "gen_status": codes.SVM_STATUS,
    "convergence": codes.CONVERGENCE,
    "convergence_strict": codes.CONVERGENCE_STRICT,
}

_SUMMARY_STATS = {
    "mean": ("mean of {}", "mean over seeds of {} (finite values of ok cells)"),
    "std": ("std of {}", "standard deviation (ddof=1) over seeds of {}"),
    "sem": ("standard error of {}", "std / sqrt(count) over seeds of {}"),
    "count": ("seeds with a value of {}", "number of seeds with a finite value of {}"),
    "sum": ("sum of {}", "number of seeds where {} is 1"),
}


_RATE_NAME = re.compile(
    "rate_(" + "|".join(RATES) + ")(" + "|".join(re.escape(p) for p in RATE_PARTS if p) + "|)"
)


def _family(name: str) -> tuple[str, str | None, str] | None:
    """Attributes of a variable named by pattern (``corr_<svm>``, ``curve_<x>`` ...)."""
    for prefix, long, units, text in (
        ("corr_", "final corr with {}", "1", "corr(W_GD, S) = <W, S> / (||W||_F ||S||_F) for S "),
        ("rank_", "rank of {}", None, "rank (relative tolerance rank_tol; -1: no solution) of "),
        ("erank_", "effective rank of {}", None, "exp of the singular-value entropy of "),
        ("objective_", "objective of {}", None, "norm of "),
        ("feasible_", "{} feasible", None, "1 if feasible: "),
        (
            "mratio_",
            "margin ratio to {}",
            "1",
            "margin of W_GD's direction in the norm of S over S's margin (1: W_GD is a "
            "max-margin direction in that norm; docs/science.md section 10) for S ",
        ),
    ):
        if name.startswith(prefix) and name[len(prefix) :] in SVMS:
            key = name[len(prefix) :]
            return long.format(key), units, text + SVMS[key]
    if name.startswith("curve_"):
        inner = describe(name[len("curve_") :])
        if inner.get("description") != UNDESCRIBED:
            # a curve holds the value at every checkpoint (its dimension says so), not the
            # final one: "corr with fro_alpha", plotted against the iteration
            return (
                inner["long_name"].replace("final ", ""),
                inner.get("units"),
                f"{inner['description']}, at every checkpoint",
            )
    m = _RATE_NAME.fullmatch(name)
    if m:
        long, units, text = RATE_PARTS[m.group(2)]
        return long.format(m.group(1)), units, text.format(RATES[m.group(1)])
    m = re.fullmatch(r"seconds_(\w+)", name)
    if m:
        return f"time of stage {m.group(1)}", "s", f"wall seconds of the {m.group(1)} stage"
    return None


def describe(name: str) -> dict[str, Any]:
    """CF attributes of the variable ``name`` (block, sweep or summary store)."""
    attrs: dict[str, Any]
    if name in _TABLE:
        long, units, text = _TABLE[name]
    elif (fam := _family(name)) is not None:
        long, units, text = fam
    elif (m := re.fullmatch(r"(\w+)_(mean|std|sem|count|sum)", name)) and (
        (base := describe(m.group(1)))["description"] != UNDESCRIBED
    ):
        long_t, text_t = _SUMMARY_STATS[m.group(2)]
        long, text = long_t.format(base["long_name"]), text_t.format(base["long_name"])
        units = "1" if m.group(2) in ("count", "sum") else base.get("units")
        attrs = {"long_name": long, "description": f"{text} ({m.group(1)}: {base['description']})"}
        if units:
            attrs["units"] = units
        return attrs
    elif name in COORDS:
        long, units, text = COORDS[name]
    else:
        return {"long_name": name, "description": UNDESCRIBED}
    attrs = {"long_name": long, "description": text.strip()}
    if units:
        attrs["units"] = units
    if name in _FLAGS:
        attrs.update(codes.flag_attrs(_FLAGS[name]))
        attrs["description"] = text.strip()
    return attrs


def describe_coord(name: str) -> dict[str, Any]:
    """CF attributes of the coordinate ``name``."""
    if name in COORDS:
        long, units, text = COORDS[name]
        return {"long_name": long, "description": text, **({"units": units} if units else {})}
    return {"long_name": name, "description": UNDESCRIBED}


def annotate(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with CF attributes on every variable and coordinate, and a coordinate per dim.

    A dimension without a coordinate gets the integer index ``0 .. size-1``. Existing
    attributes are kept where this table has none (e.g. ``columns`` of ``gen_status``).
    """
    missing = {d: np.arange(n, dtype=np.int64) for d, n in ds.sizes.items() if d not in ds.coords}
    ds = ds.assign_coords(missing)
    for name, var in ds.data_vars.items():
        var.attrs = {**var.attrs, **describe(str(name))}
    for name, coord in ds.coords.items():
        coord.attrs = {**coord.attrs, **describe_coord(str(name))}
    return ds


def netcdf_attr(value: Any) -> Any:
    """``value`` as a NetCDF attribute (no bool, None, dict or mixed list there)."""
    if isinstance(value, bool):
        return int(value)
    if value is None:
        return "null"
    if isinstance(value, (int, float, str, np.integer, np.floating)):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
    ):
        return list(value)
    return json.dumps(value)


def fixed_attrs(fixed: dict[str, Any]) -> dict[str, Any]:
    """One attribute ``fixed_<key>`` per fixed setting of an experiment."""
    return {f"fixed_{k}": v for k, v in fixed.items()}
