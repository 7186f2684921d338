"""The rules that tie cell fields together (docs/science.md §1-12): one function per field.

Each rule belongs to the field whose value it restricts (its ``rule`` in the registry,
:data:`attnsvm.config.fields.FIELDS`) and returns the message of the rule that a cell breaks,
or None. :func:`attnsvm.config.fields.cross_field_problem` checks them in
:data:`attnsvm.config.fields.RULE_ORDER`, on one cell per grid point before any job is planned.
"""

from __future__ import annotations

from typing import Any

from attnsvm.images import REAL_GENERATORS

#: checkpoint_count may exceed iterations up to this (the default; duplicates are dropped)
FREE_CHECKPOINTS = 30


def m_rule(c: Any) -> str | None:
    if c.m is not None and c.m > c.d:
        return f"m must be an integer in [1, d={c.d}] or null (m = d), got {c.m!r}"
    return None


def checkpoint_rule(c: Any) -> str | None:
    if c.task != "regpath" and c.checkpoint_count > max(c.iterations, FREE_CHECKPOINTS):
        return (
            f"checkpoint_count must be at most iterations={c.iterations} (or "
            f"{FREE_CHECKPOINTS}): one checkpoint per step, got {c.checkpoint_count!r}"
        )
    return None


def generator_rule(c: Any) -> str | None:
    if c.generator == "toy2d" and (c.n, c.T, c.d) != (2, 3, 2):
        return f"generator 'toy2d' needs n=2, T=3, d=2, got n={c.n}, T={c.T}, d={c.d}"
    if c.generator == "orthonormal" and c.d < c.T:
        return f"generator 'orthonormal' needs d >= T, got d={c.d}, T={c.T}"
    if c.generator in REAL_GENERATORS:
        return real_problem(c)
    if c.generator == "signal_noise" and not (
        c.task == "train" and c.head == "linear" and c.attention == "cross" and c.d >= 2
    ):
        return (
            "generator 'signal_noise' needs task 'train', head 'linear', attention 'cross' and "
            f"d >= 2 (docs/science.md 15), got {c.task!r}, {c.head!r}, {c.attention!r}, d={c.d}"
        )
    if c.generator == "weakly_relevant" and not (
        c.task == "train" and c.head == "linear" and c.attention == "cross" and c.d >= 2
        and c.T >= 3
    ):  # fmt: skip
        return (
            "generator 'weakly_relevant' needs task 'train', head 'linear', attention 'cross', "
            f"d >= 2 and T >= 3 (docs/science.md 15), got {c.task!r}, {c.head!r}, "
            f"{c.attention!r}, d={c.d}, T={c.T}"
        )
    if c.generator == "magen" and not (
        (c.task, c.head, c.attention, c.param, c.heads, c.T)
        == ("train", "linear", "cross", "W", 1, 2)
        and c.train_head
        and c.d >= 3
    ):
        return (
            "generator 'magen' needs task 'train', head 'linear', attention 'cross', param 'W', "
            "one head, train_head true (v trained from 0), T = 2 and d >= 3 (docs/science.md 15)"
        )
    return None


def init_rule(c: Any) -> str | None:
    if c.init == "kaiming_q0" and not (c.param == "KQ" and c.heads == 1):
        return (
            "init 'kaiming_q0' needs param 'KQ' and one head (docs/science.md 15), got "
            f"param {c.param!r}, heads {c.heads}"
        )
    return None


def real_problem(c: Any) -> str | None:
    """The first rule of the real-token generators (docs/science.md §9) that ``c`` breaks."""
    if c.patch not in (2, 4):
        return f"patch must be 2 or 4 (a patch side dividing 8), got {c.patch!r}"
    if c.generator == "digits" and c.digit_pos == c.digit_neg:
        return f"digit_pos and digit_neg must differ, got {c.digit_pos} and {c.digit_neg}"
    if c.n < 2:
        return f"generator {c.generator!r} needs n >= 2 (both labels), got n={c.n}"
    from attnsvm.images import pool_size  # loads the bundled images: only for real tokens

    pos, neg = pool_size(c.generator, c.digit_pos, c.digit_neg)
    if (c.n + 1) // 2 > pos or c.n // 2 > neg:
        return (
            f"generator {c.generator!r} has {pos} examples of label +1 and {neg} of label -1: "
            f"n must be at most {2 * min(pos, neg) + (pos > neg)}, got n={c.n}"
        )
    return None


def radius_rule(c: Any) -> str | None:
    if c.radius_max <= c.radius_min:
        return f"radius_max must exceed radius_min, got {c.radius_min!r} and {c.radius_max!r}"
    return None


def task_rule(c: Any) -> str | None:
    if c.task == "regpath" and not (c.train and c.head == "linear"):
        return "task 'regpath' needs train: true and head 'linear'"
    return ntp_problem(c)


def ntp_problem(c: Any) -> str | None:
    """The rules of ``task: ntp`` (docs/science.md §8), or None."""
    ntp_gen = c.generator.startswith("ntp_")
    if (c.task == "ntp") != ntp_gen:
        return (
            f"task 'ntp' and the generators ntp_acyclic, ntp_cyclic, ntp_text go together, "
            f"got task {c.task!r} with generator {c.generator!r}"
        )
    if c.task != "ntp":
        return None
    if (c.head, c.attention) != ("linear", "cross"):
        return (
            "task 'ntp' keeps head 'linear' and attention 'cross' (unused), "
            f"got {c.head!r}, {c.attention!r}"
        )
    if c.generator != "ntp_text" and c.T > c.K:
        return (
            f"generator {c.generator!r} draws T distinct tokens: needs T <= K, got T={c.T}, K={c.K}"
        )
    if not c.train:
        return "task 'ntp' needs train: true"
    if c.norm_svms:
        return "norm_svms is for task 'train' (docs/science.md 10), not task 'ntp'"
    return None


def train_head_rule(c: Any) -> str | None:
    if c.train_head and not (c.train and c.task == "train" and c.head == "linear"):
        return "train_head needs train: true, task 'train' and head 'linear' (docs/science.md 11)"
    return None


def attention_rule(c: Any) -> str | None:
    if c.attention in ("sequence", "causal") and c.head != "linear":
        return f"attention {c.attention!r} needs head 'linear', got {c.head!r}"
    return None


def heads_rule(c: Any) -> str | None:
    if c.heads > 1 and (c.task, c.head, c.train) != ("train", "linear", True):
        return "heads > 1 needs task 'train', head 'linear' and train: true (docs/science.md 12)"
    if c.heads > 1 and c.attention not in ("cross", "self"):
        return f"heads > 1 needs attention 'cross' or 'self', got {c.attention!r}"
    return None


def head_rule(c: Any) -> str | None:
    if c.head == "relu" and c.generator != "relu":
        return f"head 'relu' needs generator 'relu' (it draws V), got {c.generator!r}"
    return None


def optimizer_rule(c: Any) -> str | None:
    polyak_ok = (
        c.task == "train"
        and c.head == "linear"
        and c.attention in ("cross", "self")
        and c.heads == 1
        and not c.train_head
    )
    if c.optimizer == "polyak" and not polyak_ok:
        return (
            "optimizer 'polyak' needs task 'train', head 'linear', attention 'cross' or 'self', "
            "one attention head and a fixed head (its loss floor, docs/science.md 10)"
        )
    return None


#: the generators with a held-out sample from their distribution (docs/science.md 15;
#: weakly_relevant's with clean labels, as in Sakamoto & Sato's code)
TEST_GENERATORS = ("gaussian", "signal_noise", "weakly_relevant", "magen")


def n_test_rule(c: Any) -> str | None:
    if c.n_test == 0:
        return None
    trained = c.generator == "magen"  # Magen et al. train the head (its own rule)
    fits = (
        c.generator in TEST_GENERATORS
        and (c.task, c.head, c.heads, c.train, c.train_head)
        == ("train", "linear", 1, True, trained)
        and c.attention in ("cross", "self")
    )
    if not fits:
        return (
            "n_test > 0 needs generator gaussian, signal_noise or weakly_relevant, task 'train', "
            "train: true, one fixed linear head (heads 1, train_head false) and attention "
            "'cross' or 'self', or generator magen with its head trained (docs/science.md 15)"
        )
    return None


def batch_size_rule(c: Any) -> str | None:
    """Mini-batches (docs/science.md §10, "Mini-batches"): the sampled unit is an example of
    one fixed head's loss; the Polyak step needs the full loss."""
    if c.batch_size is None:
        return None
    if c.batch_size > c.n:
        return (
            f"batch_size must be an integer in [1, n={c.n}] or null (full batch), got "
            f"{c.batch_size!r}"
        )
    fits = (
        c.train
        and (c.task, c.heads, c.train_head) == ("train", 1, False)
        and c.attention in ("cross", "self")
        and c.optimizer != "polyak"
    )
    if not fits:
        return (
            "batch_size needs train: true, task 'train', one fixed head (heads 1, train_head "
            "false), attention 'cross' or 'self' and an optimizer other than polyak "
            "(docs/science.md 10)"
        )
    return None


def weight_decay_rule(c: Any) -> str | None:
    """Weight decay (docs/science.md §4, "Weight decay"): the Polyak step needs the floor of
    the loss it descends, and its floor is the unregularized loss's."""
    if c.weight_decay > 0 and c.optimizer == "polyak":
        return (
            "weight_decay needs an optimizer other than polyak: its loss floor is the "
            "unregularized loss's (docs/science.md 4, 10)"
        )
    return None
