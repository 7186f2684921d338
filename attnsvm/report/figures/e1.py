"""E1: GD paths of W(k) z_i in the plane vs the rays of W_mm z_i and W_mm_* z_i
(docs/science.md §6, E1).

One panel per parameterization (W, KQ): for each example i the path of W(k) z_i over the
checkpoints (K Q^T for KQ runs), its end point, the ray of the Frobenius SVM solution
W_mm z_i (solid) and of the nuclear SVM solution W_mm_* z_i (dashed), both for GD's alpha.
The tokens x_it are drawn in the same plane (W z_i lives in token space: the score of token t
is x_it^T W z_i), the optimal token opt_i of each example as a star, the others as circles.
When W_mm_* has rank 1 its rays for all examples lie on one line, which the legend says.
With d > 2 the first two coordinates are shown (stated in the caption).
"""

from __future__ import annotations

import numpy as np
import xarray as xr
from matplotlib.lines import Line2D

from attnsvm.report import captions, style
from attnsvm.report import sweepdata as sd
from attnsvm.report.figures import Figure

VARIABLES = ("W", "svm_W", "X", "Z", "opt", "corr_fro_alpha", "corr_nuc_alpha", "convergence")
#: relative singular-value cut for "the nuclear SVM has rank 1" (Cell.rank_tol's default)
RANK_TOL = 1e-6


def _trim(mat: np.ndarray) -> np.ndarray:
    """Drop all-NaN padding rows / columns of a (.., row, col) matrix stack."""
    rows = np.isfinite(mat).reshape(-1, *mat.shape[-2:]).any(axis=(0, 2))
    cols = np.isfinite(mat).reshape(-1, *mat.shape[-2:]).any(axis=(0, 1))
    return mat[..., rows, :][..., :, cols]


def _first_ok_seed(sweep: xr.Dataset, param: str):
    ok = sd.select(sd.ok_mask(sweep), param=param)
    ok = ok.values.reshape(-1) if ok.ndim else np.array([bool(ok)])
    idx = np.flatnonzero(ok)
    return (int(idx[0]) if idx.size else None), int(ok.size)


def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if not (np.isfinite(na) and np.isfinite(nb)) or na == 0 or nb == 0:
        return float("nan")
    return float(np.degrees(np.arccos(np.clip(a @ b / (na * nb), -1.0, 1.0))))


def _svm(sweep_cell: xr.Dataset, key: str) -> np.ndarray | None:
    if "svm_W" not in sweep_cell or "svm" not in sweep_cell.dims:
        return None
    if key not in [str(s) for s in sweep_cell["svm"].values]:
        return None
    W = np.asarray(sweep_cell["svm_W"].sel(svm=key).values, dtype=float)
    return W if np.isfinite(W).any() and np.nanmax(np.abs(W)) > 0 else None


def _choose_panels(sweep: xr.Dataset, params: list[str]) -> tuple[list, list[str]]:
    """Per parameterization the cell of its first ok seed (None: no ok cell), and notes."""
    notes: list[str] = []
    panels = []
    for p in params:
        seed_idx, n_seeds = _first_ok_seed(sweep, p)
        if seed_idx is None:
            panels.append((p, None))
            notes.append(f"{p}: no ok cell, panel empty")
            continue
        cell = sd.select(sweep, param=p)
        if "seed" in cell.dims:
            cell = cell.isel(seed=seed_idx)
        panels.append((p, cell))
        if n_seeds > 1:
            notes.append(f"{p}: seed {seed_idx} shown of {n_seeds}")
    if any(int(d) > 2 for d in sd.grid_values(sweep, "d")):
        notes.append("d > 2: first two coordinates shown")
    return panels, notes


def _rank_one_note(nuc: np.ndarray, rays_nuc: np.ndarray) -> str | None:
    """The panel's note when W_mm_* has rank 1 and its rays lie on one line."""
    sv = np.linalg.svd(_trim(nuc), compute_uv=False)
    par = max(
        min(_angle_deg(rays_nuc[0], r), 180 - _angle_deg(rays_nuc[0], r)) for r in rays_nuc[1:]
    )
    if sv[0] > 0 and np.sum(sv / sv[0] > RANK_TOL) == 1 and par < 0.5:
        return "rank 1: one line"
    return None


def _prepare(p: str, cell: xr.Dataset, fig_notes: list[str]):
    """Paths W(k) z_i, the SVMs' rays, the tokens and panel notes of one panel (None: no
    checkpoints); notes for the caption are appended to ``fig_notes``."""
    Wk = np.asarray(cell["W"].values, dtype=float) if "W" in cell else np.empty((0, 0, 0))
    Z = np.asarray(cell["Z"].values, dtype=float)
    ex = np.isfinite(Z).any(axis=1)
    Z = Z[ex][:, np.isfinite(Z[ex]).all(axis=0)]
    Wk = _trim(Wk) if Wk.size else Wk
    if Wk.ndim != 3 or Wk.shape[0] == 0:
        fig_notes.append(f"{p}: no checkpoints")
        return None
    Wk = Wk[np.isfinite(Wk).all(axis=(1, 2))]
    k = min(Wk.shape[-1], Z.shape[-1])
    paths = np.einsum("krc,ic->kir", Wk[..., :k], Z[:, :k])[..., :2]
    fro, nuc = _svm(cell, "fro_alpha"), _svm(cell, "nuc_alpha")
    rays_fro = None if fro is None else (_trim(fro)[:, :k] @ Z[:, :k].T).T[:, :2]
    rays_nuc = None if nuc is None else (_trim(nuc)[:, :k] @ Z[:, :k].T).T[:, :2]
    if fro is None:
        fig_notes.append(f"{p}: Frobenius SVM (GD's alpha) infeasible or missing, no solid ray")
    if nuc is None:
        fig_notes.append(f"{p}: nuclear SVM (GD's alpha) infeasible or missing, no dashed ray")
    panel_notes = []
    if rays_fro is not None and rays_nuc is not None:
        ang = max(_angle_deg(a, b) for a, b in zip(rays_fro, rays_nuc, strict=True))
        if np.isfinite(ang) and ang < 0.5:
            fig_notes.append(f"{p}: Frobenius and nuclear rays coincide (largest angle {ang:.2g}°)")
    if nuc is not None and len(rays_nuc) > 1:
        note = _rank_one_note(nuc, rays_nuc)
        if note:
            panel_notes.append(note)
    tokens = None
    if "X" in cell:
        X = np.asarray(cell["X"].values, dtype=float)[ex]
        X = X[:, np.isfinite(X).all(axis=(0, 2))][..., : min(k, X.shape[-1])][..., :2]
        opt = np.asarray(cell["opt"].values).astype(int)[ex] if "opt" in cell else None
        tokens = (X, opt)
    return paths, rays_fro, rays_nuc, cell, tokens, panel_notes


def _draw_tokens(ax, tokens, radius: float) -> float:
    """The tokens x_it in the plane of W z_i, scaled to the panel, the optimal ones as stars;
    returns the scale."""
    X, opt = tokens
    colors = style.PALETTE
    # tokens share the plane with W z_i but are O(1) while W(k) z_i grows: scaled to
    # the panel (directions are what the scores x^T W z_i compare), scale in the legend
    xmax = float(np.nanmax(np.linalg.norm(X, axis=-1)))
    scale = 0.8 * radius / 1.12 / xmax if xmax > 0 else 1.0
    for i in range(X.shape[0]):
        c = colors[(i + 2) % len(colors)]
        for t in range(X.shape[1]):
            star = opt is not None and t == opt[i]
            ax.plot(*(scale * X[i, t]), marker="*" if star else "o", ms=9 if star else 4,
                    mfc=c if star else "white", mec=c, mew=0.9, ls="",
                    zorder=3)  # fmt: skip
    return scale


def _draw_paths(ax, paths, rays_fro, rays_nuc, radius: float) -> None:
    """Each example's path W(k) z_i, its end point and the rays of both SVMs."""
    colors = style.PALETTE
    for i in range(paths.shape[1]):
        c = colors[(i + 2) % len(colors)]
        ax.plot(paths[:, i, 0], paths[:, i, 1], color=c, lw=1.4)
        ax.plot(*paths[-1, i], "o", color=c, ms=3.5, zorder=4)
        for rays, ls, lab in ((rays_fro, "-", "fro"), (rays_nuc, "--", "nuc")):
            if rays is None:
                continue
            r = rays[i] / (np.linalg.norm(rays[i]) or 1.0) * radius
            ax.plot(
                [0, r[0]],
                [0, r[1]],
                color="0.15" if lab == "fro" else "0.6",
                lw=0.9 if lab == "fro" else 1.1,
                linestyle=ls,
                zorder=1 if lab == "fro" else 1.5,
            )


def _draw_panel(ax, letter: str, p: str, data) -> dict:
    """One panel; returns what the legend says of it: the tokens' scale, the paths drawn,
    whether the nuclear rays lie on one line."""
    label = style.PARAM_LABELS.get(p, p)
    if data is None:
        style.panel_label(ax, letter, f"{label} run: no data")
        ax.text(0.5, 0.5, "no ok cell", transform=ax.transAxes, ha="center", color="0.4")
        return {}
    paths, rays_fro, rays_nuc, cell, tokens, panel_notes = data
    radius = float(np.nanmax(np.linalg.norm(paths, axis=-1))) * 1.12 or 1.0
    scale = _draw_tokens(ax, tokens, radius) if tokens is not None else None
    _draw_paths(ax, paths, rays_fro, rays_nuc, radius)
    ax.set_aspect("equal", adjustable="box")
    lim = radius * 1.02
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.axhline(0, color="0.85", lw=0.5, zorder=0)
    ax.axvline(0, color="0.85", lw=0.5, zorder=0)
    cf = float(cell["corr_fro_alpha"]) if "corr_fro_alpha" in cell else float("nan")
    cn = float(cell["corr_nuc_alpha"]) if "corr_nuc_alpha" in cell else float("nan")
    corr = (
        rf"$\mathrm{{corr}}(W, {style.W_MM})={cf:.3f}$"
        if p == "W"
        else rf"$\mathrm{{corr}}(KQ^{{\top}}, {style.W_MM_NUC})={cn:.3f}$"
    )
    style.panel_label(ax, letter, f"{label} run; final {corr}")
    what = "W z_i" if p == "W" else r"K Q^{\top} z_i"
    ax.set_xlabel(f"first coordinate of ${what}$ and of the tokens")
    ax.set_ylabel(f"second coordinate of ${what}$")
    return {
        "letter": letter,
        "scale": scale,
        "examples": paths.shape[1],
        "fro": rays_fro is not None,
        "nuc": rays_nuc is not None,
        "one_line": bool(panel_notes),
    }


def _legend(fig, drawn: list[dict]) -> None:
    """One legend below the panels for what every panel draws (the tokens' scale per panel)."""
    drawn = [d for d in drawn if d]
    if not drawn:
        return
    colors = style.PALETTE
    handles = [
        Line2D([], [], color=colors[(i + 2) % len(colors)], lw=1.4, marker="o", ms=3.5,
               markevery=[1], label=f"example $i={i + 1}$: path, last iterate")
        for i in range(max(d["examples"] for d in drawn))
    ]  # fmt: skip
    scales = [f"×{d['scale']:.3g} in ({d['letter']})" for d in drawn if d["scale"] is not None]
    if scales:
        handles += [
            Line2D([], [], marker="o", ms=4, mfc="white", mec="0.3", ls="",
                   label=rf"tokens $x_{{it}}$ ({', '.join(scales)})"),
            Line2D([], [], marker="*", ms=8, mfc="0.3", mec="0.3", ls="",
                   label=r"optimal token $x_{i,\mathrm{opt}_i}$"),
        ]  # fmt: skip
    if any(d["fro"] for d in drawn):
        handles.append(Line2D([], [], color="0.15", lw=0.9,
                              label=rf"ray ${style.W_MM} z_i$ (Frobenius)"))  # fmt: skip
    if any(d["nuc"] for d in drawn):
        one = [f"({d['letter']})" for d in drawn if d["one_line"]]
        note = f"; rank 1 in {', '.join(one)}: one line" if one else ""
        handles.append(Line2D([], [], color="0.6", lw=1.1, ls="--",
                              label=rf"ray ${style.W_MM_NUC} z_i$ (nuclear{note})"))  # fmt: skip
    fig.legend(handles=handles, loc="outside lower center", ncol=3)


def plot(sweep: xr.Dataset, summary: xr.Dataset):
    """E1 (docs/science.md §6): one seed's trajectories, read from the sweep (per-seed data;
    nothing of the summary is drawn, the caption's numbers are)."""
    panels, notes = _choose_panels(sweep, sd.params_of(sweep))
    # panel-specific notes (SVM availability, ray angles)
    fig_notes: list[str] = []
    prepared = [(p, None if cell is None else _prepare(p, cell, fig_notes)) for p, cell in panels]
    extra = ["; ".join(notes)] if notes else []
    extra += ["; ".join(fig_notes)] if fig_notes else []
    extra.append("dot: the last iterate of each path")
    fig, axes = style.new_figure(
        1, len(prepared), width=3.0 * len(prepared) + 0.3, height=3.6, squeeze=False
    )
    drawn = [
        _draw_panel(ax, "abcdefgh"[j], p, data)
        for j, (ax, (p, data)) in enumerate(zip(axes[0], prepared, strict=True))
    ]
    _legend(fig, drawn)
    style.add_notes(fig, style.notes_text(None, extra))
    return fig


#: the tasks whose cells this figure draws (checked against each experiment at config time)
TASKS = ("train",)

FIGURE = Figure(
    name="e1",
    label="E1: GD trajectories",
    what=(
        "GD trajectories of *W*\\ (*k*) *z*\\ :sub:`i` for *W* trained directly and for "
        f"*W* = {captions.KQ} against the rays of {captions.WMM} *z*\\ :sub:`i` (Frobenius "
        f"SVM, solid) and {captions.WMM_NUC} *z*\\ :sub:`i` (nuclear SVM, dashed)."
    ),
    look=(
        "Each path should bend onto its own SVM's ray: *W* runs onto the Frobenius ray, "
        "*KQ* runs onto the nuclear ray."
    ),
    plot=plot,
    numbers=lambda summary: captions.corr_lines(summary, cross=True),
    variables=VARIABLES,
)
