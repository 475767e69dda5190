"""PNG plots of a scenario run (`devplace sim run --plots DIR`): what the cluster held after every step.

Every figure is drawn from plain data, the run's `Sample`s and `StepRecord`s, by a pure function that returns the
figure together with the series (names and points) or table rows it drew; `write_plots` is the one function that
touches files. Tests check a picture through that data (the points a line goes through are the points a sample
says), and its file through the PNG read back (written, and of the pixel size returned).

- `availability`: per resource, what the kubelet sees as available, summed over nodes (bold) and per node.
- `pods`: pods per phase (Running and Pending always, others when they occur).
- `utilisation`: nodes x resources at the end of the run, held / allocatable (held = allocatable - available).
- `placement` (only when a step planned or instantiated a fleet app): per app the chosen clusters, and every
  rejected cluster with the placement scheduler's reason.

The x axis is simulated seconds when every step moves time, and otherwise the step number (0 = setup): most steps
take no simulated time (only `advance` and grace periods move the fake clock), and on a time axis they would have no
width at all. The axis label says which; on step numbers the steps where time moved are marked `t=300s`. Step
boundaries are dotted lines. Lines with equal values (two nodes, two phases) are drawn a hair apart so neither hides
the other; the series keep the exact values. Readable from 2 to 50 nodes: per-node lines get a legend up to
`LEGEND_NODES` nodes and are drawn thin and grey beyond, with the sum on its own scale; at most `MAX_PANELS` resources
get a panel (those that change first) and the heat map draws at most `MAX_ROWS` x `MAX_COLUMNS` cells; what is left out
is counted in the title.

matplotlib is the optional `report` extra and loads only when a plot is drawn; without it `write_plots` raises
`errors.Unavailable` naming the extra. It is driven through its object API on the Agg canvas: no pyplot, no
display, no process-wide figure registry, so drawing is safe from any thread.
"""

from __future__ import annotations

import itertools
import math
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from devplace import errors
from devplace.demo._timelines import Report, Sample, StepRecord

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 100
MAX_PANELS = 8
LEGEND_NODES = 8
MAX_ROWS = 50
MAX_COLUMNS = 24
MAX_TABLE_ROWS = 40
PHASES = ("Running", "Pending")
"""Drawn in every pods plot; other phases (Failed, Succeeded) only when some pod reached them."""


@dataclass(frozen=True)
class Series:
    """One line (or one row of cells) of a figure: its name and the points it goes through, in order."""

    name: str
    points: tuple[tuple[float | str, float], ...]


@dataclass(frozen=True)
class Drawing:
    """A figure and the data it was drawn from (series, or a table's rows)."""

    kind: str
    figure: Figure
    series: tuple[Series, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Plot:
    """A PNG written: where, its size in pixels, and the data it shows."""

    kind: str
    path: Path
    width: int
    height: int
    series: tuple[Series, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True)
class Timeline:
    """Where each sample sits on the x axis, what the axis says, and where the steps begin."""

    xs: tuple[float, ...]
    label: str
    by_time: bool
    marks: tuple[tuple[float, str], ...] = ()
    ticks: tuple[tuple[float, str], ...] = field(default=())


def timeline(samples: Sequence[Sample], steps: Sequence[StepRecord]) -> Timeline:
    """Simulated seconds when every step moves time; else the step number (setup is 0, step i is i + 1), each step
    marked with the simulated time where it moved (steps that take no time would vanish on a time axis)."""
    times = [s.time for s in samples]
    if len(times) > 1 and all(later > earlier for earlier, later in itertools.pairwise(times)):
        return Timeline(
            tuple(times),
            "simulated time (s); dotted: steps",
            True,
            tuple((r.sim_time, str(r.index + 1)) for r in steps),
        )
    titles = {r.index + 1: r.title for r in steps}
    ticks: list[tuple[float, str]] = [(0.0, "setup")] if any(s.step < 0 for s in samples) else []
    for number in sorted(titles):
        name = f"{number} {_short(titles[number], 22)}" if len(titles) <= 12 else str(number)
        ticks.append((float(number), name))
    at = {s.step + 1: s.time for s in samples}
    marks = []  # a step begins where the previous state ends; it says the time when time moved
    for number in sorted(titles):
        moved = number in at and at.get(number - 1, at[number]) != at[number]
        marks.append((number - 0.5, f"t={at[number]:g}s" if moved else ""))
    if len(set(times)) > 1:
        label = f"step (simulated time moves from {min(times):g} s to {max(times):g} s where marked)"
    else:
        label = f"step (simulated time stays at {times[0] if times else 0.0:g} s)"
    xs = tuple(float(s.step + 1) for s in samples)
    return Timeline(xs, label, False, tuple(marks), tuple(ticks))


# -- the data behind each figure (pure) ----------------------------------------------------------------------------


def resources_of(samples: Sequence[Sample]) -> list[str]:
    """Every resource any node reported, those whose total availability changes first, then by name."""
    names = sorted({r for s in samples for per_node in s.nodes.values() for r in per_node})

    def changes(resource: str) -> bool:
        totals = {_total(s, resource, "available") for s in samples if _has(s, resource)}
        return len(totals) > 1

    return sorted(names, key=lambda r: (not changes(r), r))


def availability_series(samples: Sequence[Sample], line: Timeline, resource: str) -> list[Series]:
    """The sum over nodes first (`all nodes <resource> available`), then one series per node, each with a point
    for every sample in which it reported the resource."""
    return [Series(name, _points(line, values)) for name, values in _availability(samples, resource)]


def _availability(samples: Sequence[Sample], resource: str) -> list[tuple[str, list[float | None]]]:
    """Per sample, None where the resource was not reported (a node down, a device not there yet)."""
    nodes = sorted({n for s in samples for n in s.nodes})
    total: list[float | None] = [
        float(_total(s, resource, "available")) if _has(s, resource) else None for s in samples
    ]
    out = [(f"all nodes {resource} available", total)]
    for node in nodes:
        values: list[float | None] = [
            float(s.nodes[node][resource]["available"]) if resource in s.nodes.get(node, {}) else None for s in samples
        ]
        if any(v is not None for v in values):
            out.append((f"{node} {resource} available", values))
    return out


def _points(line: Timeline, values: Sequence[float | None]) -> tuple[tuple[float | str, float], ...]:
    return tuple((x, v) for x, v in zip(line.xs, values, strict=True) if v is not None)


def pod_series(samples: Sequence[Sample], line: Timeline) -> list[Series]:
    """Pods per phase at every sample: Running and Pending always, other phases when any pod reached them."""
    seen = {p for s in samples for p in s.pods}
    phases = [*PHASES, *sorted(seen - set(PHASES))]
    return [
        Series(p, tuple((x, float(s.pods.get(p, 0))) for x, s in zip(line.xs, samples, strict=True))) for p in phases
    ]


def utilisation_series(sample: Sample) -> list[Series]:
    """Per running node at `sample`: `<node> held` and `<node> allocatable`, one point per resource."""
    out: list[Series] = []
    for node in sorted(sample.nodes):
        per = sample.nodes[node]
        out.append(Series(f"{node} held", tuple((r, float(v["allocatable"] - v["available"])) for r, v in per.items())))
        out.append(Series(f"{node} allocatable", tuple((r, float(v["allocatable"])) for r, v in per.items())))
    return out


def placement_rows(samples: Sequence[Sample]) -> list[tuple[str, str, str, str]]:
    """The last fleet decision: (app, "placed", cluster, "") per chosen cluster, then (app, "rejected", cluster,
    reason) per rejected one. Empty when no step planned or instantiated."""
    decision = next((s.decision for s in reversed(samples) if s.decision), {})
    rows: list[tuple[str, str, str, str]] = []
    for app in sorted(decision):
        entry = decision[app]
        rows.extend((app, "placed", str(c), "") for c in entry.get("clusters") or [])
        rows.extend((app, "rejected", str(c), str(r)) for c, r in sorted((entry.get("rejected") or {}).items()))
    return rows


# -- figures (pure: plain data in, a figure out) --------------------------------------------------------------------


def draw_availability(samples: Sequence[Sample], steps: Sequence[StepRecord], scenario: str = "") -> Drawing:
    """One panel per resource (at most `MAX_PANELS`): the sum over nodes and a line per node."""
    Figure = _figure_class()
    line = timeline(samples, steps)
    resources = resources_of(samples)
    shown = resources[:MAX_PANELS]
    columns = 1 if len(shown) <= 3 else 2
    rows = max(1, math.ceil(len(shown) / columns))
    figure = Figure(figsize=(10 if columns == 1 else 13, 1.6 + 2.4 * rows), dpi=DPI, layout="constrained")
    axes = figure.subplots(rows, columns, sharex=True, squeeze=False)
    nodes = sorted({n for s in samples for n in s.nodes})
    many = len(nodes) > LEGEND_NODES
    colours = _node_colours(nodes)
    drawn: list[Series] = []
    legend_from: list[Axes] = [axes.flat[0]]
    for n, ax in enumerate(axes.flat):
        if n >= len(shown):
            ax.set_visible(False)
            continue
        resource = shown[n]
        lines = _availability(samples, resource)
        for name, values in lines[1:]:
            node = name.split(" ", 1)[0]
            if many:
                label = f"each node ({len(nodes)})" if node == nodes[0] else None
                _steps(ax, line, values, color="0.6", alpha=0.45, linewidth=0.8, label=label)
            else:  # nodes with equal values would hide each other: each is drawn a little apart (the points stay)
                offset = (nodes.index(node) - (len(nodes) - 1) / 2) * 0.06
                _steps(ax, line, values, offset, color=colours[node], linewidth=1.4, marker="o", label=node)
        ax.set_title(resource, fontsize=10, loc="left")
        ax.set_ylabel("available per node" if many else "available")
        _y_range(ax, [v for _, values in (lines[1:] if many else lines) for v in values])
        if many:  # the sum of 50 nodes would flatten every node's line: it gets its own scale, on the right
            total = ax.twinx()
            if n == 0:
                legend_from.append(total)
            _steps(total, line, lines[0][1], color="black", linewidth=2.4, label="all nodes (right scale)")
            total.set_ylabel("all nodes")
            _y_range(total, lines[0][1])
        else:
            _steps(ax, line, lines[0][1], color="black", linewidth=2.4, label="all nodes")
        _mark_steps(ax, line, label=n < columns)
        drawn.extend(Series(name, _points(line, values)) for name, values in lines)
    if not shown:
        axes.flat[0].text(0.5, 0.5, "no device resources on any node", ha="center", va="center")
        _mark_steps(axes.flat[0], line, label=True)
    for ax in axes[-1]:
        _x_axis(ax, line)
    handles: list[Any] = []
    labels: list[str] = []
    for ax in legend_from:
        more_handles, more_labels = ax.get_legend_handles_labels()
        handles += more_handles
        labels += more_labels
    if handles:
        figure.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 6), fontsize=9)
    more = f" ({len(resources) - len(shown)} more resources not shown)" if len(resources) > len(shown) else ""
    figure.suptitle(f"{_name(scenario)}available per resource, as the kubelet sees it{more}", fontsize=12)
    return Drawing("availability", figure, tuple(drawn))


def draw_pods(samples: Sequence[Sample], steps: Sequence[StepRecord], scenario: str = "") -> Drawing:
    """Pods per phase over the run."""
    Figure = _figure_class()
    line = timeline(samples, steps)
    series = pod_series(samples, line)
    figure = Figure(figsize=(10, 4.2), dpi=DPI, layout="constrained")
    ax = figure.subplots()
    styles = {"Running": ("tab:green", "-"), "Pending": ("tab:orange", "-")}
    for n, s in enumerate(series):  # phases with equal counts would hide each other: drawn a little apart
        colour, style = styles.get(s.name, ("tab:red" if s.name == "Failed" else "tab:gray", "--"))
        values = [p[1] for p in s.points]
        offset = (len(series) - 1 - 2 * n) * 0.03
        _steps(ax, line, values, offset, color=colour, linestyle=style, marker="o", label=s.name)
    ax.set_ylabel("pods")
    _y_range(ax, [v for s in series for _, v in s.points])
    _mark_steps(ax, line, label=True)
    _x_axis(ax, line)
    ax.legend(loc="upper left", fontsize=9)
    figure.suptitle(f"{_name(scenario)}pods per phase", fontsize=12)
    return Drawing("pods", figure, tuple(series))


def draw_utilisation(samples: Sequence[Sample], scenario: str = "") -> Drawing:
    """Nodes x resources at the last sample, coloured by held / allocatable and labelled `held/allocatable`."""
    Figure = _figure_class()
    last = samples[-1] if samples else Sample(-1, 0.0, {}, [], {}, {}, {}, {}, {})
    resources = sorted({r for per in last.nodes.values() for r in per})
    nodes = sorted([*last.nodes, *last.down])
    shown_r, shown_n = resources[:MAX_COLUMNS], nodes[:MAX_ROWS]
    figure = Figure(
        figsize=(min(16.0, max(7.0, 3.0 + 1.1 * len(shown_r))), min(19.0, max(3.2, 1.6 + 0.34 * len(shown_n)))),
        dpi=DPI,
        layout="constrained",
    )
    ax = figure.subplots()
    grid = [[math.nan] * len(shown_r) for _ in shown_n]
    for i, node in enumerate(shown_n):
        for j, resource in enumerate(shown_r):
            cell = last.nodes.get(node, {}).get(resource)
            if cell is None:
                continue
            held, allocatable = cell["allocatable"] - cell["available"], cell["allocatable"]
            grid[i][j] = held / allocatable if allocatable else math.nan
            if len(shown_n) * len(shown_r) <= 300:
                unhealthy = cell["capacity"] - allocatable
                text = f"{held}/{allocatable}" + (f"\n{unhealthy} unhealthy" if unhealthy > 0 else "")
                dark = grid[i][j] > 0.6  # the colour map's dark end: white text stays readable
                ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
    if not grid or not shown_r:
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no device resources on any node", ha="center", va="center")
        figure.suptitle(f"{_name(scenario)}held / allocatable per node", fontsize=12)
        return Drawing("utilisation", figure, tuple(utilisation_series(last)))
    image = ax.imshow(grid, cmap="YlOrRd", vmin=0.0, vmax=1.0, aspect="auto")
    tall = figure.get_size_inches()[1]
    figure.colorbar(image, ax=ax, label="held / allocatable", shrink=min(1.0, 4.0 / tall), aspect=15)
    ax.set_xticks(range(len(shown_r)), [_short(r, 28) for r in shown_r], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(shown_n)), [f"{n} (down)" if n in last.down else n for n in shown_n], fontsize=8)
    left = []
    if len(resources) > len(shown_r):
        left.append(f"{len(resources) - len(shown_r)} more resources")
    if len(nodes) > len(shown_n):
        left.append(f"{len(nodes) - len(shown_n)} more nodes")
    more = f" ({', '.join(left)} not shown)" if left else ""
    when = "after setup" if last.step < 0 else f"after step {last.step + 1}"
    figure.suptitle(f"{_name(scenario)}held / allocatable per node, {when}{more}", fontsize=12)
    return Drawing("utilisation", figure, tuple(utilisation_series(last)))


def draw_placement(samples: Sequence[Sample], scenario: str = "") -> Drawing | None:
    """A table: per app the clusters chosen (green) and each rejected cluster with its reason (red); None when the
    run made no fleet decision."""
    rows = placement_rows(samples)
    if not rows:
        return None
    Figure = _figure_class()
    shown = rows[:MAX_TABLE_ROWS]
    wrapped = [textwrap.wrap(reason, 90) or [""] for *_, reason in shown]
    total = sum(len(w) for w in wrapped) + 1 + 0.3 * len(shown)  # in text lines: the header, rows and their gaps
    unit, top, bottom = 0.2, 0.6, 0.15  # inches: one text line, the title's band, the margin below
    height = top + total * unit + bottom
    figure = Figure(figsize=(12, height), dpi=DPI)
    ax = figure.add_axes((0.02, bottom / height, 0.96, total * unit / height))
    ax.set_axis_off()
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    columns = (0.0, 0.16, 0.26, 0.42)

    def y_of(line: float) -> float:
        return 1.0 - line / total

    for x, head in zip(columns, ("app", "", "cluster", "reason"), strict=True):
        ax.text(x, y_of(0), head, fontweight="bold", va="top", fontsize=10)
    at = 1.0
    previous = ""
    for (app, verdict, cluster, _), reason in zip(shown, wrapped, strict=True):
        at += 0.3
        ax.axhline(y_of(at - 0.15), color="0.85", linewidth=0.6)
        colour = "tab:green" if verdict == "placed" else "tab:red"
        ax.text(columns[0], y_of(at), app if app != previous else "", va="top", fontsize=10)
        ax.text(columns[1], y_of(at), verdict, va="top", fontsize=10, color=colour)
        ax.text(columns[2], y_of(at), cluster, va="top", fontsize=10, color=colour)
        ax.text(columns[3], y_of(at), "\n".join(reason), va="top", fontsize=9, linespacing=1.35)
        previous = app
        at += len(reason)
    more = f" ({len(rows) - len(shown)} more rows not shown)" if len(rows) > len(shown) else ""
    figure.suptitle(f"{_name(scenario)}fleet placement: chosen and rejected clusters{more}", fontsize=12)
    return Drawing("placement", figure, rows=tuple(shown))


def drawings(report: Report) -> list[Drawing]:
    """Every figure the run calls for: availability, pods, utilisation, and placement when there was a decision."""
    samples, steps = report.samples, report.steps
    out = [
        draw_availability(samples, steps, report.scenario),
        draw_pods(samples, steps, report.scenario),
        draw_utilisation(samples, report.scenario),
    ]
    placement = draw_placement(samples, report.scenario)
    if placement is not None:
        out.append(placement)
    return out


def write_plots(report: Report, directory: Path) -> list[Plot]:
    """Draw the run's figures and write each as `<directory>/scenario-<name>-<kind>.png` (the directory is created)."""
    directory.mkdir(parents=True, exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", report.scenario).strip("-") or "run"
    plots: list[Plot] = []
    for drawing in drawings(report):
        path = directory / f"scenario-{slug}-{drawing.kind}.png"
        figure = drawing.figure
        figure.savefig(path, dpi=DPI, format="png")
        width, height = (round(v * DPI) for v in figure.get_size_inches())
        plots.append(Plot(drawing.kind, path, width, height, drawing.series, drawing.rows))
    return plots


# -- drawing helpers -----------------------------------------------------------------------------------------------


def _figure_class() -> type[Figure]:
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401  (the Agg canvas: no display)
        from matplotlib.figure import Figure
    except ImportError as e:
        raise errors.Unavailable(f"plots need matplotlib: pip install 'devplace[report]' ({e})") from e
    return Figure


def _steps(ax: Axes, line: Timeline, values: Sequence[float | None], offset: float = 0.0, **style: Any) -> None:
    """A value holds from its sample until the next one: in step numbers each sample owns [x - 0.5, x + 0.5]; in
    time it holds until the next sample's time (the last one a little beyond). A missing value breaks the line."""
    marker = style.pop("marker", None)
    label = style.pop("label", None)
    span = (max(line.xs) - min(line.xs)) if line.xs else 0.0
    runs: list[list[tuple[float, float]]] = [[]]
    dots: list[tuple[float, float]] = []
    for i, value in enumerate(values):
        if value is None:
            runs.append([])
            continue
        point = (line.xs[i], value + offset)
        runs[-1].append(point)
        dots.append(point)
        last = i + 1 == len(values) or values[i + 1] is None
        if line.by_time and last:
            end = line.xs[i + 1] if i + 1 < len(values) else line.xs[i] + max(span * 0.03, 1.0)
            runs[-1].append((end, value + offset))
    for points in runs:
        if not points:
            continue
        xs = [x for x, _ in points]
        ys = [y for _, y in points]
        if not line.by_time:
            xs, ys = [x - 0.5 for x in xs] + [xs[-1] + 0.5], [*ys, ys[-1]]
        ax.plot(xs, ys, drawstyle="steps-post", label=label, **style)
        label = None
    if marker is not None and dots:
        dot_style = {k: v for k, v in style.items() if k in ("color", "alpha")}
        ax.plot([x for x, _ in dots], [y for _, y in dots], linestyle="none", marker=marker, markersize=4, **dot_style)


def _y_range(ax: Axes, values: Sequence[float | None]) -> None:
    """Counts: integer ticks from 0 to at least 1, with room for the lines drawn a little apart."""
    from matplotlib.ticker import MaxNLocator  # loaded with the figure (`_figure_class`)

    top = max([1.0, *(v for v in values if v is not None)])
    ax.set_ylim(-0.05 * top - 0.15, 1.05 * top + 0.15)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _mark_steps(ax: Axes, line: Timeline, *, label: bool) -> None:
    for x, text in line.marks:
        ax.axvline(x, color="0.55", linestyle=":", linewidth=0.9, zorder=0)
        if label and text:
            ax.text(
                x, 0.98, f" {text}", transform=ax.get_xaxis_transform(), ha="left", va="top", fontsize=8, color="0.3"
            )


def _x_axis(ax: Axes, line: Timeline) -> None:
    ax.set_xlabel(line.label)
    if not line.by_time and line.xs:
        ax.set_xlim(min(0.0, *line.xs) - 0.5, max(line.xs) + 0.5)
    if line.ticks:
        rotate = any(len(t) > 4 for _, t in line.ticks)
        ax.set_xticks(
            [x for x, _ in line.ticks],
            [t for _, t in line.ticks],
            rotation=25 if rotate else 0,
            ha="right" if rotate else "center",
            fontsize=8,
        )


def _node_colours(nodes: Sequence[str]) -> dict[str, str]:
    palette = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
    return {n: palette[i % len(palette)] for i, n in enumerate(nodes)}


def _has(sample: Sample, resource: str) -> bool:
    return any(resource in per for per in sample.nodes.values())


def _total(sample: Sample, resource: str, column: str) -> int:
    return sum(per[resource][column] for per in sample.nodes.values() if resource in per)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _name(scenario: str) -> str:
    return f"{scenario}: " if scenario else ""
