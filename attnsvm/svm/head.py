"""The max-margin classifier of the attended tokens (docs/science.md §11).

For a trained linear head, the prediction is that v aligns with the hard-margin SVM (no bias)
of the tokens GD attends to, ``x_{i,alpha_i}`` with labels ``Y_i``:

    v_mm = argmin ||v||  s.t.  Y_i v^T x_{i,alpha_i} >= 1   for every i.

It is the Att-SVM machinery of §4 with ``W = v e_1^T``: the rows ``left_i = Y_i x_{i,alpha_i}``,
``right_i = e_1`` constrain the first column of W only, so the minimum-Frobenius-norm W is
``v_mm e_1^T`` and :func:`attnsvm.svm.frobenius.solve_frobenius` solves and certifies it.
"""

from __future__ import annotations

import numpy as np

from attnsvm.svm.constraints import Constraints
from attnsvm.svm.frobenius import SVMResult, solve_frobenius


def head_constraints(X: np.ndarray, Y: np.ndarray, alpha: np.ndarray) -> Constraints:
    """Rows ``(Y_i x_{i,alpha_i})^T W e_1 >= 1`` of :func:`head_svm` (docs/science.md §11)."""
    n, _, d = X.shape
    i = np.arange(n)
    right = np.zeros((n, d))
    right[:, 0] = 1.0
    return Constraints(
        left=Y[:, None] * X[i, alpha],
        right=right,
        rhs=np.ones(n),
        equality=np.zeros(n, dtype=bool),
        example=i,
        token=np.asarray(alpha, dtype=np.int64),
    )


def head_svm(
    X: np.ndarray, Y: np.ndarray, alpha: np.ndarray
) -> tuple[np.ndarray | None, SVMResult]:
    """``(v_mm, result)``: the max-margin head of the tokens ``alpha`` (docs/science.md §11).

    ``v_mm`` (d,) is the first column of the certified Frobenius solution, None when the
    attended tokens are not linearly separable through the origin (status ``infeasible``) or
    the answer is not certified (``result.solved`` False).
    """
    res = solve_frobenius(head_constraints(X, Y, alpha))
    return (res.W[:, 0].copy() if res.solved else None), res
