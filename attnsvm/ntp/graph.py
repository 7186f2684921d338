"""Token-priority graphs G^(k) and their strongly connected components (docs/science.md §8).

``G^(k)`` has an edge ``y_i -> j`` for every sequence i whose last token is k and every token
``j != y_i`` of it. SCCs come from :func:`scipy.sparse.csgraph.connected_components`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components


@dataclass(frozen=True)
class PriorityGraphs:
    """The graphs of one dataset: ``edges`` (E, 3) distinct rows ``(k, i, j)`` (edge i -> j
    of G^(k), sorted); ``queries`` the distinct last tokens k; ``scc[k, j]`` the component of
    token j in G^(k) (rows of tokens that are never a last token: every token on its own)."""

    K: int
    edges: np.ndarray
    queries: np.ndarray
    scc: np.ndarray

    @property
    def same_scc(self) -> np.ndarray:
        """(E,) bool: whether edge ``(k, i, j)`` joins two tokens of one SCC (i ~ j)."""
        k, i, j = self.edges.T
        return self.scc[k, i] == self.scc[k, j]

    def component_sizes(self) -> list[np.ndarray]:
        """Sizes of the SCCs of each graph G^(k), k in :attr:`queries` (tokens of the graph's
        edges only; tokens G^(k) never saw are not counted)."""
        out = []
        for k in self.queries:
            e = self.edges[self.edges[:, 0] == k]
            nodes = np.unique(e[:, 1:])
            out.append(np.bincount(np.unique(self.scc[k, nodes], return_inverse=True)[1]))
        return out

    def cyclic_components(self) -> list[int]:
        """Sizes of all SCCs with more than one token, over every graph."""
        return [int(s) for sizes in self.component_sizes() for s in sizes if s > 1]


def priority_edges(tokens: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Distinct edges ``(k, y_i, j)``, sorted: sequence i with last token k and label y_i
    adds ``y_i -> j`` for each of its tokens ``j != y_i`` (docs/science.md §8)."""
    tokens, labels = np.asarray(tokens, np.int64), np.asarray(labels, np.int64)
    n, T = tokens.shape
    k = np.broadcast_to(tokens[:, -1:], (n, T))
    y = np.broadcast_to(labels[:, None], (n, T))
    keep = tokens != y
    rows = np.stack([k[keep], y[keep], tokens[keep]], axis=1)
    return np.unique(rows, axis=0) if rows.size else np.zeros((0, 3), np.int64)


def strong_components(edges: np.ndarray, K: int) -> np.ndarray:
    """Component labels (K,) of the directed graph on [K] with ``edges`` (E, 2) rows i -> j."""
    e = np.asarray(edges, np.int64).reshape(-1, 2)
    adj = coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(K, K)).tocsr()
    return connected_components(adj, directed=True, connection="strong")[1]


def priority_graphs(tokens: np.ndarray, labels: np.ndarray, K: int) -> PriorityGraphs:
    """The graphs G^(k) of a dataset and their SCCs (docs/science.md §8)."""
    edges = priority_edges(tokens, labels)
    queries = np.unique(np.asarray(tokens)[:, -1])
    scc = np.tile(np.arange(K), (K, 1))
    for k in queries:
        scc[k] = strong_components(edges[edges[:, 0] == k, 1:], K)
    return PriorityGraphs(K, edges, queries, scc)


def has_cycle(tokens: np.ndarray, labels: np.ndarray, K: int) -> bool:
    """Whether some G^(k) has an SCC of more than one token."""
    return bool(priority_graphs(tokens, labels, K).same_scc.any())
