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

    def _store_new(self, solver, conss, route: str, solve_all) -> None:
        """Store ``solve_all(indices)``'s answers (under ``solver``'s key) for the first of
        ``conss`` of each distinct constraint set not stored yet (``indices`` into ``conss``)."""
        todo: dict[tuple, int] = {}
        for i, cons in enumerate(conss):
            key = self._key(solver, cons, route)
            if key not in self._store:
                todo.setdefault(key, i)
        self._store.update(zip(todo, solve_all(list(todo.values())), strict=True))

    def solve_frobenius_many(self, conss, device: str = "cpu", route: str = "auto") -> None:
        """Store :func:`solve_frobenius` answers for the distinct, new constraint sets among
        ``conss``, solved together (:func:`attnsvm.svm.frobenius_batched.solve_many`: batched
        from ``BATCH_MIN`` instances, the same answers as one by one otherwise)."""
        # torch: only where a group trains (SVM-only blocks never batch their solves)
        from attnsvm.svm import frobenius_batched as FB

        self._store_new(FB.solve_frobenius, conss, route, lambda ix: FB.solve_many(
            [conss[i] for i in ix], device, route=route))  # fmt: skip

    def solve_nuclear_many(self, solver, conss, frobenius, route: str = "auto") -> None:
        """Store the nuclear answers of the distinct, new constraint sets among ``conss``
        under ``solver`` (the :func:`~attnsvm.svm.nuclear.solve_nuclear` the cells look up),
        solved together by :func:`attnsvm.svm.nuclear.solve_nuclear_many` (the same answers,
        bit for bit), with ``frobenius`` the Frobenius answer of each set. Nothing is stored
        when ``solver`` is another function (e.g. a test's wrapper): its cells solve alone."""
        if solver is svm_nuclear.solve_nuclear:
            self._store_new(solver, conss, route, lambda ix: svm_nuclear.solve_nuclear_many(
                [conss[i] for i in ix], [frobenius[i] for i in ix], route))  # fmt: skip
