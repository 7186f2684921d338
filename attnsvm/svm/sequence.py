"""Sequence and causal attention (docs/science.md §4, "Sequence / causal extension").

Every token k of an example X_i is a query ``z_ik = x_ik`` and attends over ``A(k)``: all T
tokens (``attention="sequence"``) or ``{0..k}`` (``attention="causal"``, 0-based). The output
of query k is ``f_ik = v^T r_ik`` with the linear head, the label is the example's ``Y_i``
for every query, and the logistic loss is averaged over the n T (example, query) pairs.

This is cross-attention on an *expanded* dataset of n T examples, example ``i T + k`` having
tokens ``X_i``, query ``x_ik`` and label ``Y_i``, plus (causal only) a mask that keeps
tokens ``t <= k``. :func:`expand` builds it, so training, SVMs and metrics reuse the
cross-attention code unchanged; the expanded Att-SVM constraints, restricted to the mask,
are exactly :func:`attnsvm.svm.constraints.sequence_constraints` in the same row order.
"""

from __future__ import annotations

import numpy as np

from attnsvm.gd.data import Dataset
from attnsvm.svm.constraints import Constraints, att_svm_constraints

SEQUENCE_ATTENTIONS = ("sequence", "causal")


def expand(ds: Dataset, causal: bool) -> tuple[Dataset, np.ndarray | None]:
    """The expanded dataset (n T examples, row ``i T + k`` = query k of example i) and mask.

    Returns ``(Dataset(X (nT, T, d), Y (nT,), Z (nT, d), v, V), mask)`` where ``mask`` is
    None for sequence attention and the (nT, T) bool ``t <= k`` for causal attention.
    """
    n, T, d = ds.X.shape
    X = np.repeat(ds.X, T, axis=0)
    Z = ds.X.reshape(n * T, d).copy()
    Y = np.repeat(ds.Y, T)
    mask = np.tile(np.tril(np.ones((T, T), dtype=bool)), (n, 1)) if causal else None
    return Dataset(X=X, Y=Y, Z=Z, v=ds.v, V=ds.V), mask


def masked_scores(gamma: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Token scores with tokens outside the attention set at -inf (no change without mask)."""
    return gamma if mask is None else np.where(mask, gamma, -np.inf)


def constraints(
    X: np.ndarray, Z: np.ndarray, alpha: np.ndarray, mask: np.ndarray | None
) -> Constraints:
    """Att-SVM constraints of the (expanded) dataset, restricted to the attention mask.

    Without a mask this is :func:`att_svm_constraints`; with one, rows of masked tokens are
    dropped (a causal query 0 attends to one token and gives no row).
    """
    cons = att_svm_constraints(X, Z, alpha)
    if mask is None:
        return cons
    return cons.subset(np.asarray(mask, dtype=bool)[cons.example, cons.token])
