"""Seeded NTP datasets (docs/science.md §8, "Data"): a vocabulary of K unit embeddings and n
token sequences with next-token labels, synthetic (acyclic or cyclic priority graphs) or cut
from the Python standard library's own source text."""

from __future__ import annotations

import functools
import io
import sys
import sysconfig
import tokenize
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnsvm.gd.data import seeded_rng, unit_rows
from attnsvm.ntp.graph import has_cycle

GENERATORS = ("ntp_acyclic", "ntp_cyclic", "ntp_text")
#: standard-library modules whose source is the text of ``ntp_text`` (shipped with Python)
TEXT_MODULES = ("textwrap", "string", "heapq", "bisect", "fnmatch", "colorsys", "shlex", "queue")
#: redraws of the labels of ``ntp_cyclic`` before giving up
MAX_REDRAWS = 1000
_DATA_STREAM, _EMBED_STREAM = 2, 3  # independent of attnsvm.gd.data's streams 0 and 1


class NTPDataError(ValueError):
    """The data a cell asks for cannot be drawn (the message says why)."""


@dataclass(frozen=True)
class NTPData:
    """One NTP dataset (docs/science.md §8): embeddings ``E`` (K, d), token ids ``tokens``
    (n, T) whose last column is the query, labels ``labels`` (n,) that occur in their row."""

    E: np.ndarray
    tokens: np.ndarray
    labels: np.ndarray

    @property
    def K(self) -> int:
        return int(self.E.shape[0])

    @property
    def X(self) -> np.ndarray:
        """Embedded sequences (n, T, d)."""
        return self.E[self.tokens]

    @property
    def Z(self) -> np.ndarray:
        """Queries: the last token of each sequence (n, d)."""
        return self.E[self.tokens[:, -1]]

    @property
    def label_mask(self) -> np.ndarray:
        """(n, T) bool: positions holding the label."""
        return self.tokens == self.labels[:, None]

    @property
    def label_position(self) -> np.ndarray:
        """(n,) the first position of each sequence holding its label."""
        return np.argmax(self.label_mask, axis=1)


def embeddings(K: int, d: int, seed: int) -> np.ndarray:
    """K embeddings, i.i.d. N(0, I_d) rows normalized to unit norm (docs/science.md §8)."""
    return unit_rows(seeded_rng(seed, _EMBED_STREAM).standard_normal((K, d)))


def _distinct_sequences(rng: np.random.Generator, n: int, T: int, K: int) -> np.ndarray:
    """n rows of T distinct ids in [K], uniformly (argsort of uniforms: one call, no loop)."""
    return np.argsort(rng.random((n, K)), axis=1)[:, :T]


def acyclic(n: int, T: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Tokens and labels of ``ntp_acyclic``: the label is the sequence's token of highest
    priority under a random order per last token (docs/science.md §8)."""
    rng = seeded_rng(seed, _DATA_STREAM)
    tokens = _distinct_sequences(rng, n, T, K)
    priority = rng.random((K, K))  # priority[k, j]: rank of token j when the query is k
    scores = priority[tokens[:, -1:], tokens]  # (n, T)
    return tokens, tokens[np.arange(n), np.argmax(scores, axis=1)]


def cyclic(n: int, T: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Tokens and labels of ``ntp_cyclic``: every sequence ends in token 0 (one priority
    graph G^(0)), labels uniform among the sequence's tokens, redrawn until G^(0) has a cycle
    (docs/science.md §8)."""
    rng = seeded_rng(seed, _DATA_STREAM)
    # token 0 last in every sequence (the notebooks' same_last_token), T-1 distinct others
    tokens = np.concatenate(
        [1 + _distinct_sequences(rng, n, T - 1, K - 1), np.zeros((n, 1), int)], 1
    )
    for _ in range(MAX_REDRAWS):
        labels = tokens[np.arange(n), rng.integers(0, T, n)]
        if has_cycle(tokens, labels, K):
            return tokens, labels
    raise NTPDataError(
        f"ntp_cyclic: no cyclic priority graph in {MAX_REDRAWS} label draws at n={n}, T={T}, "
        f"K={K}; raise n or lower K"
    )


def _module_text(name: str) -> str:
    path = Path(sysconfig.get_paths()["stdlib"]) / f"{name}.py"
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise NTPDataError(f"ntp_text: cannot read the standard library's {path}: {err}") from None


@functools.lru_cache(maxsize=4)
def text_stream(modules: tuple[str, ...] = TEXT_MODULES) -> tuple[str, ...]:
    """The NAME and OP token strings of the standard-library modules, in order."""
    out: list[str] = []
    for name in modules:
        toks = tokenize.generate_tokens(io.StringIO(_module_text(name)).readline)
        out += [t.string for t in toks if t.type in (tokenize.NAME, tokenize.OP)]
    return tuple(out)


def text_windows(K: int, T: int) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """Every window of T consecutive ids of the text restricted to its K most frequent tokens
    whose next id occurs in the window: (windows (N, T), next ids (N,), vocabulary)."""
    stream = text_stream()
    vocab = tuple(s for s, _ in sorted(Counter(stream).items(), key=lambda kv: (-kv[1], kv[0])))
    vocab = vocab[:K]
    index = {s: i for i, s in enumerate(vocab)}
    ids = np.array([index[s] for s in stream if s in index], dtype=np.int64)
    if ids.size <= T:
        raise NTPDataError(f"ntp_text: the text has only {ids.size} tokens of the vocabulary")
    win = np.lib.stride_tricks.sliding_window_view(ids[:-1], T)
    nxt = ids[T:]
    keep = (win == nxt[:, None]).any(axis=1)
    return win[keep], nxt[keep], vocab


def text(n: int, T: int, K: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Tokens and labels of ``ntp_text``: n distinct windows drawn from :func:`text_windows`."""
    win, nxt, _ = text_windows(K, T)
    if len(win) < n:
        raise NTPDataError(f"ntp_text: only {len(win)} windows of T={T} at K={K}, n={n} asked")
    pick = np.sort(seeded_rng(seed, _DATA_STREAM).choice(len(win), n, replace=False))
    return win[pick].copy(), nxt[pick].copy()


def python_version() -> str:
    """The interpreter whose standard library ``ntp_text`` reads."""
    return sys.version.split()[0]


def make_ntp_data(generator: str, n: int, T: int, K: int, d: int, seed: int) -> NTPData:
    """The dataset of an NTP cell (docs/science.md §8)."""
    draw = {"ntp_acyclic": acyclic, "ntp_cyclic": cyclic, "ntp_text": text}.get(generator)
    if draw is None:
        raise NTPDataError(f"unknown NTP generator {generator!r}; expected one of {GENERATORS}")
    if generator != "ntp_text" and T > K:
        raise NTPDataError(f"{generator} draws T distinct tokens: needs T <= K, got T={T}, K={K}")
    tokens, labels = draw(n, T, K, seed)
    return NTPData(embeddings(K, d, seed), tokens.astype(np.int64), labels.astype(np.int64))
