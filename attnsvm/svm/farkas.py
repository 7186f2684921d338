"""Certificates of infeasibility for the attention SVMs (docs/science.md §4, "Infeasible is
certified").

Every SVM row is ``A(W)_k = left_k^T W right_k >= rhs_k`` (``== rhs_k`` on equality rows),
linear in W with the row ``a_k = vec(left_k right_k^T)``. By Farkas' lemma the rows have no
solution W exactly when some ``y`` with ``y_k >= 0`` on inequality rows (free on equality
rows) combines them to zero, ``sum_k y_k a_k = 0``, while ``rhs^T y > 0``. Such a ``y`` is a
*Farkas vector*; an "infeasible" verdict of any route is stored only with one that passes
:func:`check`:

* the signs hold exactly (``y_k >= 0`` on every inequality row);
* ``margin = rhs^T y / (sum_k |y_k| max_k |rhs_k|) > 0`` (1 for the Att-SVM, whose rhs are
  all 1);
* ``residual = ||sum_k y_k left_k right_k^T||_F / (sum_k |y_k| rho) <= FARKAS_TOL * margin``
  with ``rho`` the median of the nonzero row norms ``||a_k||_F = ||left_k|| ||right_k||``: the
  combination
  vanishes to ``FARKAS_TOL`` relative to the rows' norms; or it is exactly zero in rational
  arithmetic (checked where cheap: at most ``EXACT_MAX_TERMS`` terms), whatever the float
  residual.

What the tolerance means: for any W meeting every row, ``rhs^T y <= <sum_k y_k a_k, W>``, so
``||W||_F >= rhs^T y / ||sum_k y_k a_k||_F``; a vector that passes proves that every feasible
W would need a norm of at least ``1 / FARKAS_TOL`` times ``max_k |rhs_k| / rho``, the norm that
meets a row of median norm alone. (The median, not a weighted mean: a row that is zero or
nearly so, a token equal to the selected one, is the whole certificate in real data, and a
mean over the rows in ``y`` would measure the residual against that row's own tiny norm.) A
vector with an exact zero combination (identical rows of opposite sign: ``y = (1, 1)``) is
certified exactly.

The vector comes from the route that claimed infeasibility where it has one (the
least-distance NNLS of :mod:`attnsvm.svm.frobenius`, the working set's small system, the
residual of inconsistent equalities), else from :func:`search`: one least-distance NNLS on
the reduced rows (Lawson and Hanson, ch. 23), whose vanishing residual is a Farkas vector.
A vector checked on a subset of the rows is one for the whole system (zeros elsewhere), and
:func:`check` always recomputes the combination over every row.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls

from attnsvm.svm.constraints import Constraints

#: largest residual (relative to the row norms, see the module docstring) of a Farkas vector
FARKAS_TOL = 1e-9
#: vectors with at most this many terms (nonzero entries times d^2) are also checked exactly
EXACT_MAX_TERMS = 4096


@dataclass(frozen=True)
class FarkasCheck:
    """The checked quantities of one candidate Farkas vector (module docstring)."""

    signs: bool
    margin: float
    residual: float
    exact: bool = False

    @property
    def certified(self) -> bool:
        """Whether the vector proves the rows infeasible (exactly, or to ``FARKAS_TOL``)."""
        return (
            self.signs
            and np.isfinite(self.margin)
            and self.margin > 0
            and np.isfinite(self.residual)
            and (self.exact or self.residual <= FARKAS_TOL * self.margin)
        )

    def describe(self) -> str:
        """One line for an SVM result's message."""
        verdict = "Farkas certificate" if self.certified else "Farkas vector rejected"
        how = "exact (rational arithmetic): " if self.exact else ""
        return (
            f"{verdict}: {how}residual {self.residual:.1e} relative to the row norms "
            f"(tolerance {FARKAS_TOL:.0e}), margin {self.margin:.2g}"
            + ("" if self.signs else ", wrong signs")
        )


def check(cons: Constraints, y: np.ndarray) -> FarkasCheck:
    """Check a candidate Farkas vector ``y`` (N,) against every row of ``cons`` (module
    docstring; docs/science.md §4): signs exactly, margin and relative residual."""
    y = np.asarray(y, dtype=np.float64)
    if y.shape != (cons.n_rows,) or not np.all(np.isfinite(y)):
        return FarkasCheck(False, float("nan"), float("inf"))
    signs = bool(np.all(y[~cons.equality] >= 0))
    weight = float(np.abs(y).sum())
    scale_rhs = weight * float(np.abs(cons.rhs).max(initial=0.0))
    margin = float(cons.rhs @ y) / scale_rhs if scale_rhs > 0 else 0.0
    norms = np.linalg.norm(cons.left, axis=1) * np.linalg.norm(cons.right, axis=1)
    nonzero = norms[norms > 0]
    scale_rows = weight * float(np.median(nonzero)) if nonzero.size else 0.0
    size = float(np.linalg.norm(cons.left.T @ (y[:, None] * cons.right)))
    if scale_rows > 0:
        residual = size / scale_rows
    else:  # every row is zero (or y is): the combination is zero exactly, or no certificate
        residual = 0.0 if size == 0 else float("inf")
    return FarkasCheck(signs, margin, residual, _exactly_zero(cons, y))


def _exactly_zero(cons: Constraints, y: np.ndarray) -> bool:
    """Whether ``sum_k y_k left_k right_k^T`` is exactly zero in rational arithmetic (every
    float is a rational), for vectors with at most ``EXACT_MAX_TERMS`` nonzero terms.

    Every finite float is ``m 2^e`` with an integer mantissa ``m`` (:func:`_mantissas`), so
    each term ``y_k left_ki right_kj`` is an integer times a power of two; shifted to the
    smallest exponent they are Python integers, whose sum is exact. The same verdict as
    summing :class:`fractions.Fraction` terms, without their gcd at every step."""
    rows = np.flatnonzero(y)
    if rows.size == 0 or rows.size * cons.d**2 > EXACT_MAX_TERMS:
        return False
    my, ey = _mantissas(y[rows])
    ml, el = _mantissas(cons.left[rows])
    mr, er = _mantissas(cons.right[rows])
    # y_k left_ki = (my_k ml_ki) 2^(ey_k + el_ki); right_kj = mr_kj 2^er_kj
    ea, eb = ey[:, None] + el, er
    a = (my[:, None] * ml) * _powers_of_two(ea - ea.min())
    b = mr * _powers_of_two(eb - eb.min())
    total = a.T @ b  # Python integers: sum_k a_ki b_kj, exact (a common 2^(min ea + min eb))
    return not any(v != 0 for v in total.ravel())


def _mantissas(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(m, e)`` with ``x = m 2^e`` exactly: ``m`` Python integers (object array), ``e``
    int64 (finite floats; ``frexp``'s fraction times ``2^53`` is an integer)."""
    frac, exp = np.frexp(np.asarray(x, dtype=np.float64))
    m = np.ldexp(frac, 53).astype(np.int64).astype(object)
    return m, exp.astype(np.int64) - 53


def _powers_of_two(shift: np.ndarray) -> np.ndarray:
    """``2^shift`` as Python integers (object array) for non-negative int64 ``shift``."""
    return np.array([1 << int(s) for s in shift.ravel()], dtype=object).reshape(shift.shape)


def least_distance(A: np.ndarray, h: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``min ||m|| s.t. A m >= h`` by least-distance programming (Lawson and Hanson, ch. 23).

    The NNLS problem ``min_{u >= 0} ||E u - f||`` with ``E = [A^T; h^T]`` and
    ``f = (0, ..., 0, 1)`` has residual ``r = E u - f``; when ``h^T u < 1`` the minimizer is
    ``m = A^T lam`` with multipliers ``lam = u / (1 - h^T u)``. Otherwise ``r`` vanishes and
    ``u`` is a Farkas vector of the rows (``u >= 0``, ``A^T u = 0``, ``h^T u = 1``). Returns
    ``(lam, None)`` or ``(None, u)``; ``(None, None)`` when NNLS hits its iteration limit.
    """
    E = np.vstack([A.T, h[None, :]])
    f = np.zeros(E.shape[0])
    f[-1] = 1.0
    try:
        u, _ = nnls(E, f, maxiter=50 * E.shape[1])
    except RuntimeError:  # iteration limit
        return None, None
    hu = float(h @ u)
    if hu < 1.0 - 1e-9:
        return u / (1.0 - hu), None
    return None, u


def search(A: np.ndarray, rhs: np.ndarray, equality: np.ndarray) -> np.ndarray | None:
    """A Farkas vector (N,) of the rows ``A m >= rhs`` (``== rhs`` where ``equality``), from
    :func:`least_distance` with every equality row split into two inequalities; None when the
    least-distance problem has a solution (or NNLS stops). ``A`` may be the reduced rows of
    :func:`attnsvm.svm.frobenius.reduce` (the same combinations vanish)."""
    eq = np.flatnonzero(equality)
    _, u = least_distance(np.vstack([A, -A[eq]]), np.concatenate([rhs, -rhs[eq]]))
    if u is None:
        return None
    y = u[: rhs.size].copy()
    y[eq] -= u[rhs.size :]
    return y


def certify(
    cons: Constraints, candidates: list[np.ndarray | None], A: np.ndarray | None = None
) -> tuple[np.ndarray | None, str]:
    """The first of ``candidates`` (Farkas vectors over every row of ``cons``, None skipped)
    that passes :func:`check`, else, given the (reduced) row matrix ``A``, a vector found by
    :func:`search`. Returns ``(y, note)``; y None when nothing passes (the note says what
    failed)."""
    notes = []
    for y in candidates:
        if y is None:
            continue
        y = np.where(cons.equality, y, np.maximum(y, 0.0))  # the check sees exactly this y
        result = check(cons, y)
        if result.certified:
            return y, result.describe()
        notes.append(result.describe())
    if A is not None:
        y = search(A, cons.rhs, cons.equality)
        if y is None:
            notes.append("no Farkas vector found (the least-distance problem has a solution)")
        else:
            result = check(cons, y)
            if result.certified:
                return y, f"{result.describe()} (least-distance search)"
            notes.append(f"{result.describe()} (least-distance search)")
    return None, "; ".join(notes) or "no Farkas vector"
