"""The registry of cell fields: every field of a grid cell declared once (docs/extending.md).

A :class:`Field` says everything attnsvm needs to know about one cell field: its type, default,
allowed values, description and units, when it matters (``applies``), when it enters the cell's
stored description and digest (``described``), the rule that ties it to other fields, and which
stages of a cell's run consume it (:data:`STAGES`). Everything else is generated from
:data:`FIELDS`:

- the :class:`~attnsvm.config.cell.Cell` dataclass, its normalization, description and digest;
- the pydantic models of a config and the JSON schema ``workflow/schemas/config.schema.yaml``
  (:mod:`attnsvm.config.schema`);
- the field table of ``config/README.md`` and ``attnsvm run-cell``'s options
  (:mod:`attnsvm.config.docs`, :mod:`attnsvm.cli`);
- the attributes of the grid axes in every store (:mod:`attnsvm.variables`);
- what each stage sees of a cell (:meth:`~attnsvm.config.cell.Cell.settings`, a
  :class:`~attnsvm.config.settings.Settings`): a trainer reads its settings whole, never a
  hand-made list of keywords.

``tests/test_fields.py`` runs every field's :class:`Probe` and fails when a change of a field
changes nothing that its stages produce: a field that no code consumes cannot pass unnoticed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from attnsvm.config import rules
from attnsvm.config.rules import FREE_CHECKPOINTS  # noqa: F401 - a limit, with the others here
from attnsvm.images import REAL_GENERATORS

#: What consumes a field (docs/extending.md): ``data`` draws the dataset (docs/science.md §1),
#: ``train`` initializes and trains (§3) or follows the regularization path, ``measure`` solves
#: the SVMs and computes the metrics (§4-5).
STAGES = ("data", "train", "measure")
#: The kinds of values a field takes (pydantic types in :mod:`attnsvm.config.schema`).
KINDS = ("choice", "int", "optional int", "real", "bool")

#: Upper bounds of the fields that multiply work (issue 17): beyond them a cell is a typo, not
#: an experiment. Memory and run time are predicted from the sizes (:mod:`attnsvm.config.cost`).
MAX_SIZE = 100_000  # d, n and T each
MAX_ITERATIONS = 100_000_000
MAX_CHECKPOINTS = 10_000
MAX_HEADS = 1_000
#: seeds are stored as int64 coordinates: the largest seed the store (and so a cell) accepts
MAX_SEED = 2**63 - 1


def ALWAYS(cell: Any) -> bool:  # noqa: N802 - a constant-like predicate
    """``described``: the field is always part of the cell's description."""
    return True


NOT_DEFAULT = "not default"
"""``described``: the field enters the description only where it differs from its default, so
that cells written before the field existed keep their description, digest and blocks (the
rule every new field should use)."""


@dataclass(frozen=True)
class Probe:
    """How a test shows that a field is consumed: a cell of ``base`` settings (on top of
    :data:`PROBE_BASE`) and the same cell with the field set to ``value``, run through the
    same training loop, must store results that differ by more than rounding
    (:data:`PROBE_RTOL`), in what the field's stages produce (``tests/test_fields.py``)."""

    value: Any
    base: Mapping[str, Any] = field(default_factory=dict)


#: A probe's change must exceed this relative to the variable's largest value: two loops (or
#: two kernels) differ by rounding, a field that is read changes far more.
PROBE_RTOL = 1e-9
#: The routes of the Frobenius and nuclear SVMs' route tables (attnsvm.svm.routes.NAMES, which a
#: test holds to this list): the values of ``svm_route`` besides ``auto``.
SVM_ROUTES = (
    "nnls-dual", "ldp-dual", "clarabel-dual", "osqp-dual", "clarabel-primal", "osqp-primal",
    "ws-dual", "batched-dual", "primal-dual", "ws-primal-dual", "clarabel", "scs",
)  # fmt: skip
#: The small cell every probe starts from (fast to train and solve).
PROBE_BASE: Mapping[str, Any] = {"d": 4, "T": 3, "n": 3, "iterations": 40, "checkpoint_count": 5}


@dataclass(frozen=True)
class Field:
    """One cell field: its values, its meaning and who consumes it (module docstring).

    ``kind``: one of :data:`KINDS`; ``bounds``: pydantic's ge/gt/le/lt of a number; ``must``:
    the words of ``<name> must be <must>, got <value>`` (``above``: instead, above the maximum;
    ``{d}`` is replaced by the cell's d); ``allowed``: the config docs' column (default: the
    choices); ``applies(cell)``: whether the field matters for that cell (elsewhere it is reset
    to its default, so it does not change the cell's identity); ``described``: when it enters
    the cell's description and digest (:func:`ALWAYS`, :data:`NOT_DEFAULT` or a predicate);
    ``rule(cell)``: the message of a rule tying it to other fields that ``cell`` breaks, or
    None; ``stages``: the :data:`STAGES` that consume it (``()`` with ``unused`` saying why);
    ``probe``: the test of that (None: derived from the kind); ``axis``: may be a grid axis.
    """

    name: str
    kind: str
    default: Any
    doc: str
    long_name: str
    stages: tuple[str, ...]
    must: str = ""
    choices: tuple[str, ...] = ()
    bounds: Mapping[str, float] = field(default_factory=dict)
    above: str = ""
    allowed: str = ""
    units: str | None = None
    applies: Callable[[Any], bool] | None = None
    described: Callable[[Any], bool] | str = NOT_DEFAULT
    rule: Callable[[Any], str | None] | None = None
    probe: Probe | None = None
    unused: str = ""
    axis: bool = True

    @property
    def type(self) -> type | str:
        """The Python annotation of the field in :class:`~attnsvm.config.cell.Cell`."""
        return {
            "choice": "str",
            "int": "int",
            "optional int": "int | None",
            "real": "float",
            "bool": "bool",
        }[self.kind]

    def in_description(self, cell: Any) -> bool:
        """Whether this field is part of ``cell``'s description (``to_dict``) and digest."""
        if self.described == NOT_DEFAULT:
            return getattr(cell, self.name) != self.default
        return bool(self.described(cell))  # type: ignore[operator]

    @property
    def must_text(self) -> str:
        """``must`` with the default words of choices and booleans."""
        if self.kind == "choice":
            return "one of " + ", ".join(self.choices)
        if self.kind == "bool":
            return "true or false"
        return self.must

    def allowed_text(self) -> str:
        """The allowed values in words (the config docs' table)."""
        if self.allowed:
            return self.allowed
        if self.kind == "choice":
            return ", ".join(self.choices)
        if self.kind == "bool":
            return "true, false"
        return self.must


# ----------------------------------------------------------------------- the fields
_OPEN_UNIT = {"gt": 0, "lt": 1}
_UNIT_MUST = "a number in the open interval (0, 1)"
_POSITIVE_MUST = "a positive finite number"


def _size(name: str, low: int, must: str, doc: str, long_name: str, default: int, **kw) -> Field:
    return Field(
        name, "int", default, doc, long_name, ("data",), must, bounds={"ge": low, "le": MAX_SIZE},
        above=f"at most {MAX_SIZE}", allowed=f"{low}..{MAX_SIZE}", **kw,
    )  # fmt: skip


def _tolerance(name: str, default: float, doc: str, long_name: str, probe: Probe) -> Field:
    return Field(
        name, "real", default, doc, long_name, ("measure",), _UNIT_MUST, bounds=_OPEN_UNIT,
        allowed="(0, 1)", described=ALWAYS, probe=probe,
    )  # fmt: skip


def _real(c: Any) -> bool:
    return c.generator in REAL_GENERATORS


def _token_model(c: Any) -> bool:
    """The generators with a signal-to-noise ratio and flipped labels (docs/science.md 15)."""
    return c.generator in ("signal_noise", "magen")


def _weakly_relevant(c: Any) -> bool:
    return c.generator == "weakly_relevant"


def _label_noise(c: Any) -> bool:
    """The generators with flipped training labels (docs/science.md 15)."""
    return c.generator in ("signal_noise", "weakly_relevant", "magen")


_DIGITS = "digits only: "
FIELDS: tuple[Field, ...] = (
    Field(
        name="generator",
        kind="choice",
        default="gaussian",
        doc="data generator (docs/science.md 1); relu draws V, orthonormal needs d >= T, toy2d "
        "needs n=2, T=3, d=2; the ntp_* generators go with task: ntp (8; synthetic ones need "
        "T <= K); digits / photos: patches of real images as tokens (9), d and T derived "
        "(setting them is an error); signal_noise: one signal token and T - 1 noise tokens, "
        "labels flipped at rate label_flip (15; cross attention, linear head, d >= 2); "
        "weakly_relevant: Sakamoto & Sato's model in their units, a relevant, two weakly "
        "relevant and T - 3 noise tokens (15; also T >= 3); magen: Magen et al.'s two tokens, "
        "the signal mu_y alone and noise orthogonal to the signals, head trained from v = 0 "
        "(15; T 2, d >= 3, param W, train_head true)",
        long_name="data generator",
        stages=("data",),
        choices=(
            "gaussian",
            "relu",
            "orthonormal",
            "toy2d",
            "ntp_acyclic",
            "ntp_cyclic",
            "ntp_text",
            *REAL_GENERATORS,
            "signal_noise",
            "weakly_relevant",
            "magen",
        ),
        described=ALWAYS,
        rule=rules.generator_rule,
        probe=Probe("relu"),
    ),
    _size(
        name="d",
        low=1,
        must="a positive integer",
        doc="token dimension (digits / photos: derived from patch and positional)",
        long_name="dimension d",
        default=10,
        described=ALWAYS,
        probe=Probe(5),
    ),
    _size(
        name="T",
        low=2,
        must="an integer >= 2",
        doc="tokens per example (>= 2; digits / photos: derived, (8 / patch)^2)",
        long_name="tokens T",
        default=8,
        described=ALWAYS,
        probe=Probe(4),
    ),
    _size(
        name="n",
        low=1,
        must="a positive integer",
        doc="examples",
        long_name="examples n",
        default=6,
        described=ALWAYS,
        probe=Probe(4),
    ),
    Field(
        name="head",
        kind="choice",
        default="linear",
        doc="fixed prediction head (docs/science.md 2): linear v^T r, relu 1^T ReLU(V^T r) (needs "
        "generator relu), lambda v^T r - lam ||r||^2",
        long_name="prediction head",
        stages=("train", "measure"),
        choices=("linear", "relu", "lambda"),
        described=ALWAYS,
        rule=rules.head_rule,
        probe=Probe("relu", {"generator": "relu"}),
    ),
    Field(
        name="lam",
        kind="real",
        default=0.0,
        doc="lambda of the lambda head (>= 0; docs/science.md 2)",
        long_name="lambda",
        stages=("train",),
        must="a non-negative finite number",
        bounds={"ge": 0},
        allowed=">= 0",
        applies=lambda c: c.head == "lambda",
        described=ALWAYS,
        probe=Probe(0.5, {"head": "lambda"}),
    ),
    Field(
        name="param",
        kind="choice",
        default="W",
        doc="train W directly or W = K Q^T (docs/science.md 2)",
        long_name="parameterization",
        stages=("train", "measure"),
        choices=("W", "KQ"),
        described=ALWAYS,
        probe=Probe("KQ"),
    ),
    Field(
        name="m",
        kind="optional int",
        default=None,
        doc="inner dimension of K and Q, 1..d or null (m = d); m < d also solves the rank-m "
        "constrained nuclear SVM (docs/science.md 4)",
        long_name="inner dimension m",
        stages=("train", "measure"),
        must="an integer in [1, d={d}] or null (m = d)",
        bounds={"ge": 1},
        allowed="1..d or null",
        applies=lambda c: c.param == "KQ",
        described=ALWAYS,
        rule=rules.m_rule,
        probe=Probe(2, {"param": "KQ"}),
    ),
    Field(
        name="attention",
        kind="choice",
        default="cross",
        doc="self: the query is the first token (docs/science.md 1); sequence / causal: every "
        "token k is a query over all tokens / tokens 0..k (4, linear head only)",
        long_name="attention kind",
        stages=("data", "train", "measure"),
        choices=("cross", "self", "sequence", "causal"),
        described=ALWAYS,
        rule=rules.attention_rule,
        probe=Probe("self"),
    ),
    Field(
        name="init",
        kind="choice",
        default="uniform",
        doc="U(-1/sqrt(d), 1/sqrt(d)), or W = 0 / (K = 0.1 N(0,1), Q = 0) (docs/science.md 3); "
        "kaiming_q0 (KQ only): K = U(-1/sqrt(d), 1/sqrt(d)), PyTorch's Kaiming-uniform of a "
        "d x d matrix, and Q = 0 (15, Sakamoto & Sato's W and p)",
        long_name="initialization",
        stages=("train",),
        choices=("uniform", "zero", "kaiming_q0"),
        described=ALWAYS,
        rule=rules.init_rule,
        probe=Probe("zero"),
    ),
    Field(
        name="optimizer",
        kind="choice",
        default="normalized",
        doc="normalized or plain full-batch gradient descent (docs/science.md 3); sign descent, "
        "Adam, spectral descent, l_1.5 / l_3 mirror descent, Polyak step with the loss floor of "
        "the fixed head (10; linear head, cross or self attention), Signum (sign of the "
        "momentum) and Muon (Newton-Schulz orthogonalized momentum; 10)",
        long_name="optimizer",
        stages=("train",),
        choices=(
            "normalized",
            "plain",
            "sign",
            "adam",
            "spectral",
            "mirror1p5",
            "mirror3",
            "polyak",
            "signum",
            "muon",
        ),
        described=ALWAYS,
        rule=rules.optimizer_rule,
        probe=Probe("plain"),
    ),
    Field(
        name="lr",
        kind="real",
        default=0.1,
        doc="step size eta (> 0)",
        long_name="step size",
        stages=("train",),
        must=_POSITIVE_MUST,
        bounds={"gt": 0},
        allowed="> 0",
        described=ALWAYS,
        probe=Probe(0.2),
    ),
    Field(
        name="iterations",
        kind="int",
        default=2000,
        doc="gradient descent steps (task regpath: projected steps per radius)",
        long_name="iterations",
        stages=("train",),
        must="a positive integer",
        bounds={"ge": 1, "le": MAX_ITERATIONS},
        above=f"at most {MAX_ITERATIONS:_}",
        allowed="1..10^8",
        described=ALWAYS,
        probe=Probe(41),
    ),
    Field(
        name="checkpoint_spacing",
        kind="choice",
        default="log",
        doc="checkpoint iterations log-spaced, or every iterations/count",
        long_name="checkpoint spacing",
        stages=("train",),
        choices=("log", "linear"),
        described=ALWAYS,
        probe=Probe("linear"),
    ),
    Field(
        name="checkpoint_count",
        kind="int",
        default=30,
        doc="number of checkpoints (the last iteration is always one), at most max(iterations, "
        "30); for task regpath the number of radii",
        long_name="checkpoints",
        stages=("train",),
        must="a positive integer",
        bounds={"ge": 1, "le": MAX_CHECKPOINTS},
        above=f"at most {MAX_CHECKPOINTS}",
        allowed="1..10000",
        described=ALWAYS,
        rule=rules.checkpoint_rule,
        probe=Probe(6),
    ),
    Field(
        name="dtype",
        kind="choice",
        default="float64",
        doc="training precision (docs/science.md 3)",
        long_name="dtype",
        stages=("train",),
        choices=("float64", "float32"),
        described=ALWAYS,
        probe=Probe("float32"),
    ),
    _tolerance(
        name="corr_threshold",
        default=0.99,
        doc="correlation needed for global/local convergence (docs/science.md 5)",
        long_name="correlation threshold",
        probe=Probe(1e-6),
    ),
    _tolerance(
        name="saturation_tol",
        default=1e-3,
        doc="unsaturated if min_i max_t s_it < 1 - tol (docs/science.md 5)",
        long_name="saturation tolerance",
        probe=Probe(0.999999),
    ),
    _tolerance(
        name="relevant_tol",
        default=1e-3,
        doc="Gen-SVM relevant tokens: s_it >= tol (docs/science.md 4)",
        long_name="relevance tolerance",
        probe=Probe(0.4, {"generator": "relu", "head": "relu"}),
    ),
    _tolerance(
        name="rank_tol",
        default=1e-6,
        doc="relative singular-value tolerance of ranks (docs/science.md 5)",
        long_name="rank tolerance",
        probe=Probe(0.5),
    ),
    _tolerance(
        name="support_tol",
        default=1e-5,
        doc="tolerance for active SVM constraints, the support tokens (docs/science.md 4)",
        long_name="support tolerance",
        probe=Probe(0.5),
    ),
    Field(
        name="train",
        kind="bool",
        default=True,
        doc="train by gradient descent; false: no GD, only the SVMs of the optimal tokens (E3)",
        long_name="trained",
        stages=("train",),
        described=ALWAYS,
        probe=Probe(False),
    ),
    Field(
        name="train_head",
        kind="bool",
        default=False,
        doc="train the linear head v jointly with W or (K, Q) (docs/science.md 11; linear head, "
        "task train)",
        long_name="trained head",
        stages=("train", "measure"),
        rule=rules.train_head_rule,
        probe=Probe(True),
    ),
    Field(
        name="task",
        kind="choice",
        default="train",
        doc="train: gradient descent; regpath: solve the norm-constrained problems along a radius "
        "grid instead (docs/science.md 4, regularization path; linear head, train true); ntp: "
        "next-token prediction (8)",
        long_name="task",
        stages=("train", "measure"),
        choices=("train", "regpath", "ntp"),
        described=lambda c: c.task != "train",
        rule=rules.task_rule,
        probe=Probe("regpath"),
    ),
    Field(
        name="radius_min",
        kind="real",
        default=0.1,
        doc="regpath only: smallest radius (> 0); radii geometric from min to max, "
        "checkpoint_count of them",
        long_name="smallest radius",
        stages=("train",),
        must=_POSITIVE_MUST,
        bounds={"gt": 0},
        allowed="> 0",
        applies=lambda c: c.task == "regpath",
        described=lambda c: c.task != "train",
        probe=Probe(0.2, {"task": "regpath"}),
    ),
    Field(
        name="radius_max",
        kind="real",
        default=100.0,
        doc="regpath only: largest radius (> radius_min)",
        long_name="largest radius",
        stages=("train",),
        must=_POSITIVE_MUST,
        bounds={"gt": 0},
        allowed="> radius_min",
        applies=lambda c: c.task == "regpath",
        described=lambda c: c.task != "train",
        rule=rules.radius_rule,
        probe=Probe(50.0, {"task": "regpath"}),
    ),
    Field(
        name="K",
        kind="int",
        default=6,
        doc="ntp only: vocabulary size (>= 2; docs/science.md 8)",
        long_name="vocabulary size K",
        stages=("data",),
        must="an integer >= 2",
        bounds={"ge": 2, "le": MAX_SIZE},
        above=f"at most {MAX_SIZE}",
        allowed=f"2..{MAX_SIZE}",
        applies=lambda c: c.task == "ntp",
        described=lambda c: c.task == "ntp",
        probe=Probe(7, {"task": "ntp", "generator": "ntp_acyclic"}),
    ),
    Field(
        name="patch",
        kind="int",
        default=2,
        doc="digits / photos only: side of the square patches (tokens) of an 8x8 image; "
        "T = (8 / patch)^2, d = patch^2 (photos: 3 patch^2) pixels (docs/science.md 9)",
        long_name="patch side",
        stages=("data",),
        must="2 or 4 (a patch side dividing 8)",
        bounds={"ge": 2, "le": 4},
        allowed="2, 4",
        applies=_real,
        described=_real,
        probe=Probe(4, {"generator": "digits"}),
    ),
    Field(
        name="positional",
        kind="bool",
        default=False,
        doc="digits / photos only: append the one-hot patch position to each token (d grows by T)",
        long_name="positional encoding",
        stages=("data",),
        applies=_real,
        described=_real,
        probe=Probe(True, {"generator": "digits"}),
    ),
    Field(
        name="digit_pos",
        kind="int",
        default=3,
        doc=_DIGITS + "the digit of label +1 (0..9)",
        long_name="digit of label +1",
        stages=("data",),
        must="a digit 0..9",
        bounds={"ge": 0, "le": 9},
        allowed="0..9",
        applies=lambda c: c.generator == "digits",
        described=lambda c: c.generator == "digits",
        probe=Probe(1, {"generator": "digits"}),
    ),
    Field(
        name="digit_neg",
        kind="int",
        default=8,
        doc=_DIGITS + "the digit of label -1 (0..9, not digit_pos)",
        long_name="digit of label -1",
        stages=("data",),
        must="a digit 0..9",
        bounds={"ge": 0, "le": 9},
        allowed="0..9, not digit_pos",
        applies=lambda c: c.generator == "digits",
        described=lambda c: c.generator == "digits",
        probe=Probe(1, {"generator": "digits"}),
    ),
    Field(
        name="heads",
        kind="int",
        default=1,
        doc="attention heads H averaged through the linear head, stacked normalized GD "
        "(docs/science.md 12; task train, head linear, attention cross or self)",
        long_name="attention heads H",
        stages=("train", "measure"),
        must="a positive integer",
        bounds={"ge": 1, "le": MAX_HEADS},
        above=f"at most {MAX_HEADS}",
        allowed=f"1..{MAX_HEADS}",
        rule=rules.heads_rule,
        probe=Probe(2),
    ),
    Field(
        name="norm_svms",
        kind="bool",
        default=False,
        doc="also solve the max-entry, spectral, l_1.5 and l_3 Att-SVMs of alpha and correlate GD "
        "with them (docs/science.md 10; not for task ntp)",
        long_name="norm SVMs",
        stages=("measure",),
        probe=Probe(True),
    ),
    Field(
        name="seed",
        kind="int",
        default=0,
        doc="random seed of data and initialization (>= 0)",
        long_name="seed",
        stages=("data", "train"),
        must="a non-negative integer",
        bounds={"ge": 0, "le": MAX_SEED},
        above=f"at most 2**63 - 1 = {MAX_SEED} (seeds are stored as int64)",
        allowed="0..2**63 - 1 (set through seeds)",
        described=ALWAYS,
        probe=Probe(1),
        axis=False,
    ),
    Field(
        name="ridge",
        kind="real",
        default=2.220446049250313e-16,
        doc="KQ only: the ridge eps_r on ||K||_F^2 + ||Q||_F^2 in the training loss (>= 0; "
        "default float64 machine epsilon, the official code's; docs/science.md 3, 11)",
        long_name="ridge on K and Q",
        stages=("train",),
        must="a non-negative finite number",
        bounds={"ge": 0},
        allowed=">= 0",
        applies=lambda c: c.param == "KQ" and c.task != "regpath",
        probe=Probe(0.1, {"param": "KQ"}),
    ),
    Field(
        name="adam_beta1",
        kind="real",
        default=0.9,
        doc="optimizer adam only: beta_1, the decay of the first-moment average (0 <= beta_1 < 1; "
        "default torch's; docs/science.md 10)",
        long_name="Adam beta_1",
        stages=("train",),
        must="a number in [0, 1)",
        bounds={"ge": 0, "lt": 1},
        allowed="[0, 1)",
        applies=lambda c: c.optimizer == "adam",
        probe=Probe(0.5, {"optimizer": "adam"}),
    ),
    Field(
        name="adam_beta2",
        kind="real",
        default=0.999,
        doc="optimizer adam only: beta_2, the decay of the second-moment average (0 <= beta_2 < "
        "1; default torch's; docs/science.md 10)",
        long_name="Adam beta_2",
        stages=("train",),
        must="a number in [0, 1)",
        bounds={"ge": 0, "lt": 1},
        allowed="[0, 1)",
        applies=lambda c: c.optimizer == "adam",
        probe=Probe(0.95, {"optimizer": "adam"}),
    ),
    Field(
        name="snr",
        kind="real",
        default=1.0,
        doc="signal_noise and magen only: signal-to-noise ratio ||mu|| / (sigma sqrt(d)) of the "
        "signal token (> 0; docs/science.md 15)",
        long_name="signal-to-noise ratio",
        stages=("data",),
        must=_POSITIVE_MUST,
        bounds={"gt": 0},
        allowed="> 0",
        applies=_token_model,
        probe=Probe(2.0, {"generator": "signal_noise"}),
    ),
    Field(
        name="label_flip",
        kind="real",
        default=0.0,
        doc="signal_noise and magen: probability that a label (training and test) is flipped; "
        "weakly_relevant: the share of noisy training labels, 2 floor(ceil(n label_flip) / 2) "
        "flipped, half in each class (test labels clean); in [0, 0.5) (docs/science.md 15)",
        long_name="label-flip rate",
        stages=("data",),
        must="a number in [0, 0.5)",
        bounds={"ge": 0, "lt": 0.5},
        allowed="[0, 0.5)",
        units="1",
        applies=_label_noise,
        probe=Probe(0.45, {"generator": "signal_noise"}),
    ),
    Field(
        name="n_test",
        kind="int",
        default=0,
        doc="held-out examples drawn from the cell's generator with seeds disjoint from the "
        "training ones; > 0 stores test loss and error (docs/science.md 15; generator gaussian, "
        "signal_noise or weakly_relevant, task train, one fixed linear head, cross or self "
        "attention; magen, its head trained)",
        long_name="test examples",
        stages=("measure",),
        must="a non-negative integer",
        bounds={"ge": 0, "le": MAX_SIZE},
        above=f"at most {MAX_SIZE}",
        allowed=f"0..{MAX_SIZE}",
        rule=rules.n_test_rule,
        probe=Probe(20, {"generator": "signal_noise"}),
    ),
    Field(
        name="svm_route",
        kind="choice",
        default="auto",
        doc="the route the Frobenius and nuclear Att-SVMs (of alpha and opt, of each head, the "
        "NTP-SVM) try first wherever it applies, for a route ablation (auto: their route "
        "tables, attnsvm/svm/routes.py; every answer takes its certificate; docs/science.md 4)",
        long_name="SVM route",
        stages=("measure",),
        choices=("auto", *SVM_ROUTES),
        probe=Probe("clarabel-dual"),
    ),
    Field(
        name="batch_size",
        kind="optional int",
        default=None,
        doc="examples per step, drawn in epochs without replacement from the cell's seed (stream "
        "4; docs/science.md 10, mini-batches); null: full batch (task train, one fixed head, "
        "cross or self attention, not polyak)",
        long_name="batch size",
        stages=("train",),
        must="an integer in [1, n] or null (full batch)",
        bounds={"ge": 1},
        allowed="1..n or null",
        rule=rules.batch_size_rule,
        probe=Probe(1),
    ),
    Field(
        name="weight_decay",
        kind="real",
        default=0.0,
        doc="lambda of the penalty lambda/2 (||W||_F^2, or ||K||_F^2 + ||Q||_F^2) added to the "
        "training loss, and the regularized optimum's residuals (>= 0; docs/science.md 4, weight "
        "decay; not task regpath, not polyak)",
        long_name="weight decay",
        stages=("train", "measure"),
        must="a non-negative finite number",
        bounds={"ge": 0},
        allowed=">= 0",
        applies=lambda c: c.task != "regpath" and c.train,
        rule=rules.weight_decay_rule,
        probe=Probe(0.1),
    ),
    Field(
        name="init_scale",
        kind="real",
        default=1.0,
        doc="multiplies the initial W, or each of K and Q, of docs/science.md 3 (> 0; not task "
        "regpath)",
        long_name="initial scale",
        stages=("train",),
        must=_POSITIVE_MUST,
        bounds={"gt": 0},
        allowed="> 0",
        applies=lambda c: c.task != "regpath" and c.train,
        probe=Probe(3.0),
    ),
    Field(
        name="momentum",
        kind="real",
        default=0.9,
        doc="optimizer signum / muon only: beta, the decay of their momentum average (0 <= beta "
        "< 1; docs/science.md 10)",
        long_name="momentum beta",
        stages=("train",),
        must="a number in [0, 1)",
        bounds={"ge": 0, "lt": 1},
        allowed="[0, 1)",
        applies=lambda c: c.optimizer in ("signum", "muon"),
        probe=Probe(0.5, {"optimizer": "signum"}),
    ),
    Field(
        name="signal_norm",
        kind="real",
        default=20.0,
        doc="weakly_relevant only: the signal norm ||mu|| of Sakamoto & Sato's tokens (noise "
        "N(0, I_d), so the SNR is ||mu|| / sqrt(d); > 0; docs/science.md 15)",
        long_name="signal norm",
        stages=("data",),
        must=_POSITIVE_MUST,
        bounds={"gt": 0},
        allowed="> 0",
        applies=_weakly_relevant,
        probe=Probe(5.0, {"generator": "weakly_relevant", "T": 4}),
    ),
    Field(
        name="rho",
        kind="real",
        default=0.1,
        doc="weakly_relevant only: the weak relevance rho, tokens 2 and 3 carry rho mu_y and "
        "rho mu_{-y} (> 0, as their code requires; docs/science.md 15)",
        long_name="weak relevance",
        stages=("data",),
        must=_POSITIVE_MUST,
        bounds={"gt": 0},
        allowed="> 0",
        applies=_weakly_relevant,
        probe=Probe(0.5, {"generator": "weakly_relevant", "T": 4}),
    ),
    # new fields go here, above this line (docs/extending.md)
)
"""Every cell field, in the order of the :class:`~attnsvm.config.cell.Cell` dataclass."""

BY_NAME: Mapping[str, Field] = {f.name: f for f in FIELDS}
#: every field name, in order
NAMES: tuple[str, ...] = tuple(BY_NAME)
#: the fields a config may set in ``fixed`` or ``grid`` (``seed`` comes from ``seeds``)
AXES: tuple[str, ...] = tuple(f.name for f in FIELDS if f.axis)
#: the default of every field
DEFAULTS: Mapping[str, Any] = {f.name: f.default for f in FIELDS}
#: the allowed values of every choice field (validation, CLI choices)
CHOICES: Mapping[str, tuple[str, ...]] = {f.name: f.choices for f in FIELDS if f.kind == "choice"}
#: fields reset to their default where they do not apply (m, lam, radii, K, real-token fields)
CONDITIONAL: tuple[Field, ...] = tuple(f for f in FIELDS if f.applies is not None)
#: fields whose values are floats (YAML 1.1 reads ``1e-3`` as a string: accepted for them)
FLOAT_FIELDS: frozenset[str] = frozenset(f.name for f in FIELDS if f.kind == "real")


#: The order in which the rules that tie fields together are checked (the first broken one is
#: reported); each is its field's ``rule`` (:mod:`attnsvm.config.rules`).
RULE_ORDER = (
    "m", "checkpoint_count", "generator", "radius_max", "task", "train_head", "attention",
    "heads", "head", "optimizer", "n_test", "batch_size", "weight_decay", "init",
)  # fmt: skip


def cross_field_problem(c: Any) -> str | None:
    """The first rule that ties fields of ``c`` together and that ``c`` breaks (or None)."""
    for name in RULE_ORDER:
        problem = BY_NAME[name].rule(c)  # type: ignore[misc]
        if problem:
            return problem
    return None


def _check_registry() -> None:
    """Fail at import on a malformed registry entry (a new field's typo is found at once)."""
    for f in FIELDS:
        if f.kind not in KINDS:
            raise TypeError(f"field {f.name!r}: kind must be one of {KINDS}, got {f.kind!r}")
        if not set(f.stages) <= set(STAGES):
            raise TypeError(f"field {f.name!r}: stages must be among {STAGES}, got {f.stages}")
        if not f.stages and not f.unused:
            raise TypeError(f"field {f.name!r} has no stage: say why it is unused (unused=...)")
        if f.stages and f.probe is None:
            raise TypeError(f"field {f.name!r} needs a probe: the change that shows it is used")
        if f.kind == "choice" and f.default not in f.choices:
            raise TypeError(f"field {f.name!r}: default {f.default!r} is not a choice")
    if set(RULE_ORDER) - set(NAMES) or {f.name for f in FIELDS if f.rule} - set(RULE_ORDER):
        raise TypeError("RULE_ORDER must name exactly the fields that have a rule")


_check_registry()
