"""Support tokens, local optimality and Gen-SVM (docs/science.md §4).

Gen-SVM is the paper's more general SVM equivalence for nonlinear heads (arXiv 2308.16898);
support tokens and local optimality are those of its locally-optimal directions.

* support tokens ``T_i(alpha) = {t != alpha_i : (x_ia - x_it)^T W_mm z_i = 1}``;
* alpha locally optimal: Att-SVM(alpha) feasible and ``gamma_{i,alpha_i} > gamma_it`` for every
  support token;
* Gen-SVM: ``W_mm_gen`` (equalities inside O_i, margins to masked tokens), ``W_fin``
  (log-ratio equalities) and ``W_svmeq = W_fin + C W_mm_gen``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

import attnsvm.svm.farkas as farkas
from attnsvm.svm.constraints import (
    Constraints,
    att_svm_constraints,
    concatenate,
    gen_svm_constraints,
)
from attnsvm.svm.frobenius import (
    VERIFY_TOL,
    SVMResult,
    independent_equalities,
    reduce,
    solve_frobenius,
    violation,
)

#: default activity tolerance of :func:`support_tokens`. The QP solutions are polished to an
#: exact active set (constraint values within ~1e-9 of the rhs) and the SDP solutions are
#: accurate to ~1e-8, while inactive margins of random data are larger by orders of magnitude;
#: 1e-5 (the Cell's ``support_tol``) sits safely between the two.
SUPPORT_TOL = 1e-5


def support_tokens(cons: Constraints, W: np.ndarray, tol: float = SUPPORT_TOL) -> np.ndarray:
    """Active rows (N,) bool: inequality rows with ``value <= rhs + tol * max(1, |rhs|)``.

    For an Att-SVM system, row k active means token ``cons.token[k]`` of example
    ``cons.example[k]`` is a support token (docs/science.md §4, ``T_i(alpha)``). Equality rows
    are always active. W must be the SVM solution (scale matters: rhs is the margin 1).
    """
    v = cons.values(W)
    active = v <= cons.rhs + tol * np.maximum(1.0, np.abs(cons.rhs))
    return active | cons.equality


def is_locally_optimal(
    cons: Constraints,
    W: np.ndarray | None,
    gamma: np.ndarray,
    alpha: np.ndarray | None = None,
    tol: float = SUPPORT_TOL,
) -> bool:
    """Local optimality of a selection (docs/science.md §4).

    True iff the SVM is feasible (W not None and satisfying the constraints to ``tol``) and
    ``gamma[i, alpha_i] > gamma[i, t]`` for every support row (i, t). ``gamma`` is (n, T);
    ``alpha`` (n,) is the selection (when None, each row's ``cons.selected`` token is used,
    which also covers sequence constraints).
    """
    if W is None or not np.all(np.isfinite(W)):
        return False
    v = cons.values(W)
    scale = tol * np.maximum(1.0, np.abs(cons.rhs))
    feasible = np.where(cons.equality, np.abs(v - cons.rhs) <= scale, v >= cons.rhs - scale)
    if not feasible.all():
        return False
    sel = cons.selected if alpha is None else np.asarray(alpha)[cons.example]
    if sel is None:
        raise ValueError("alpha is needed when the constraints carry no selected tokens")
    sup = support_tokens(cons, W, tol) & ~cons.equality
    i, t, a = cons.example[sup], cons.token[sup], sel[sup]
    return bool(np.all(gamma[i, a] > gamma[i, t]))


def min_norm_equality(cons: Constraints) -> SVMResult:
    """``W_fin = argmin ||W||_F`` s.t. the equality rows only (docs/science.md §4, Gen-SVM).

    Least squares (minimum-norm solution) on the reduced problem ``W = U_l M U_r^T``;
    inconsistent equalities give status ``infeasible`` with their checked Farkas vector (the
    part of rhs outside the rows' range; :mod:`attnsvm.svm.farkas`), ``infeasible_uncertified``
    when it does not pass. Inequality rows are ignored.
    """
    t0 = time.perf_counter()
    d = cons.d
    eq = cons.subset(cons.equality)
    if eq.n_rows == 0:
        return SVMResult(np.zeros((d, d)), "optimal", 0.0, "trivial", time.perf_counter() - t0)
    red = reduce(eq)
    A, b, resid = independent_equalities(red.A, eq.rhs)
    if resid > 1e-8:
        # the part of rhs outside the rows' range is a Farkas vector of the equalities
        r = eq.rhs - red.A @ np.linalg.lstsq(red.A, eq.rhs, rcond=None)[0]
        y, note = farkas.certify(eq, [r], red.A)
        return SVMResult(
            None, "infeasible" if y is not None else "infeasible_uncertified", float("nan"),
            "lstsq", time.perf_counter() - t0,
            f"inconsistent equalities (relative residual {resid:.1e}); {note}",
        )  # fmt: skip
    m = np.linalg.lstsq(A, b, rcond=None)[0]
    W = red.lift(m)
    # the minimum-norm solution is optimal by construction; optimal needs the rows to 1e-9
    viol = violation(eq, W)
    status = "optimal" if viol <= VERIFY_TOL else "optimal_inaccurate"
    msg = f"max relative violation {viol:.1e}"
    return SVMResult(W, status, float(np.linalg.norm(W)), "lstsq", time.perf_counter() - t0, msg)


@dataclass(frozen=True)
class GenSVMResult:
    """Gen-SVM solutions (docs/science.md §4).

    ``svmeq = W_fin + C W_mm_gen`` (None if either part is missing); ``relevant`` is O_i (n, T).
    """

    mm_gen: SVMResult
    fin: SVMResult
    svmeq: np.ndarray | None
    C: float
    relevant: np.ndarray


def gen_svm(
    X: np.ndarray,
    Z: np.ndarray,
    softmax: np.ndarray,
    W_gd: np.ndarray | None,
    relevant_tol: float = 1e-3,
) -> GenSVMResult:
    """Gen-SVM of docs/science.md §4 for a final softmax (n, T) and GD iterate W_gd.

    ``O_i = {t : s_it >= relevant_tol}`` (the argmax token is always included);
    ``W_mm_gen`` via :func:`solve_frobenius` with equalities, ``W_fin`` via
    :func:`min_norm_equality` with rhs ``log(s_it / s_itau)``, and
    ``C = <W_gd - W_fin, W_mm_gen> / ||W_mm_gen||_F^2`` (least squares; NaN without W_gd).
    When every O_i has a single token, W_fin = 0 and W_mm_gen is the plain Att-SVM of
    ``argmax_t s_it``.
    """
    X = np.asarray(X, dtype=np.float64)
    s = np.asarray(softmax, dtype=np.float64)
    n, T, d = X.shape
    relevant = s >= relevant_tol
    top = np.argmax(s, axis=1)
    relevant[np.arange(n), top] = True
    if np.all(relevant.sum(axis=1) == 1):
        mm_gen = solve_frobenius(att_svm_constraints(X, Z, top))
        fin = SVMResult(np.zeros((d, d)), "optimal", 0.0, "trivial", 0.0, "single relevant token")
    else:
        eq, ineq = gen_svm_constraints(X, Z, relevant)
        mm_gen = solve_frobenius(concatenate(eq, ineq))
        with np.errstate(divide="ignore"):
            logratio = np.log(s[eq.example, eq.selected]) - np.log(s[eq.example, eq.token])
        fin = min_norm_equality(eq.with_rhs(logratio))
    svmeq, C = None, float("nan")
    if mm_gen.solved and fin.solved:
        nrm2 = float(np.sum(mm_gen.W**2))
        if W_gd is not None and nrm2 > 0:
            C = float(np.sum((np.asarray(W_gd) - fin.W) * mm_gen.W) / nrm2)
            svmeq = fin.W + C * mm_gen.W
    return GenSVMResult(mm_gen=mm_gen, fin=fin, svmeq=svmeq, C=C, relevant=relevant)
