"""SVM solutions shared between the cells of a job, keyed by the exact constraint rows.

The W and KQ runs of one seed share their data, and often their selected tokens: an SVM is
solved once per distinct constraint set (docs/science.md §4) among the cells a job runs.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from attnsvm.svm import SVMResult
from attnsvm.svm import nuclear as svm_nuclear


class SolveCache:
    """SVM solutions keyed by solver and the exact bytes of the constraint rows.

    Two cells with equal rows get the same :class:`SVMResult` object (solutions are never
    modified after solving), so the second costs a dictionary lookup.
    """

    def __init__(self) -> None:
        self._store: dict[tuple, SVMResult] = {}
        self.hits = 0

    @staticmethod
    def _key(solver, cons, route: str = "auto") -> tuple:
        h = hashlib.sha256()
        for a in (cons.left, cons.right, cons.rhs, cons.equality):
            h.update(np.ascontiguousarray(a).tobytes())
            h.update(str(a.shape).encode())
        return (solver.__module__, solver.__qualname__, route, h.hexdigest())

    def solve(self, solver, cons, route: str = "auto", **hints: Any) -> SVMResult:
        """``solver(cons, **hints)`` (with ``route``, a cell's ``svm_route``, where it is not
        ``auto``: :mod:`attnsvm.svm.routes`), or the stored answer for identical rows.

        ``hints`` must not change the answer (e.g. the Frobenius answer that
        :func:`solve_nuclear` reads feasibility from): they are not part of the key.
        """
        key = self._key(solver, cons, route)
        if key in self._store:
            self.hits += 1
            return self._store[key]
        extra = {} if route == "auto" else {"route": route}
        res = self._store[key] = solver(cons, **extra, **hints)
        return res

    def solve_frobenius_many(self, conss, device: str = "cpu", route: str = "auto") -> None:
        """Store :func:`solve_frobenius` answers for the distinct, new constraint sets among
        ``conss``, solved together (:func:`attnsvm.svm.frobenius_batched.solve_many`: batched
        from ``BATCH_MIN`` instances, the same answers as one by one otherwise)."""
        # torch: only where a group trains (SVM-only blocks never batch their solves)
        from attnsvm.svm import frobenius_batched as svm_frobenius_batched

        solver, todo = svm_frobenius_batched.solve_frobenius, {}  # the answers' own route
        for cons in conss:
            key = self._key(solver, cons, route)
            if key not in self._store:
                todo.setdefault(key, cons)
        answers = svm_frobenius_batched.solve_many(list(todo.values()), device, route=route)
        for key, res in zip(todo, answers, strict=True):
            self._store[key] = res

    def solve_nuclear_many(self, solver, conss, frobenius, route: str = "auto") -> None:
        """Store the nuclear answers of the distinct, new constraint sets among ``conss``
        under ``solver`` (the :func:`~attnsvm.svm.nuclear.solve_nuclear` the cells look up),
        solved together by :func:`attnsvm.svm.nuclear.solve_nuclear_many` (the same answers,
        bit for bit), with ``frobenius`` the Frobenius answer of each set. Nothing is stored
        when ``solver`` is another function (e.g. a test's wrapper): its cells solve alone."""
        if solver is not svm_nuclear.solve_nuclear:
            return
        todo: dict[tuple, tuple] = {}
        for cons, fro in zip(conss, frobenius, strict=True):
            key = self._key(solver, cons, route)
            if key not in self._store:
                todo.setdefault(key, (cons, fro))
        answers = svm_nuclear.solve_nuclear_many(
            [c for c, _ in todo.values()], [f for _, f in todo.values()], route
        )
        for key, res in zip(todo, answers, strict=True):
            self._store[key] = res
