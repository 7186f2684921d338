"""The attention SVMs of docs/science.md §4 (public entry point).

* :func:`solve_frobenius` - Att-SVM ``W_mm`` (and ``W_mm_gen`` with equality rows);
* :func:`solve_nuclear` - Att-SVM_* ``W_mm_*``;
* :func:`support_tokens`, :func:`is_locally_optimal` - support tokens and local optimality;
* :func:`min_norm_equality`, :func:`gen_svm` - Gen-SVM ``W_fin``, ``W_mm_gen``, ``W_svmeq``.

Implementation lives in :mod:`attnsvm.svm.frobenius`, :mod:`attnsvm.svm.nuclear` and
:mod:`attnsvm.svm.general`.
"""

from attnsvm.svm.frobenius import STATUSES, SVMResult, gram, reduce, solve_frobenius, violation
from attnsvm.svm.general import (
    SUPPORT_TOL,
    GenSVMResult,
    gen_svm,
    is_locally_optimal,
    min_norm_equality,
    support_tokens,
)
from attnsvm.svm.nuclear import nuclear_norm, solve_nuclear

__all__ = [
    "STATUSES",
    "SUPPORT_TOL",
    "GenSVMResult",
    "SVMResult",
    "gen_svm",
    "gram",
    "is_locally_optimal",
    "min_norm_equality",
    "nuclear_norm",
    "reduce",
    "solve_frobenius",
    "solve_nuclear",
    "support_tokens",
    "violation",
]
