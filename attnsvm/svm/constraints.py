"""Linear constraints of the attention SVMs (docs/science.md §4), built with numpy only.

Every SVM constraint has the form ``left_k^T W right_k (>= | ==) rhs_k``: it is linear in
``vec(W)`` with the row ``vec(left_k right_k^T)``. The builders here produce all rows at once
with fancy indexing (never a Python loop per (i, t) pair, docs/science.md §7).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Constraints:
    """Linear constraints on W: ``left[k]^T W right[k]`` (>= rhs[k], or == rhs[k] if equality[k]).

    ``example[k]`` is the example i of row k, ``token[k]`` the non-selected token t (or tau) of
    the row. Optional extras: ``selected[k]`` the selected / reference token (alpha_i, or the
    reference relevant token of a Gen-SVM row) and ``query[k]`` the query token k of a
    sequence / causal row (None for cross-attention).
    """

    left: np.ndarray  # (N, d)
    right: np.ndarray  # (N, d)
    rhs: np.ndarray  # (N,)
    equality: np.ndarray  # (N,) bool
    example: np.ndarray  # (N,) int
    token: np.ndarray  # (N,) int
    selected: np.ndarray | None = None  # (N,) int
    query: np.ndarray | None = None  # (N,) int

    @property
    def n_rows(self) -> int:
        """Number of constraint rows N."""
        return int(self.rhs.shape[0])

    @property
    def d(self) -> int:
        """Dimension d of W (d x d)."""
        return int(self.left.shape[1])

    def values(self, W: np.ndarray) -> np.ndarray:
        """``left_k^T W right_k`` for every row k: shape (N,), or (..., N) for stacked W."""
        W = np.asarray(W, dtype=np.float64)
        return np.einsum("...ke,ke->...k", self.left @ W, self.right)

    def matrix(self) -> np.ndarray:
        """Constraint matrix A (N, d*d) with rows ``vec(left_k right_k^T)`` (row-major vec).

        ``A @ W.ravel() == values(W)``.
        """
        N, d = self.left.shape
        return (self.left[:, :, None] * self.right[:, None, :]).reshape(N, d * d)

    def subset(self, mask: np.ndarray) -> Constraints:
        """The rows selected by a boolean mask (or index array)."""
        return Constraints(
            left=self.left[mask],
            right=self.right[mask],
            rhs=self.rhs[mask],
            equality=self.equality[mask],
            example=self.example[mask],
            token=self.token[mask],
            selected=None if self.selected is None else self.selected[mask],
            query=None if self.query is None else self.query[mask],
        )

    def with_rhs(self, rhs: np.ndarray) -> Constraints:
        """Same rows with a new right-hand side."""
        rhs = np.asarray(rhs, dtype=np.float64)
        if rhs.shape != self.rhs.shape:
            raise ValueError(f"rhs shape {rhs.shape} != {self.rhs.shape}")
        return Constraints(
            self.left, self.right, rhs, self.equality, self.example, self.token,
            self.selected, self.query,
        )  # fmt: skip


def concatenate(*parts: Constraints) -> Constraints:
    """Stack the rows of several constraint sets (same d)."""
    parts = tuple(p for p in parts if p is not None)
    if not parts:
        raise ValueError("concatenate needs at least one Constraints")

    def cat(name: str) -> np.ndarray | None:
        arrs = [getattr(p, name) for p in parts]
        if any(a is None for a in arrs):
            return None
        return np.concatenate(arrs)

    return Constraints(
        left=np.concatenate([p.left for p in parts]),
        right=np.concatenate([p.right for p in parts]),
        rhs=np.concatenate([p.rhs for p in parts]),
        equality=np.concatenate([p.equality for p in parts]),
        example=np.concatenate([p.example for p in parts]),
        token=np.concatenate([p.token for p in parts]),
        selected=cat("selected"),
        query=cat("query"),
    )


def _check_X(X: np.ndarray) -> np.ndarray:
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 3:
        raise ValueError(f"X must have shape (n, T, d), got {X.shape}")
    return X


def att_svm_constraints(X: np.ndarray, Z: np.ndarray, alpha: np.ndarray) -> Constraints:
    """Att-SVM constraints (docs/science.md §4, W_mm(alpha)).

    Rows ``(x_{i,alpha_i} - x_it)^T W z_i >= 1`` for every i and t != alpha_i; N = n (T-1),
    ordered by example then token.
    """
    X = _check_X(X)
    n, T, _ = X.shape
    Z = np.asarray(Z, dtype=np.float64)
    alpha = np.asarray(alpha, dtype=np.int64)
    if Z.shape != (n, X.shape[2]) or alpha.shape != (n,):
        raise ValueError(f"shapes X {X.shape}, Z {Z.shape}, alpha {alpha.shape} do not match")
    if np.any((alpha < 0) | (alpha >= T)):
        raise ValueError("alpha has a token index outside [0, T)")
    ii, tt = np.nonzero(np.arange(T)[None, :] != alpha[:, None])
    N = ii.size
    return Constraints(
        left=X[ii, alpha[ii]] - X[ii, tt],
        right=Z[ii],
        rhs=np.ones(N),
        equality=np.zeros(N, dtype=bool),
        example=ii,
        token=tt,
        selected=alpha[ii],
    )


def sequence_constraints(X: np.ndarray, alpha: np.ndarray, causal: bool) -> Constraints:
    """Sequence / causal Att-SVM constraints (docs/science.md §4, sequence extension).

    Every token k of X_i is a query (``z_ik = x_ik``) with selected token ``alpha[i, k]``:
    ``(x_{i,alpha_ik} - x_it)^T W x_ik >= 1`` for t in A(k), t != alpha_ik, where A(k) is all
    T tokens (sequential) or ``{0..k}`` (causal, 0-based). Queries whose A(k) has a single
    token (k = 0 when causal) give no rows.
    """
    X = _check_X(X)
    n, T, _ = X.shape
    alpha = np.asarray(alpha, dtype=np.int64)
    if alpha.shape != (n, T):
        raise ValueError(f"alpha must have shape (n, T) = {(n, T)}, got {alpha.shape}")
    kk = np.arange(T)
    hi = kk if causal else np.full(T, T - 1)  # A(k) = {0..hi[k]}
    if np.any((alpha < 0) | (alpha > hi[None, :])):
        raise ValueError("alpha[i, k] must lie in A(k)")
    t = np.arange(T)
    # mask[i, k, t]: t in A(k), t != alpha_ik, and |A(k)| > 1
    mask = (t[None, None, :] <= hi[None, :, None]) & (t[None, None, :] != alpha[:, :, None])
    mask &= (hi > 0)[None, :, None]
    ii, qq, tt = np.nonzero(mask)
    N = ii.size
    sel = alpha[ii, qq]
    return Constraints(
        left=X[ii, sel] - X[ii, tt],
        right=X[ii, qq],
        rhs=np.ones(N),
        equality=np.zeros(N, dtype=bool),
        example=ii,
        token=tt,
        selected=sel,
        query=qq,
    )


def gen_svm_constraints(
    X: np.ndarray, Z: np.ndarray, relevant: np.ndarray
) -> tuple[Constraints, Constraints]:
    """Gen-SVM constraints (docs/science.md §4, W_mm_gen), as ``(equalities, inequalities)``.

    ``relevant[i, t]`` marks O_i. Equalities ``(x_it - x_itau)^T W z_i = 0`` for t, tau in O_i
    are generated as the spanning set ``t = t0_i`` (the first token of O_i), tau in O_i \\ {t0_i}
    (every other pair is a difference of two of these rows, so the feasible set is the same and
    the equality block has full row rank for data in general position). Inequalities
    ``(x_it - x_itau)^T W z_i >= 1`` for every t in O_i, tau not in O_i. Equality rows have
    ``selected = t0_i, token = tau``; inequality rows ``selected = t, token = tau``.
    Use :func:`concatenate` to get the full W_mm_gen system.
    """
    X = _check_X(X)
    n, T, d = X.shape
    Z = np.asarray(Z, dtype=np.float64)
    rel = np.asarray(relevant, dtype=bool)
    if rel.shape != (n, T) or Z.shape != (n, d):
        raise ValueError(f"shapes X {X.shape}, Z {Z.shape}, relevant {rel.shape} do not match")
    if not np.all(rel.any(axis=1)):
        raise ValueError("every example needs at least one relevant token")
    t0 = np.argmax(rel, axis=1)  # first relevant token
    t = np.arange(T)
    ie, te = np.nonzero(rel & (t[None, :] != t0[:, None]))
    eq = Constraints(
        left=X[ie, t0[ie]] - X[ie, te],
        right=Z[ie],
        rhs=np.zeros(ie.size),
        equality=np.ones(ie.size, dtype=bool),
        example=ie,
        token=te,
        selected=t0[ie],
    )
    pair = rel[:, :, None] & ~rel[:, None, :]  # (i, t in O_i, tau not in O_i)
    ii, ts, tau = np.nonzero(pair)
    ineq = Constraints(
        left=X[ii, ts] - X[ii, tau],
        right=Z[ii],
        rhs=np.ones(ii.size),
        equality=np.zeros(ii.size, dtype=bool),
        example=ii,
        token=tau,
        selected=ts,
    )
    return eq, ineq
