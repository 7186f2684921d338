"""Which routes solve an SVM instance, in which order: one table per SVM (docs/science.md §4).

Read a table top to bottom: the first row whose condition the instance meets gives its routes,
tried in that order. An answer counts only with its certificate (§5); where a route misses it
(or declines, or fails), the next one runs, and for the nuclear SVM the conic solvers through
cvxpy come after every direct route. The cell field ``svm_route`` moves one route to the front
wherever it applies (:data:`APPLIES`), so a route ablation is one line of a config; ``auto``
keeps the table. Each limit below carries one line; the timings that put it there are in
BENCHMARKS.md, "SVM routes".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: Frobenius: above this many inequality rows, a working set of rows (no N x N Gram matrix)
WORKING_SET_MIN_ROWS = 1000
#: Frobenius: at most N / PRIMAL_RATIO variables (d^2): one least-distance NNLS, then the primal
PRIMAL_RATIO = 4
#: Frobenius: largest dense matrix (N x d^2 lifted rows, N x N Gram) a route may form, bytes
DENSE_MAX_BYTES = 2**30
#: Frobenius: batchable instances of a trained group from which the batched dual (torch) runs
BATCH_MIN = 64
#: nuclear: the primal-dual method (nuclear_pd.py) up to this reduced size and rows
PD_MAX_SIZE, PD_MAX_ROWS = 150, 1000
#: nuclear: its working set (nuclear_ws.py) above PD_MAX_ROWS rows, up to this reduced size
WS_MAX_SIZE = 256
#: nuclear: Clarabel before SCS up to this reduced size (SCS first above it)
CLARABEL_MAX_SIZE = 30


@dataclass(frozen=True)
class Instance:
    """What the tables read of one instance: rows N, dimension d, equality rows, every rhs >
    0, reduced size ``r_l + r_r`` (the nuclear SVM's, else 0) and how many batchable
    instances of its group are solved together (``frobenius_batched.solve_many``)."""

    rows: int
    d: int
    equality: bool
    positive: bool
    size: int = 0
    batch: int = 1

    @classmethod
    def of(cls, cons, size: int = 0, batch: int = 1) -> Instance:
        """The instance of the rows ``cons`` (:class:`attnsvm.svm.constraints.Constraints`)."""
        return cls(cons.n_rows, cons.d, bool(cons.equality.any()),
                   bool(np.all(cons.rhs > 0)), size, batch)  # fmt: skip

    @property
    def dense(self) -> bool:
        """The N x d^2 lifted rows fit in :data:`DENSE_MAX_BYTES`."""
        return self.rows * self.d**2 * 8 <= DENSE_MAX_BYTES

    @property
    def gram(self) -> bool:
        """The lifted rows and the N x N Gram matrix both fit in :data:`DENSE_MAX_BYTES`."""
        return self.dense and self.rows**2 * 8 <= DENSE_MAX_BYTES


Row = tuple[str, Callable[[Instance], bool], Callable[[Instance], tuple[str, ...]]]

DUAL = ("nnls-dual", "ldp-dual", "clarabel-dual", "osqp-dual")
PRIMAL = ("clarabel-primal", "osqp-primal")


def _sdp(i: Instance) -> tuple[str, ...]:
    return ("clarabel", "scs") if i.size <= CLARABEL_MAX_SIZE else ("scs", "clarabel")


#: the Frobenius SVM (attnsvm/svm/frobenius.py; batched-dual: frobenius_batched.py)
FROBENIUS: tuple[Row, ...] = (
    ("no rows", lambda i: i.rows == 0, lambda i: ("trivial",)),
    ("equality rows (Gen-SVM)", lambda i: i.equality, lambda i: PRIMAL),
    ("> WORKING_SET_MIN_ROWS rows", lambda i: i.rows > WORKING_SET_MIN_ROWS,
     lambda i: ("ws-dual", *(DUAL if i.gram else ()), *(PRIMAL if i.dense else ()))),
    ("PRIMAL_RATIO d^2 <= rows", lambda i: PRIMAL_RATIO * i.d**2 <= i.rows,
     lambda i: ("ldp-dual", *PRIMAL)),
    (">= BATCH_MIN batchable at once", lambda i: i.batch >= BATCH_MIN,
     lambda i: ("batched-dual", *DUAL, *PRIMAL)),
    ("otherwise", lambda i: True, lambda i: (*DUAL, *PRIMAL)),
)  # fmt: skip
#: the nuclear SVM (attnsvm/svm/nuclear.py; cvxpy's Clarabel and SCS after every route)
NUCLEAR: tuple[Row, ...] = (
    ("no rows", lambda i: i.rows == 0, lambda i: ("trivial",)),
    ("equality rows, or a rhs <= 0", lambda i: i.equality or not i.positive, _sdp),
    ("> PD_MAX_ROWS rows, size <= WS_MAX_SIZE",
     lambda i: i.rows > PD_MAX_ROWS and i.size <= WS_MAX_SIZE,
     lambda i: ("ws-primal-dual", *_sdp(i))),
    ("<= PD_MAX_ROWS rows, size <= PD_MAX_SIZE",
     lambda i: i.rows <= PD_MAX_ROWS and i.size <= PD_MAX_SIZE,
     lambda i: ("primal-dual", *_sdp(i))),
    ("otherwise", lambda i: True, _sdp),
)  # fmt: skip

_INEQUALITY = {"nnls-dual", "ldp-dual", "clarabel-dual", "osqp-dual", "ws-dual", "batched-dual"}
#: where a route may run at all (an ``svm_route`` that does not apply leaves the table's order)
APPLIES: dict[str, Callable[[Instance], bool]] = {
    **{r: (lambda i: i.rows > 0 and not i.equality and i.gram) for r in _INEQUALITY},
    "ws-dual": lambda i: i.rows > 0 and not i.equality,
    "batched-dual": lambda i: i.batch > 1 and not i.equality and i.rows > 0
    and i.rows <= WORKING_SET_MIN_ROWS and PRIMAL_RATIO * i.d**2 > i.rows,
    **{r: (lambda i: i.rows > 0 and i.dense) for r in PRIMAL},
    **{r: (lambda i: i.rows > 0 and not i.equality and i.positive)
       for r in ("primal-dual", "ws-primal-dual")},
    **{r: (lambda i: i.rows > 0 and not i.equality) for r in ("clarabel", "scs")},
}  # fmt: skip
#: every route of each table, the values of ``svm_route`` besides ``auto``
NAMES: dict[str, tuple[str, ...]] = {
    "frobenius": (*DUAL, *PRIMAL, "ws-dual", "batched-dual"),
    "nuclear": ("primal-dual", "ws-primal-dual", "clarabel", "scs"),
}


def routes(table: tuple[Row, ...], instance: Instance, first: str = "auto") -> tuple[str, ...]:
    """The routes of ``instance`` in ``table``, in order; ``first`` (a cell's ``svm_route``)
    moves that route to the front where it is the table's and applies (:data:`APPLIES`)."""
    chosen = next(make(instance) for _, when, make in table if when(instance))
    own = NAMES["frobenius" if table is FROBENIUS else "nuclear"]
    if first == "auto" or first not in own or not APPLIES[first](instance):
        return chosen
    return (first, *(r for r in chosen if r != first))


def frobenius(cons, first: str = "auto", batch: int = 1) -> tuple[str, ...]:
    """The routes of the Frobenius SVM of ``cons`` (:data:`FROBENIUS`)."""
    return routes(FROBENIUS, Instance.of(cons, batch=batch), first)


def nuclear(cons, size: int, first: str = "auto") -> tuple[str, ...]:
    """The direct routes of the nuclear SVM of ``cons`` at reduced size ``size``
    (:data:`NUCLEAR`)."""
    return routes(NUCLEAR, Instance.of(cons, size=size), first)
