"""A reviewer's mechanical checks of a drawn figure (docs/science.md §6: what the figures show).

:func:`check_figure` inspects a matplotlib Figure after drawing it (the renderer's extents of
every text, :meth:`~matplotlib.artist.Artist.get_window_extent`) and returns the defects a
reviewer would send back, each a :class:`Defect` naming its rule and the artists involved:

``overlap``
    two text boxes (titles, axis labels, tick labels, annotations, legends, suptitle, figure
    texts) overlap;
``canvas``
    a text box leaves the canvas;
``legend``
    two entries of one legend are drawn alike (same colour, line style, marker, hatch), or
    one label appears twice;
``unexplained``
    a data line's colour, line style or marker is explained by no legend of its panel or of
    the figure (a solid and a dashed series with a legend that draws both solid);
``log-axis``
    a log axis with a non-positive limit or a "0" tick, or bars on a log axis (a bar's length
    from an arbitrary floor means nothing);
``marker-text``
    an annotation or a legend inside a panel covers one of its data markers;
``legend-line``
    a legend inside a panel lies across one of its lines (data or reference lines);
``bookkeeping``
    seed or cell-status counts drawn in the image (they belong in the caption);
``label``
    a raw identifier (``beta2``, ``mirror1p5``, ``snake_case``), a Greek letter with its index
    on the line (``β2`` for :math:`\\beta_2`) or a double space in a text.

The checks read only public matplotlib state, plus the legend's handle boxes
(``Legend._legend_handle_box``) to compare legend glyphs as drawn.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.collections import Collection  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.container import BarContainer, ErrorbarContainer  # noqa: E402
from matplotlib.legend import Legend  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from attnsvm.report.figures import figure  # noqa: E402
from attnsvm.report.sweepdata import load_summary, load_sweep  # noqa: E402

#: every rule :func:`check_figure` applies
RULES = (
    "overlap",
    "canvas",
    "legend",
    "unexplained",
    "log-axis",
    "marker-text",
    "legend-line",
    "bookkeeping",
    "label",
)
#: overlaps and excursions up to this many pixels (at the figure's dpi) are tolerated
TOLERANCE_PX = 1.0

_BOOKKEEPING = re.compile(r"\bcells?:|\bseeds? per\b|\d+ ok, \d+ failed", re.IGNORECASE)
_MATH = re.compile(r"(?<!\\)\$.*?(?<!\\)\$")
_RAW = re.compile(
    r"\b(?:[A-Za-z]+\d+p\d+|(?:alpha|beta|gamma|lambda|sigma|eta)_?\d+|[a-z]+_[a-z0-9_]+)\b"
    r"|[\u0370-\u03ff]\d"  # a Greek letter and its index on one line (β2): a subscript
)


@dataclass(frozen=True)
class Defect:
    """One finding: the rule it breaks and what, in words a reviewer would use."""

    rule: str
    message: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.message}"


@dataclass(frozen=True)
class _Box:
    name: str
    bbox: Bbox
    owner: object  # the axes (or figure) the box belongs to


# ----------------------------------------------------------------------------- text boxes
def _visible_text(t: Text | None) -> bool:
    return t is not None and t.get_visible() and bool(t.get_text().strip())


def _short(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _tick_labels(ax, axis_name: str) -> Iterator[Text]:
    axis = ax.xaxis if axis_name == "x" else ax.yaxis
    if not axis.get_visible():
        return
    lo, hi = sorted(axis.get_view_interval())
    span = hi - lo
    for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
        loc = tick.get_loc()
        if loc is None or not (lo - 1e-9 * abs(span) <= loc <= hi + 1e-9 * abs(span)):
            continue
        for label in (tick.label1, tick.label2):
            if _visible_text(label):
                yield label


def _axes_tree(fig) -> list:
    out, todo = [], list(fig.axes)
    while todo:
        ax = todo.pop(0)
        if ax in out or not ax.get_visible():
            continue
        out.append(ax)
        todo.extend(getattr(ax, "child_axes", []))
    return out


def _legends(fig) -> list[tuple[Legend, object]]:
    """Every drawn legend and what it belongs to (an axes, or the figure)."""
    out = [(leg, fig) for leg in fig.legends if leg.get_visible()]
    for ax in _axes_tree(fig):
        leg = ax.get_legend()
        if leg is not None and leg.get_visible():
            out.append((leg, ax))
    return out


def text_boxes(fig, renderer) -> list[_Box]:
    """The window extents of every visible text of ``fig`` (a legend as one box)."""
    boxes: list[_Box] = []

    def add(name: str, artist, owner) -> None:
        bbox = artist.get_window_extent(renderer)
        if bbox.width > 0 and bbox.height > 0 and np.all(np.isfinite(bbox.get_points())):
            boxes.append(_Box(name, bbox, owner))

    for attr in ("_suptitle", "_supxlabel", "_supylabel"):
        t = getattr(fig, attr, None)
        if _visible_text(t):
            add(f"figure {attr[1:]} {_short(t.get_text())!r}", t, fig)
    for t in fig.texts:
        if _visible_text(t):
            add(f"figure text {_short(t.get_text())!r}", t, fig)
    for leg, owner in _legends(fig):
        where = "figure" if owner is fig else _axes_name(owner)
        add(f"legend of {where}", leg, owner)
    for ax in _axes_tree(fig):
        name = _axes_name(ax)
        for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None)):
            if _visible_text(t):
                add(f"title {_short(t.get_text())!r} of {name}", t, ax)
        for axis_name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            if axis.get_visible() and _visible_text(axis.label):
                add(
                    f"{axis_name} label {_short(axis.label.get_text())!r} of {name}", axis.label, ax
                )
            if axis.get_visible() and _visible_text(axis.get_offset_text()):
                add(f"{axis_name} offset text of {name}", axis.get_offset_text(), ax)
            for t in _tick_labels(ax, axis_name):
                add(f"{axis_name} tick label {_short(t.get_text())!r} of {name}", t, ax)
        for t in ax.texts:
            if _visible_text(t):
                add(f"text {_short(t.get_text())!r} in {name}", t, ax)
    return boxes


def _axes_name(ax) -> str:
    titles = [getattr(ax, a, None) for a in ("_left_title", "title", "_right_title")]
    title = next((t.get_text() for t in titles if _visible_text(t)), "")
    if title:
        return f"panel {_short(title, 28)!r}"
    label = ax.get_label()
    return f"axes {label!r}" if label and not label.startswith("<") else "an untitled axes"


def _overlap(a: Bbox, b: Bbox, tol: float) -> bool:
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w > tol and h > tol


def _overlaps(boxes: list[_Box], tol: float) -> list[Defect]:
    out = []
    for a, b in itertools.combinations(boxes, 2):
        if _overlap(a.bbox, b.bbox, tol):
            out.append(Defect("overlap", f"{a.name} overlaps {b.name}"))
    return out


def _off_canvas(fig, boxes: list[_Box], tol: float) -> list[Defect]:
    W, H = fig.bbox.width, fig.bbox.height
    out = []
    for b in boxes:
        x0, y0, x1, y1 = b.bbox.x0, b.bbox.y0, b.bbox.x1, b.bbox.y1
        if x0 < -tol or y0 < -tol or x1 > W + tol or y1 > H + tol:
            out.append(Defect("canvas", f"{b.name} leaves the canvas"))
    return out


# ----------------------------------------------------------------------------- legends
def _rgba(c) -> tuple:
    try:
        return tuple(round(float(v), 3) for v in to_rgba(c))
    except (TypeError, ValueError):
        return ("?",)


def _linestyle(line: Line2D):
    ls = line.get_linestyle()
    if ls in ("None", "none", "", " ") or line.get_linewidth() == 0:
        return "none"
    return ls


def _marker(line: Line2D):
    m = line.get_marker()
    return "none" if m in (None, "None", "none", "", " ") else str(m)


def artist_style(artist, linestyle=None) -> tuple:
    """What distinguishes an artist to the eye: colour, line style, marker, fill, hatch
    (``linestyle``: the line style as shown, when it differs from the artist's)."""
    if isinstance(artist, Line2D):
        marker = _marker(artist)
        ls = linestyle or _linestyle(artist)
        return (
            "line",
            _rgba(artist.get_color()) if ls != "none" else None,
            ls,
            marker,
            _rgba(artist.get_markerfacecolor()) if marker != "none" else None,
            _rgba(artist.get_markeredgecolor()) if marker != "none" else None,
        )
    if isinstance(artist, Patch):
        return (
            "patch",
            _rgba(artist.get_facecolor()) if artist.get_fill() else None,
            _rgba(artist.get_edgecolor()) if artist.get_linewidth() else None,
            artist.get_hatch() or "",
        )
    if isinstance(artist, Collection):
        fcs = tuple(_rgba(c) for c in np.atleast_2d(artist.get_facecolor()) if len(c))
        ecs = tuple(_rgba(c) for c in np.atleast_2d(artist.get_edgecolor()) if len(c))
        paths = tuple(tuple(np.round(p.vertices, 2).ravel()[:16]) for p in artist.get_paths()[:1])
        return ("collection", fcs, ecs, artist.get_hatch() or "", paths)
    return (type(artist).__name__,)


def _shown_linestyle(line: Line2D, hidden: float) -> str:
    """The line style a legend glyph shows: a dashed glyph whose every gap falls under the
    marker drawn at its centre (``hidden`` points wide), or beyond its ends, looks solid."""
    ls = _linestyle(line)
    pattern = getattr(line, "_dash_pattern", None)
    x = np.asarray(line.get_xdata(), dtype=float)
    if ls in ("none", "-") or not pattern or not pattern[1] or len(x) < 2:
        return ls
    offset, seq = pattern
    lo, hi = float(np.min(x)), float(np.max(x))
    centre = (lo + hi) / 2
    covered = (centre - hidden / 2, centre + hidden / 2)
    pos, i = lo - float(offset or 0.0), 0
    while pos < hi and i < 10_000:
        seg = float(seq[i % len(seq)])
        if i % 2 == 1 and seg > 0:  # a gap: visible where neither beyond the ends nor covered
            a, b = max(pos, lo), min(pos + seg, hi)
            shown = max(0.0, min(b, covered[0]) - a) + max(0.0, b - max(a, covered[1]))
            if shown >= 0.5:
                return ls
        pos += max(seg, 1e-6)
        i += 1
    return "-"


def _glyph_styles(glyphs: list) -> list[tuple]:
    """The style of each glyph of one legend entry, dashes as shown."""
    hidden = max(
        (g.get_markersize() for g in glyphs if isinstance(g, Line2D) and _marker(g) != "none"),
        default=0.0,
    )
    return [
        artist_style(g, _shown_linestyle(g, hidden) if isinstance(g, Line2D) else None)
        for g in glyphs
    ]


def _entries(legend: Legend) -> list[tuple[str, list]]:
    """``(label, glyphs)`` of each entry of ``legend``, as drawn."""
    out = []
    box = getattr(legend, "_legend_handle_box", None)
    if box is None:
        return out
    for column in box.get_children():
        for row in column.get_children():
            parts = row.get_children()
            if len(parts) != 2:
                continue
            handle_box, text_box = parts
            texts = [c for c in text_box.get_children() if isinstance(c, Text)]
            label = texts[0].get_text() if texts else ""
            out.append((label, [c for c in handle_box.get_children() if c.get_visible()]))
    return out


def legend_entries(legend: Legend) -> list[tuple[str, tuple]]:
    """``(label, style)`` of each entry of ``legend``, the style of its glyphs as drawn."""
    return [
        (label, tuple(sorted(_glyph_styles(glyphs), key=repr)))
        for label, glyphs in _entries(legend)
    ]


def _legend_defects(fig) -> list[Defect]:
    out = []
    for leg, owner in _legends(fig):
        where = "the figure legend" if owner is fig else f"the legend of {_axes_name(owner)}"
        entries = [(lab, st) for lab, st in legend_entries(leg) if lab.strip()]
        for (la, sa), (lb, sb) in itertools.combinations(entries, 2):
            if la == lb:
                out.append(Defect("legend", f"{where} lists {_short(la)!r} twice"))
            elif sa and sa == sb:
                out.append(
                    Defect(
                        "legend",
                        f"{where} draws {_short(la)!r} and {_short(lb)!r} with the same glyph",
                    )
                )
    return out


def _legend_line_styles(leg: Legend) -> list[tuple]:
    """The line glyph styles of every entry of ``leg``, dashes as shown."""
    return [st for _, glyphs in _entries(leg) for st in _glyph_styles(glyphs) if st[0] == "line"]


def _data_lines(ax) -> list[Line2D]:
    """Lines drawn in data coordinates with at least two finite points or a marker (not
    reference lines spanning the axes, e.g. ``axhline``, nor the caps of error bars)."""
    caps = {
        id(cap)
        for c in ax.containers
        if isinstance(c, ErrorbarContainer)
        for cap in (c.lines[1] or ())
    }
    out = []
    for line in ax.get_lines():
        if not line.get_visible() or line.get_transform() is not ax.transData:
            continue
        if id(line) in caps:
            continue
        x = np.asarray(line.get_xdata(), dtype=float)
        y = np.asarray(line.get_ydata(), dtype=float)
        finite = int(np.sum(np.isfinite(x) & np.isfinite(y)))
        if finite >= 2 or (finite == 1 and _marker(line) != "none"):
            out.append(line)
    return out


def _unexplained(fig) -> list[Defect]:
    """Data lines whose colour, line style or marker no applicable legend draws."""
    legends = _legends(fig)
    out = []
    for ax in _axes_tree(fig):
        lines = _data_lines(ax)
        applicable = [leg for leg, owner in legends if owner is fig or _read_with(ax, owner)]
        g_styles = [st for leg in applicable for st in _legend_line_styles(leg)]
        if not applicable:
            styles = {artist_style(line) for line in lines}
            if len(styles) > 1:
                out.append(
                    Defect(
                        "unexplained",
                        f"{_axes_name(ax)} draws {len(styles)} kinds of line and no legend "
                        "explains them",
                    )
                )
            continue
        # ("line", colour, line style, marker, marker face, marker edge)
        colors = {c for st in g_styles for c in (st[1], st[4], st[5]) if c is not None}
        styles = {st[2] for st in g_styles}
        markers = {st[3] for st in g_styles}
        for line in lines:
            what = []
            ls, marker = _linestyle(line), _marker(line)
            if ls != "none" and ls not in styles:
                what.append(f"line style {line.get_linestyle()!r}")
            if marker != "none" and marker not in markers:
                what.append(f"marker {marker!r}")
            color = _rgba(line.get_color() if ls != "none" else line.get_markeredgecolor())
            if color not in colors and not _neutral(color):
                what.append("colour")
            if what:
                label = line.get_label()
                name = _short(label) if label and not label.startswith("_") else "a line"
                out.append(
                    Defect(
                        "unexplained",
                        f"{_axes_name(ax)}: the {' and '.join(what)} of {name!r} appear in "
                        "no legend",
                    )
                )
    return out


def _read_with(ax, owner) -> bool:
    """Whether a legend of ``owner`` explains ``ax``: the same axes, or a panel stacked with it
    in one column sharing its x axis (a legend above an aligned sub-panel)."""
    if owner is ax:
        return True
    if not hasattr(owner, "get_shared_x_axes") or not ax.get_shared_x_axes().joined(ax, owner):
        return False
    a, b = ax.get_subplotspec(), owner.get_subplotspec()
    if a is None or b is None:
        return False
    return a.colspan == b.colspan


def _neutral(rgba: tuple) -> bool:
    """A grey (reference lines, spines): no hue to explain."""
    if len(rgba) < 3 or not all(isinstance(v, float) for v in rgba[:3]):
        return False
    return max(rgba[:3]) - min(rgba[:3]) < 0.02


# ----------------------------------------------------------------------------- log axes
_ZERO = re.compile(r"^\$?(\\mathdefault\{)?[−-]?0(\.0*)?\}?\$?$")


def _log_axes(fig) -> list[Defect]:
    out = []
    for ax in _axes_tree(fig):
        name = _axes_name(ax)
        for axis_name in ("x", "y"):
            scale = getattr(ax, f"get_{axis_name}scale")()
            if scale not in ("log", "symlog"):
                continue
            lo, hi = getattr(ax, f"get_{axis_name}lim")()
            if scale == "log" and min(lo, hi) <= 0:
                out.append(
                    Defect(
                        "log-axis", f"the log {axis_name} axis of {name} reaches {min(lo, hi):g}"
                    )
                )
            for t in _tick_labels(ax, axis_name):
                if _ZERO.match(t.get_text().strip()):
                    out.append(
                        Defect("log-axis", f"the log {axis_name} axis of {name} has a 0 tick")
                    )
                    break
            value_axis = "y" if axis_name == "y" else "x"
            bars = [
                p
                for c in ax.containers
                if isinstance(c, BarContainer)
                and ("vertical" if value_axis == "y" else "horizontal")
                == getattr(c, "orientation", "vertical")
                for p in c.patches
                if p.get_visible()
            ]
            if bars:
                out.append(
                    Defect("log-axis", f"{name} draws {len(bars)} bars on its log {axis_name} axis")
                )
    return out


# ----------------------------------------------------------------------------- text on markers
def _marker_points(ax) -> Iterable[tuple[np.ndarray, float]]:
    """Display positions and radii (pixels) of every data marker of ``ax``."""
    px = ax.figure.dpi / 72.0
    for line in _data_lines(ax):
        if _marker(line) == "none":
            continue
        xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
        xy = xy[np.isfinite(xy).all(axis=1)]
        if len(xy):
            yield line.get_transform().transform(xy), line.get_markersize() * px / 2
    for coll in ax.collections:
        offsets = np.asarray(coll.get_offsets(), dtype=float) if coll.get_visible() else []
        sizes = coll.get_sizes() if hasattr(coll, "get_sizes") else []
        if len(offsets) == 0 or len(sizes) == 0 or not coll.get_offset_transform():
            continue
        offsets = offsets[np.isfinite(offsets).all(axis=1)]
        pts = coll.get_offset_transform().transform(offsets)
        radius = float(np.sqrt(np.max(sizes))) * px / 2
        yield pts, radius


def _marker_texts(fig, renderer) -> list[Defect]:
    """Annotations and legends inside a panel that cover one of its data markers."""
    out = []
    for ax in _axes_tree(fig):
        items = [(f"text {_short(t.get_text())!r}", t) for t in ax.texts if _visible_text(t)]
        leg = ax.get_legend()
        if leg is not None and leg.get_visible():
            items.append(("the legend", leg))
        if not items:
            continue
        points = list(_marker_points(ax))
        for what, artist in items:
            bb = artist.get_window_extent(renderer)
            for pts, r in points:
                dx = np.maximum(np.maximum(bb.x0 - pts[:, 0], pts[:, 0] - bb.x1), 0)
                dy = np.maximum(np.maximum(bb.y0 - pts[:, 1], pts[:, 1] - bb.y1), 0)
                if np.any(np.hypot(dx, dy) < r - TOLERANCE_PX):
                    out.append(Defect("marker-text", f"{what} in {_axes_name(ax)} covers a marker"))
                    break
    return out


def _crosses(bb: Bbox, xy: np.ndarray, samples: int = 50) -> bool:
    """Whether the polyline ``xy`` (display coordinates) passes through the box ``bb``
    (shrunk by the tolerance)."""
    xy = xy[np.isfinite(xy).all(axis=1)]
    if len(xy) < 2:
        return False
    t = np.linspace(0.0, 1.0, samples)[:, None, None]
    pts = (xy[:-1][None] * (1 - t) + xy[1:][None] * t).reshape(-1, 2)
    tol = TOLERANCE_PX
    inside = (
        (pts[:, 0] > bb.x0 + tol)
        & (pts[:, 0] < bb.x1 - tol)
        & (pts[:, 1] > bb.y0 + tol)
        & (pts[:, 1] < bb.y1 - tol)
    )
    return bool(inside.any())


def _legend_lines(fig, renderer) -> list[Defect]:
    """Legends inside a panel that lie across one of its drawn lines."""
    out = []
    for ax in _axes_tree(fig):
        leg = ax.get_legend()
        if leg is None or not leg.get_visible():
            continue
        bb = leg.get_window_extent(renderer)
        for line in ax.get_lines():
            if not line.get_visible() or _linestyle(line) == "none":
                continue
            path = line.get_transform().transform_path(line.get_path())
            if _crosses(bb, np.asarray(path.vertices, dtype=float)):
                label = line.get_label()
                name = _short(label) if label and not label.startswith("_") else "a line"
                out.append(
                    Defect("legend-line", f"the legend of {_axes_name(ax)} lies across {name!r}")
                )
    return out


# ----------------------------------------------------------------------------- words
def _all_texts(fig) -> list[Text]:
    out = [t for t in fig.texts if _visible_text(t)]
    for attr in ("_suptitle", "_supxlabel", "_supylabel"):
        t = getattr(fig, attr, None)
        if _visible_text(t):
            out.append(t)
    for leg, _ in _legends(fig):
        out += [t for t in leg.get_texts() if _visible_text(t)]
        if _visible_text(leg.get_title()):
            out.append(leg.get_title())
    for ax in _axes_tree(fig):
        out += [
            t
            for t in (ax.title, getattr(ax, "_left_title", None), getattr(ax, "_right_title", None))
            if _visible_text(t)
        ]
        out += [t for t in (ax.xaxis.label, ax.yaxis.label) if _visible_text(t)]
        out += [t for t in ax.texts if _visible_text(t)]
        out += list(_tick_labels(ax, "x")) + list(_tick_labels(ax, "y"))
    return out


def _words(fig) -> list[Defect]:
    out = []
    for t in _all_texts(fig):
        text = t.get_text()
        if _BOOKKEEPING.search(text):
            out.append(Defect("bookkeeping", f"the image states run bookkeeping: {_short(text)!r}"))
        plain = _MATH.sub(" ", text)
        if "  " in text.replace("\n", " ").strip():
            out.append(Defect("label", f"double space in {_short(text)!r}"))
        raw = _RAW.search(plain)
        if raw:
            out.append(Defect("label", f"raw identifier {raw.group(0)!r} in {_short(text)!r}"))
    return out


# ----------------------------------------------------------------------------- entry point
def check_figure(fig, rules: Iterable[str] = RULES) -> list[Defect]:
    """The defects of ``fig`` under ``rules`` (all of :data:`RULES` by default), after
    drawing it on its canvas at its dpi."""
    rules = tuple(rules)
    unknown = set(rules) - set(RULES)
    if unknown:
        raise ValueError(f"unknown rules {sorted(unknown)}; expected some of {list(RULES)}")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    out: list[Defect] = []
    boxes = text_boxes(fig, renderer) if {"overlap", "canvas"} & set(rules) else []
    if "overlap" in rules:
        out += _overlaps(boxes, TOLERANCE_PX)
    if "canvas" in rules:
        out += _off_canvas(fig, boxes, TOLERANCE_PX)
    if "legend" in rules:
        out += _legend_defects(fig)
    if "unexplained" in rules:
        out += _unexplained(fig)
    if "log-axis" in rules:
        out += _log_axes(fig)
    if "marker-text" in rules:
        out += _marker_texts(fig, renderer)
    if "legend-line" in rules:
        out += _legend_lines(fig, renderer)
    if {"bookkeeping", "label"} & set(rules):
        out += [d for d in _words(fig) if d.rule in rules]
    return list(dict.fromkeys(out))


def check_experiment(sweep, summary, names: Iterable[str]) -> dict[str, list[Defect]]:
    """Draw each figure of ``names`` from an experiment's sweep and summary (paths or Datasets,
    as :func:`attnsvm.report.draw.make_figure` reads them) and check it: ``{name: defects}``."""
    out = {}
    summary = load_summary(summary)
    for name in names:
        decl = figure(name)
        fig = decl.plot(load_sweep(sweep, decl.variables), summary)
        try:
            out[name] = check_figure(fig)
        finally:
            plt.close(fig)
    return out


def assert_figure_ok(fig, name: str = "figure", rules: Iterable[str] = RULES) -> None:
    """Raise AssertionError listing every defect of ``fig`` (for tests)."""
    defects = check_figure(fig, rules)
    if defects:
        raise AssertionError(f"{name}: {len(defects)} defects\n" + "\n".join(map(str, defects)))


__all__ = [
    "RULES",
    "Defect",
    "artist_style",
    "assert_figure_ok",
    "check_experiment",
    "check_figure",
    "legend_entries",
]
