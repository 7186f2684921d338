"""Magen et al.'s min-norm (max-margin) interpolator of (v, p) at infinite attention norm
(docs/science.md §15, "Magen et al.'s own setting", eq. (15.13)) on their token model
(:mod:`attnsvm.gd.magen`): the minimum over the selections some p realizes of the max-margin
head of the selected tokens (:mod:`attnsvm.svm.head`), p the Att-SVM of that selection.
"""

from __future__ import annotations

import itertools

import numpy as np

from attnsvm.gd.magen import NOISE_TOKEN, SIGNAL_TOKEN, bayes_labels
from attnsvm.svm.constraints import att_svm_constraints
from attnsvm.svm.frobenius import solve_frobenius
from attnsvm.svm.head import head_svm


def candidate_selections(X: np.ndarray, Y: np.ndarray) -> list[tuple[tuple[str, str], np.ndarray]]:
    """The selections among which the min-norm interpolator's lies (docs/science.md §15, eq.
    (15.13)): for each class c the signal ``mu_c`` serves its clean examples, its flipped ones,
    or none; every example it does not serve attends to its noise token. Returns
    ``((role of class +, role of class -), alpha (n,))`` for the 9 choices."""
    cls = np.where(bayes_labels(X) > 0, 1.0, -1.0)  # the clean label: which signal it carries
    out = []
    for roles in itertools.product(("clean", "flipped", "none"), repeat=2):
        alpha = np.full(len(Y), NOISE_TOKEN)
        for c, role in zip((1.0, -1.0), roles, strict=True):
            if role == "none":
                continue
            wanted = Y == c if role == "clean" else Y == -c
            alpha[(cls == c) & wanted] = SIGNAL_TOKEN
        out.append((roles, alpha))
    return out


def min_norm_interpolator(X: np.ndarray, Y: np.ndarray, Z: np.ndarray) -> dict | None:
    """Magen et al.'s min-norm (max-margin) interpolator at infinite attention norm (docs/
    science.md §15, eq. (15.13)): ``v_mm = argmin ||v||`` s.t. ``Y_i v^T x_{i,alpha_i} >= 1``,
    minimized over the selections ``alpha`` that some p realizes (``x_{i,alpha_i}^T p >
    x_{i,t}^T p``); p is the Frobenius Att-SVM of that selection (``W = p z^T``).

    The minimum over all 2^n selections is one of :func:`candidate_selections`: the signals
    and the noise are orthogonal, so ``||v||^2`` splits into a signal part (``1 / snr^2`` per
    class signal used, each serving one sign of label) and the noise tokens' SVM, which only
    grows with the set of examples it must fit. Returns ``{"v", "W", "alpha", "roles",
    "vnorm"}`` or None when no candidate is realizable and separable.
    """
    best = None
    for roles, alpha in candidate_selections(X, Y):
        v, res = head_svm(X, Y, alpha)
        if v is None:
            continue
        norm = float(np.linalg.norm(v))
        if best is not None and norm >= best["vnorm"]:
            continue
        att = solve_frobenius(att_svm_constraints(X, Z, alpha))
        if not att.solved:
            continue
        best = {"v": v, "W": att.W, "alpha": alpha, "roles": roles, "vnorm": norm}
    return best
