"""The NTP-SVM of docs/science.md §8: equality rows inside the SCCs of each priority graph,
margin rows between them; solved and certified by the attention-SVM solvers of §4.

``W_svm = argmin ||W||`` s.t. ``(e_i - e_j)^T W e_k = 0`` for edges i -> j of G^(k) inside
one SCC and ``>= 1`` for edges between SCCs (Frobenius norm for W runs, nuclear for KQ).
"""

from __future__ import annotations

import numpy as np

from attnsvm.ntp.graph import PriorityGraphs
from attnsvm.svm import SVMResult, solve_frobenius, solve_nuclear
from attnsvm.svm.constraints import Constraints
from attnsvm.svm.frobenius import orthonormal_basis


def ntp_constraints(E: np.ndarray, graphs: PriorityGraphs) -> Constraints:
    """One row per distinct edge ``(k, i, j)``: ``left = e_i - e_j``, ``right = e_k``, rhs 0
    (equality, i ~ j) or 1 (i => j). ``example`` holds k, ``selected`` i and ``token`` j."""
    E = np.asarray(E, dtype=np.float64)
    k, i, j = graphs.edges.T
    eq = graphs.same_scc
    return Constraints(
        left=E[i] - E[j],
        right=E[k],
        rhs=np.where(eq, 0.0, 1.0),
        equality=eq,
        example=k,
        token=j,
        selected=i,
    )


def solve_ntp_svm(cons: Constraints, norm: str = "fro", route: str = "auto") -> SVMResult:
    """W_svm with the Frobenius (``fro``, W runs) or nuclear (``nuc``, KQ runs) norm,
    certified as every SVM of §4 (status ``optimal`` only with its certificate); ``route``:
    a cell's ``svm_route`` (:mod:`attnsvm.svm.routes`)."""
    if norm not in ("fro", "nuc"):
        raise ValueError(f"norm must be 'fro' or 'nuc', got {norm!r}")
    if norm == "fro":
        return solve_frobenius(cons, route)
    return solve_nuclear(cons, route=route)


def fin_basis(cons: Constraints) -> np.ndarray:
    """Orthonormal basis (r, d, d) of S_fin = span{left_k right_k^T : equality rows k}."""
    eq = cons.subset(cons.equality)
    d = cons.d
    if eq.n_rows == 0:
        return np.zeros((0, d, d))
    U = orthonormal_basis(eq.matrix())  # (d*d, r)
    return U.T.reshape(-1, d, d)


def project(basis: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Orthogonal projection of W (..., d, d) onto the span of an orthonormal ``basis``."""
    coef = np.einsum("...ij,bij->...b", W, basis)
    return np.einsum("...b,bij->...ij", coef, basis)
