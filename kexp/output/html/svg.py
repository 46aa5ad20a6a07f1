"""The report's charts, as SVG drawn here (no charting library, no script).

* :func:`score_chart`: score over iterations, one marker per experiment (buggy and
  pending ones in a band below the axis, regressions as downward triangles), the
  interval of a score as a whisker, the best score so far as a step line and the
  lineage path to the best experiment as a line, each campaign's lines in a colour of
  its own (:func:`campaign_series`);
* :func:`lineage_graph`: lineage trees (x: generation, y: one row per leaf, elbow
  links), packed side by side, the path to the best experiment drawn thick and dead
  ends ringed;
* :func:`heatmap`: per-configuration speedups, one row per configuration, one column
  per experiment that records them;
* :func:`outcome_bar`: counts by outcome as one stacked bar;
* :func:`outcome_mix`: the same, small, for one row of a table.

Every marker is a link to its experiment's page with a tooltip (``<title>``), up to
:data:`MAX_LINKED` markers in a chart; past that (an operator of thousands of
experiments) the markers are drawn as one path per kind, which a browser paints at
once, and only the notable ones (the lineage path to the best, the steps of the best so
far) are links: the operator's table of experiments links every one. Every text is
escaped with :func:`kexp.output.html.markup.text`. Colors come from the report's
stylesheet by class (``o-improvement``...), except the heatmap's and the campaigns'
lines', computed here (SVG attributes: the pages forbid inline styles).
"""

from __future__ import annotations

import colorsys
import dataclasses
import math
from collections.abc import Callable, Sequence

from kexp.core.outcome import UNMEASURED_OUTCOMES
from kexp.output.html.markup import one_line, text
from kexp.storage.lineage import TreeNode

#: Outcomes drawn in the band below the score axis (their score is no measurement).
UNSCORED = UNMEASURED_OUTCOMES
#: The most markers a chart draws as links with a tooltip each (see the module's doc).
MAX_LINKED = 1000
#: The colour of one campaign's lines: the best's green of report.css (its legend's key).
#: Of several, each its own, from :func:`candidate_colours` (:func:`campaign_series`).
PALETTE = ("#0b6e2f", "#1f5fbf", "#b8336a", "#6a3d9a", "#138086", "#8c6d1f", "#3b3f46", "#c2185b")
#: The colours of the score chart's fixed legend keys (report.css: the outcomes, the
#: lineage path's green, the interval's grey, the control's): no campaign's lines take
#: one of them, or one near it.
FIXED_KEYS = (
    "#1a9641", "#8c96a3", "#e08214", "#8e44ad", "#d7301f",
    "#7a0d0d", "#2b83ba", "#0b6e2f", "#7a828e", "#5d6470",
)  # fmt: skip
#: The least CIE76 colour distance (Delta E) kept between two campaigns' colours, and
#: between one and a fixed key, while enough candidates are that far apart (about 10:
#: hard to tell apart on a thin line).
MIN_DISTANCE = 20.0


@dataclasses.dataclass(frozen=True)
class Point:
    """One experiment on the score chart."""

    href: str
    label: str
    outcome: str
    score: float
    interval: tuple[float, float] | None = None
    #: Its campaign (operator × dtype × env): the best so far is one campaign's.
    campaign: tuple[str, ...] = ()


def candidate_colours() -> list[str]:
    """The colours a campaign's lines may take (``#rrggbb``), preferred first:
    :data:`PALETTE`'s but its first, then hues a golden angle apart, at three lightnesses
    and two saturations in turn, dark enough to read on white."""
    made = []
    for k in range(360):
        hue = (k * 137.50776 + 15.0) % 360.0 / 360.0
        light, saturation = (0.32, 0.42, 0.24)[k % 3], (0.8, 0.55)[k // 3 % 2]
        red, green, blue = colorsys.hls_to_rgb(hue, light, saturation)
        made.append("#" + "".join(f"{round(c * 255):02x}" for c in (red, green, blue)))
    return list(dict.fromkeys([*PALETTE[1:], *made]))


def lab(colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* (D65) of an sRGB ``#rrggbb``."""
    linear = [int(colour[at : at + 2], 16) / 255 for at in (1, 3, 5)]
    r, g, b = (((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92 for c in linear)
    xyz = (
        (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047,
        0.2126 * r + 0.7152 * g + 0.0722 * b,
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883,
    )
    x, y, z = (t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz)
    return 116 * y - 16, 500 * (x - y), 200 * (y - z)


def distance(one: str, other: str) -> float:
    """The CIE76 colour distance (Delta E) of two ``#rrggbb`` colours."""
    return math.dist(lab(one), lab(other))


def campaign_series(points: Sequence[Point]) -> dict[tuple[str, ...], str]:
    """Each campaign of ``points``, in the order it first appears, with the colour its
    lines are drawn in: one campaign the best's green (:data:`PALETTE`'s first); of
    several, each the first candidate (:func:`candidate_colours`) at least
    :data:`MIN_DISTANCE` from every fixed key and every colour taken before it (none
    left: the farthest from them)."""
    campaigns = list(dict.fromkeys(point.campaign for point in points))
    if len(campaigns) < 2:
        return dict.fromkeys(campaigns, PALETTE[0])
    candidates = [(colour, lab(colour)) for colour in candidate_colours()]
    near = {colour: min(math.dist(at, lab(k)) for k in FIXED_KEYS) for colour, at in candidates}
    series: dict[tuple[str, ...], str] = {}
    for campaign in campaigns:
        free = [(near[colour], colour, at) for colour, at in candidates if near[colour] >= 0]
        if not free:  # more campaigns than candidates: the first colours again
            series[campaign] = candidates[len(series) % len(candidates)][0]
            continue
        fit = next((item for item in free if item[0] >= MIN_DISTANCE), None)
        _, colour, taken = fit or max(free, key=lambda item: item[0])
        series[campaign] = colour
        near[colour] = -1.0  # taken
        for other, at in candidates:
            if near[other] >= 0:
                near[other] = min(near[other], math.dist(at, taken))
    return series


def campaign_label(campaign: tuple[str, ...]) -> str:
    """A campaign in words, as plain text: ``fp16 · H100, CUDA 12.4``."""
    return " · ".join(" ".join(str(part).split()) for part in campaign if part) or "(none)"


def _f(value: float) -> str:
    """A coordinate, short."""
    return f"{value:.1f}".rstrip("0").rstrip(".")


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (about ``count`` of them)."""
    if not high > low:
        return [low]
    raw = (high - low) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    ticks = []
    value = first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


def _shape(outcome: str, x: float, y: float, radius: float) -> str:
    """A marker's path data: a downward triangle (regression), a cross (buggy, failed), else a
    dot (a zero-length line, drawn with round caps: see :func:`_dense_paths`)."""
    if outcome == "regression":
        r = radius + 0.6
        return f"M{_f(x - r)} {_f(y - r * 0.6)}h{_f(2 * r)}l{_f(-r)} {_f(r * 1.6)}z"
    if outcome in ("buggy", "failed"):
        r, d = radius + 0.5, _f(2 * radius + 1)
        return f"M{_f(x - r)} {_f(y - r)}l{d} {d}m0 -{d}l-{d} {d}"
    return f"M{_f(x)} {_f(y)}h0"


def _marker(point: Point, x: float, y: float, radius: float) -> str:
    cls = f"pt o-{point.outcome}"
    if point.outcome in ("regression", "buggy", "failed"):
        shape = f'<path class="{cls}" d="{_shape(point.outcome, x, y, radius)}">'
        end = "</path>"
    else:
        shape = f'<circle class="{cls}" cx="{_f(x)}" cy="{_f(y)}" r="{_f(radius)}">'
        end = "</circle>"
    return f'<a href="{text(point.href)}">{shape}<title>{one_line(point.label)}</title>{end}</a>'


def _dense_paths(kind: str, markers: dict[str, list[str]]) -> str:
    """One ``<path>`` per outcome holding all its markers (no link, no tooltip)."""
    return "".join(
        f'<path class="{kind} o-{outcome}" d="{"".join(parts)}"/>'
        for outcome, parts in markers.items()
        if parts
    )


def score_chart(
    points: Sequence[Point],
    best_paths: Sequence[Sequence[int]] = (),
    *,
    width: int = 960,
    height: int = 340,
    baseline: float = 1.0,
    axis: str = "score",
) -> str:
    """Score over iterations: ``points`` in order (x = position); each of ``best_paths``
    holds the indexes of the points from a root to a campaign's best experiment, in
    order. The best so far is drawn per campaign (:attr:`Point.campaign`), each
    campaign's lines in its colour (:func:`campaign_series`), named by a tooltip. Past
    :data:`MAX_LINKED` points, only those of ``best_paths`` and the steps of the best so
    far are links."""
    left, right, top, bottom, band = 58, 14, 12, 40, 26
    plot_w = width - left - right
    plot_h = height - top - bottom - band
    n = len(points)
    scored = [p for p in points if p.outcome not in UNSCORED and math.isfinite(p.score)]
    values = [p.score for p in scored] + [baseline]
    for p in scored:
        if p.interval is not None:
            values.extend(p.interval)
    low, high = min(values), max(values)
    if high - low < 1e-9:
        low, high = low - 0.01, high + 0.01
    pad = (high - low) * 0.05
    low, high = low - pad, high + pad
    step = plot_w / max(1, n)

    def x_of(index: int) -> float:
        return left + (index + 0.5) * step

    def y_of(score: float) -> float:
        return top + (high - score) / (high - low) * plot_h

    band_y = top + plot_h + band / 2 + 4
    radius = 3.0 if n <= 500 else 2.2 if n <= 3000 else 1.6
    out = [
        f'<svg class="chart score-chart" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="score over iterations">'
    ]
    ticks = nice_ticks(low, high)
    grid = "".join(f"M{left} {_f(y_of(t))}h{plot_w}" for t in ticks)
    out.append(f'<path class="grid" d="{grid}"/>')
    for tick in ticks:
        out.append(
            f'<text class="tick" x="{left - 6}" y="{_f(y_of(tick) + 3.5)}" '
            f'text-anchor="end">{tick:g}</text>'
        )
    out.append(
        f'<path class="base" d="M{left} {_f(y_of(baseline))}h{plot_w}"/>'
        f'<text class="tick" x="{left + plot_w}" y="{_f(y_of(baseline) - 3)}" '
        f'text-anchor="end">baseline {baseline:g}</text>'
        f'<path class="band" d="M{left} {_f(band_y)}h{plot_w}"/>'
        f'<text class="tick" x="{left - 6}" y="{_f(band_y + 3.5)}" text-anchor="end">'
        "unscored</text>"
    )
    for tick in nice_ticks(1, max(1, n), 8):
        if float(tick).is_integer() and 1 <= tick <= n:
            x = x_of(int(tick) - 1)
            out.append(
                f'<text class="tick" x="{_f(x)}" y="{height - bottom + 14}" '
                f'text-anchor="middle">{int(tick)}</text>'
            )
    out.append(
        f'<text class="axis" x="{left + plot_w / 2}" y="{height - 6}" '
        'text-anchor="middle">iteration (oldest first)</text>'
        f'<text class="axis" x="12" y="{top + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 12 {top + plot_h / 2})">{text(axis)}</text>'
    )
    whiskers = "".join(
        f"M{_f(x_of(i))} {_f(y_of(p.interval[0]))}V{_f(y_of(p.interval[1]))}"
        for i, p in enumerate(points)
        if p.interval is not None and p.outcome not in UNSCORED
    )
    if whiskers:
        out.append(f'<path class="ci" d="{whiskers}"/>')
    notable = {i for path in best_paths for i in path}
    steps: dict[tuple[str, ...], list[str]] = {}
    best_so_far: dict[tuple[str, ...], float] = {}
    for i, p in enumerate(points):
        if p.outcome != "improvement" or not math.isfinite(p.score):
            continue  # only a step that improved can be a best
        before = best_so_far.get(p.campaign)
        if before is None:
            steps[p.campaign] = [f"M{_f(x_of(i))} {_f(y_of(p.score))}"]
        elif p.score > before:
            steps[p.campaign].append(f"H{_f(x_of(i))}V{_f(y_of(p.score))}")
        else:
            continue
        best_so_far[p.campaign] = p.score
        notable.add(i)
    series = campaign_series(points)
    for campaign, line in steps.items():
        line.append(f"H{_f(left + plot_w)}")
        out.append(
            f'<path class="sofar" d="{"".join(line)}" stroke="{series[campaign]}">'
            f"<title>best so far: {text(campaign_label(campaign))}</title></path>"
        )
    for best_path in best_paths:
        path_points = [
            f"{_f(x_of(i))},{_f(y_of(points[i].score))}"
            for i in best_path
            if points[i].outcome not in UNSCORED and math.isfinite(points[i].score)
        ]
        if len(path_points) > 1:
            campaign = points[best_path[-1]].campaign
            out.append(
                f'<polyline class="best" points="{" ".join(path_points)}" '
                f'stroke="{series[campaign]}">'
                f"<title>lineage path to the best tip: {text(campaign_label(campaign))}</title>"
                "</polyline>"
            )
    linked = len(points) <= MAX_LINKED
    dense: dict[str, list[str]] = {}
    markers: list[str] = []
    for i, p in enumerate(points):
        unscored = p.outcome in UNSCORED or not math.isfinite(p.score)
        y = band_y if unscored else y_of(p.score)
        if linked or i in notable:
            markers.append(_marker(p, x_of(i), y, radius))
        else:
            dense.setdefault(p.outcome, []).append(_shape(p.outcome, x_of(i), y, radius))
    out.append(_dense_paths("pts", dense))  # under the linked markers
    out += markers
    out.append("</svg>")
    return "".join(out)


# --- lineage ----------------------------------------------------------------------------


@dataclasses.dataclass
class _Box:
    tree: TreeNode
    columns: int
    rows: int
    x: float = 0.0
    y: float = 0.0


def _layout(root: TreeNode) -> tuple[dict[int, tuple[int, float]], int, int]:
    """(generation, row) of every node of a tree by ``id(node)``, its columns and rows."""
    where: dict[int, tuple[int, float]] = {}
    next_row = 0
    deepest = 0
    # iterative post-order: a leaf takes the next row, a parent the middle of its children
    stack: list[tuple[TreeNode, int, bool]] = [(root, 0, False)]
    while stack:
        node, depth, done = stack.pop()
        deepest = max(deepest, depth)
        if not node.children:
            where[id(node)] = (depth, float(next_row))
            next_row += 1
        elif done:
            first = where[id(node.children[0])][1]
            last = where[id(node.children[-1])][1]
            where[id(node)] = (depth, (first + last) / 2)
        else:
            stack.append((node, depth, True))
            for child in reversed(node.children):
                stack.append((child, depth + 1, False))
    return where, deepest + 1, max(1, next_row)


def lineage_graph(
    forest: Sequence[TreeNode],
    href: Callable[[TreeNode], str],
    label: Callable[[TreeNode], str],
    *,
    best_paths: Sequence[Sequence[str]] = (),
    path_colours: Sequence[str] = (),
    width: int = 960,
) -> str:
    """The trees of ``forest`` packed in shelves ``width`` wide (biggest first).

    ``href`` and ``label`` give each node's link and tooltip; each of ``best_paths``
    holds the ids from a root to the best experiment of a campaign (operator × dtype ×
    env: drawn thick, the best ringed), in its colour in ``path_colours``
    (:func:`campaign_series`; else :data:`PALETTE`'s first). Past :data:`MAX_LINKED`
    nodes, only those of ``best_paths`` are links.
    """
    on_path = frozenset(i for path in best_paths for i in path)
    colour = {i: c for path, c in zip(best_paths, path_colours, strict=False) for i in path}
    best_ids = frozenset(path[-1] for path in best_paths if path)
    dense: dict[str, list[str]] = {}
    ends: list[str] = []
    layouts = [_layout(tree) for tree in forest]
    nodes_count = sum(len(where) for where, _, _ in layouts)
    linked = nodes_count <= MAX_LINKED
    scale = 2.0 if nodes_count <= 100 else 1.4 if nodes_count <= 600 else 1.0
    dx, dy, gap, margin = 16.0 * scale, 11.0 * scale, 14.0, 8.0
    boxes = [
        _Box(tree, columns, rows) for tree, (_, columns, rows) in zip(forest, layouts, strict=True)
    ]
    order = sorted(range(len(boxes)), key=lambda i: (-boxes[i].rows, -boxes[i].columns, i))
    x, y, shelf = margin, margin, 0.0
    widest = 0.0
    for i in order:
        box = boxes[i]
        box_w, box_h = box.columns * dx, box.rows * dy
        if x > margin and x + box_w > width - margin:
            x, y = margin, y + shelf + gap
            shelf = 0.0
        box.x, box.y = x, y
        x += box_w + gap
        shelf = max(shelf, box_h)
        widest = max(widest, x)
    total_w = max(float(width), widest + margin)
    total_h = y + shelf + margin
    edges: list[str] = []
    best_edges: dict[str, list[str]] = {}
    nodes: list[str] = []
    at: dict[int, tuple[float, float]] = {}
    for box, (where, _, _) in zip(boxes, layouts, strict=True):
        for key, (depth, row) in where.items():
            at[key] = (box.x + depth * dx + dx / 2, box.y + row * dy + dy / 2)
    for box in boxes:
        for node in box.tree.walk():
            px, py = at[id(node)]
            for child in node.children:
                cx, cy = at[id(child)]
                middle = px + dx / 2  # an elbow: along, down the spine, along
                segment = f"M{_f(px)} {_f(py)}H{_f(middle)}V{_f(cy)}H{_f(cx)}"
                on = child.experiment.id in on_path and node.experiment.id in on_path
                if on:
                    drawn = colour.get(child.experiment.id, PALETTE[0])
                    best_edges.setdefault(drawn, []).append(segment)
                else:
                    edges.append(segment)
            exp = node.experiment
            classes = f"nd o-{exp.outcome}"
            if exp.id in on_path:
                classes += " bp"
            if node.dead_end:
                classes += " de"
            if exp.id in best_ids:
                classes += " top"
            radius = (4.2 if exp.id in best_ids else 3.2) * min(scale, 1.5)
            if not linked and exp.id not in on_path:
                dense.setdefault(exp.outcome, []).append(f"M{_f(px)} {_f(py)}h0")
                if node.dead_end:
                    ends.append(f"M{_f(px)} {_f(py)}h0")
                continue
            nodes.append(
                f'<a href="{text(href(node))}"><circle class="{classes}" cx="{_f(px)}" '
                f'cy="{_f(py)}" r="{_f(radius)}"><title>{one_line(label(node))}</title>'
                "</circle></a>"
            )
    rings = f'<path class="nds de" d="{"".join(ends)}"/>' if ends else ""
    return (
        f'<svg class="chart lineage" viewBox="0 0 {_f(total_w)} {_f(total_h)}" '
        f'width="{_f(total_w)}" height="{_f(total_h)}" role="img" aria-label="lineage">'
        f'<path class="edge" d="{"".join(edges)}"/>'
        + "".join(
            f'<path class="edge bp" d="{"".join(parts)}" stroke="{drawn}"/>'
            for drawn, parts in best_edges.items()
        )
        + rings
        + _dense_paths("nds", dense)
        + "".join(nodes)
        + "</svg>"
    )


# --- heatmap ----------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Cell:
    """One configuration of one experiment."""

    column: int
    row: int
    speedup: float | None
    label: str


def speedup_color(speedup: float | None, span: float = 0.10) -> str:
    """Red below 1, white at 1, green above, saturated at ±``span`` (log scale)."""
    if speedup is None or not math.isfinite(speedup) or speedup <= 0:
        return "#c8c8c8"
    t = max(-1.0, min(1.0, math.log(speedup) / math.log(1 + span)))
    if t >= 0:
        target = (26, 150, 65)
    else:
        target, t = (215, 48, 39), -t
    r, g, b = (round(255 + (c - 255) * t) for c in target)
    return f"#{r:02x}{g:02x}{b:02x}"


def heatmap(
    rows: Sequence[str],
    columns: Sequence[tuple[str, str]],
    cells: Sequence[Cell],
    *,
    width: int = 960,
) -> str:
    """Per-configuration speedups: ``rows`` are configuration names, ``columns`` (href,
    label) of experiments, ``cells`` the values (each a link to its experiment, up to
    :data:`MAX_LINKED` cells)."""
    label_w, top, cell_h = 230.0, 8.0, 14.0
    cell_w = max(3.0, min(28.0, (width - label_w - 10) / max(1, len(columns))))
    total_w = label_w + cell_w * len(columns) + 10
    legend_y = top + cell_h * len(rows) + 10
    total_h = legend_y + 30
    out = [
        f'<svg class="chart heatmap" viewBox="0 0 {_f(total_w)} {_f(total_h)}" '
        f'width="{_f(total_w)}" height="{_f(total_h)}" role="img" '
        'aria-label="speedup per configuration">'
    ]
    for index, name in enumerate(rows):
        y = top + index * cell_h + cell_h * 0.72
        out.append(
            f'<text class="tick" x="{_f(label_w - 6)}" y="{_f(y)}" text-anchor="end">'
            f"{one_line(name, 36)}<title>{one_line(name)}</title></text>"
        )
    linked = len(cells) <= MAX_LINKED
    for cell in cells:
        href = columns[cell.column][0]
        x = label_w + cell.column * cell_w
        y = top + cell.row * cell_h
        shape = (
            f'<rect class="hm" x="{_f(x)}" y="{_f(y)}" width="{_f(cell_w)}" '
            f'height="{_f(cell_h)}" fill="{speedup_color(cell.speedup)}"'
        )
        if linked:
            out.append(
                f'<a href="{text(href)}">{shape}><title>{one_line(cell.label)}</title></rect></a>'
            )
        else:
            out.append(shape + "/>")
    for index, value in enumerate((0.9, 0.95, 1.0, 1.05, 1.1)):
        x = label_w + index * 46
        out.append(
            f'<rect x="{_f(x)}" y="{_f(legend_y)}" width="44" height="10" '
            f'fill="{speedup_color(value)}"/><text class="tick" x="{_f(x + 22)}" '
            f'y="{_f(legend_y + 22)}" text-anchor="middle">{value:g}×</text>'
        )
    out.append("</svg>")
    return "".join(out)


# --- outcome bar ---------------------------------------------------------------------------


def outcome_bar(counts: Sequence[tuple[str, int]], *, width: int = 960) -> str:
    """Counts by outcome as one stacked horizontal bar (one segment per outcome)."""
    out = [
        f'<svg class="chart bar" viewBox="0 0 {width} 28" width="{width}" height="28" '
        'role="img" aria-label="experiments by outcome">'
    ]
    for outcome, count, x, w in _stacked(counts, width):
        out.append(
            f'<rect class="seg o-{text(outcome)}" x="{_f(x)}" y="2" width="{_f(w)}" '
            f'height="24"><title>{text(outcome)}: {count:,}</title></rect>'
        )
    out.append("</svg>")
    return "".join(out)


#: The narrowest a segment of :func:`outcome_mix` is drawn (one experiment in
#: thousands is still seen).
MIX_MIN_WIDTH = 2.0


def outcome_mix(
    counts: Sequence[tuple[str, int]], label: str, *, width: int = 120, height: int = 12
) -> str:
    """Counts by outcome as one small stacked bar (a row of a table): each outcome present
    at least :data:`MIX_MIN_WIDTH` wide, ``label`` (plain text) its tooltip. Hidden from
    screen readers: the page says the counts as text beside it."""
    out = [
        f'<svg class="chart mix" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" aria-hidden="true"><title>{text(label)}</title>'
    ]
    for outcome, _, x, w in _stacked(counts, width, MIX_MIN_WIDTH):
        out.append(
            f'<rect class="seg o-{text(outcome)}" x="{_f(x)}" y="0" width="{_f(w)}" '
            f'height="{height}"></rect>'
        )
    out.append("</svg>")
    return "".join(out)


def _stacked(
    counts: Sequence[tuple[str, int]], width: float, least: float = 0.0
) -> list[tuple[str, int, float, float]]:
    """(outcome, count, x, width) of each outcome counted, side by side across
    ``width``: each at least ``least`` wide, the rest shared in proportion."""
    shown = [(outcome, count) for outcome, count in counts if count > 0]
    total = sum(count for _, count in shown) or 1
    free = max(0.0, width - least * len(shown))
    placed: list[tuple[str, int, float, float]] = []
    x = 0.0
    for outcome, count in shown:
        w = least + free * count / total
        placed.append((outcome, count, x, w))
        x += w
    return placed
