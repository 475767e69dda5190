"""The live view of a scenario run on a terminal (`devplace sim run` when stdout is a TTY), drawn with rich.

One frame, redrawn in place after every step: a progress bar over the steps, the step's narration, nodes x resources
(available / held / unhealthy as the node's kubelet sees them: held = allocatable - available, unhealthy = capacity -
allocatable, i.e. slots another node or the other plugin level holds), Instances with a coloured chip per slot holder,
brokers per Configuration, and pending pods with the scheduler's or kubelet's reason. Each step's verdict line (and
every mismatch) is printed above the frame, so a failure stays on screen after the frame moves on. Off a terminal the
CLI prints its plain lines and this module is not loaded.

The frame is a pure function of the last step's record and sample (`step_view`): tests render it to a recording
console. `LiveView` keeps the latest frame and hands it to rich's `Live`; `on_step` is the `ScenarioRun` observer and
only formats and redraws (it never waits on the fleet). A frame is bounded whatever the fleet's size, so a 50-node
run still fits a terminal: at most `MAX_NODES` rows, `MAX_RESOURCES` resource columns, `MAX_INSTANCES` Instances,
`MAX_SLOTS` chips per Instance and `MAX_PENDING` pending pods; each table says how many it left out.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from devplace.demo._timelines import Sample, StepRecord

MAX_NODES = 20
MAX_RESOURCES = 6
MAX_INSTANCES = 12
MAX_SLOTS = 8
MAX_PENDING = 8

HOLDER_STYLES = {"free": "green", "il": "cyan", "cl": "magenta", "claim": "yellow"}
"""Chip colour per holder kind: a free slot, one held through the Instance-level plugin (`<node>`), through the
Configuration-level plugin (`<node> (CL)`), or by a DRA claim (`claim ns/name`)."""


def holder_kind(label: str) -> str:
    """`free`, `il`, `cl` or `claim`, from a holder label as `sim.holder_label` writes it."""
    if label == "free":
        return "free"
    if label.startswith("claim "):
        return "claim"
    if label.endswith(" (CL)"):
        return "cl"
    return "il"


def nodes_table(sample: Sample) -> Table:
    """Nodes x resources; each cell `available/held/unhealthy` (held in yellow, unhealthy in magenta, nothing
    available in red). Down nodes are one row saying so."""
    resources = sorted({r for per in sample.nodes.values() for r in per})
    shown = resources[:MAX_RESOURCES]
    nodes = sorted([*sample.nodes, *sample.down])
    more = f"{len(resources) - len(shown)} more resources not shown" if len(resources) > len(shown) else None
    table = Table(title="nodes: available/held/unhealthy", title_justify="left", caption=more, caption_justify="left")
    table.add_column("node", no_wrap=True)
    for resource in shown:
        table.add_column(resource, justify="center", overflow="fold")
    for node in nodes[:MAX_NODES]:
        if node in sample.down:
            table.add_row(Text(node, style="dim"), *[Text("down", style="red dim") for _ in shown])
            continue
        per = sample.nodes.get(node, {})
        cells: list[Text | str] = []
        for resource in shown:
            cell = per.get(resource)
            if cell is None:
                cells.append(Text("-", style="dim"))
                continue
            held, unhealthy = cell["allocatable"] - cell["available"], cell["capacity"] - cell["allocatable"]
            text = Text()
            text.append(str(cell["available"]), style="red" if cell["available"] == 0 else "green")
            text.append("/")
            text.append(str(held), style="yellow" if held else "")
            text.append("/")
            text.append(str(unhealthy), style="magenta" if unhealthy else "")
            cells.append(text)
        table.add_row(node, *cells)
    if len(nodes) > MAX_NODES:
        table.add_row(Text(f"... {len(nodes) - MAX_NODES} more nodes", style="dim"), *["" for _ in shown])
    return table


def instances_table(sample: Sample) -> Table:
    """Instances with a chip per slot holder, coloured by holder kind (`HOLDER_STYLES`)."""
    table = Table(title="instances: slot holders", title_justify="left")
    table.add_column("instance", no_wrap=True)
    table.add_column("configuration")
    table.add_column("nodes")
    table.add_column("slots")
    names = sorted(sample.instances)
    for name in names[:MAX_INSTANCES]:
        instance = sample.instances[name]
        slots: dict[str, str] = instance.get("slots") or {}
        chips = Text()
        for n, holder in enumerate(list(slots.values())[:MAX_SLOTS]):
            if n:
                chips.append(" ")
            chips.append(f"[{holder}]", style=HOLDER_STYLES[holder_kind(holder)])
        if len(slots) > MAX_SLOTS:
            chips.append(f" +{len(slots) - MAX_SLOTS}", style="dim")
        table.add_row(name, str(instance.get("configuration", "")), ", ".join(instance.get("nodes") or []), chips)
    if len(names) > MAX_INSTANCES:
        table.add_row(Text(f"... {len(names) - MAX_INSTANCES} more instances", style="dim"), "", "", "")
    return table


def brokers_table(sample: Sample) -> Table:
    """Broker pods per Configuration: running and pending."""
    table = Table(title="brokers", title_justify="left")
    table.add_column("configuration", no_wrap=True)
    table.add_column("running", justify="right")
    table.add_column("pending", justify="right")
    for configuration in sorted(sample.brokers):
        tally = sample.brokers[configuration]
        pending = tally.get("pending", 0)
        table.add_row(
            configuration, str(tally.get("running", 0)), Text(str(pending), style="yellow" if pending else "")
        )
    return table


def pending_table(sample: Sample) -> Table:
    """Pending pods with the reason the scheduler or the kubelet gave."""
    table = Table(title=f"pending pods ({len(sample.pending)})", title_justify="left")
    table.add_column("pod", no_wrap=True)
    table.add_column("reason", overflow="fold")
    names = sorted(sample.pending)
    for name in names[:MAX_PENDING]:
        table.add_row(name, sample.pending[name])
    if len(names) > MAX_PENDING:
        table.add_row(Text(f"... {len(names) - MAX_PENDING} more", style="dim"), "")
    return table


def step_view(record: StepRecord | None, sample: Sample | None, total: int) -> RenderableType:
    """The frame after `record` (None: before the first step): progress, narration, and the cluster's tables."""
    done = 0 if record is None else record.index + 1
    head = Text()
    head.append(f"step {done}/{total}", style="bold")
    if record is not None:
        head.append(f" {record.title} ")
        head.append("ok" if record.ok else "FAILED", style="green" if record.ok else "bold red")
        head.append(f"  t={record.sim_time:g}s", style="dim")
    else:
        head.append(" setting up", style="dim")
    progress = Table.grid(padding=(0, 1))
    progress.add_row(ProgressBar(total=max(total, 1), completed=done, width=40), head)
    parts: list[RenderableType] = [progress]
    if record is not None and record.say:
        parts.append(Text(f"say: {record.say}", style="italic"))
    if sample is not None:
        parts.append(nodes_table(sample))
        if sample.instances:
            parts.append(instances_table(sample))
        if sample.brokers:
            parts.append(brokers_table(sample))
        if sample.pending:
            parts.append(pending_table(sample))
    return Group(*parts)


def step_lines(record: StepRecord, total: int) -> list[Text]:
    """What stays on screen for a step: its narration, verdict, an expected error, and every mismatch."""
    lines: list[Text] = []
    if record.say:
        lines.append(Text(f"say: {record.say}", style="italic"))
    checks = f" ({record.checked} checks)" if record.checked else ""
    line = Text(f"step {record.index + 1}/{total} {record.title}: ")
    line.append("ok" if record.ok else "FAILED", style="green" if record.ok else "bold red")
    line.append(f"{checks} [t={record.sim_time:g}s]")
    lines.append(line)
    if record.error and record.ok:
        lines.append(Text(f"   failed as expected: {record.error}", style="dim"))
    lines.extend(Text(f"   FAILED {mismatch}", style="red") for mismatch in record.mismatches)
    return lines


class LiveView:
    """The `ScenarioRun` observer on a terminal: `with LiveView(n) as view: run_scenario(..., on_step=view.on_step)`."""

    def __init__(self, total_steps: int, console: Console | None = None) -> None:
        self.total = total_steps
        self.console = console or Console()
        self.frame: RenderableType = step_view(None, None, total_steps)
        self._live: Live | None = None

    def start(self) -> None:
        if self._live is None:
            self._live = Live(self.frame, console=self.console, refresh_per_second=8, transient=False)
            self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.update(self.frame, refresh=True)
            self._live.stop()
            self._live = None

    def on_step(self, record: StepRecord, sample: Sample) -> None:
        for line in step_lines(record, self.total):
            self.console.print(line)
        self.frame = step_view(record, sample, self.total)
        if self._live is not None:
            self._live.update(self.frame, refresh=True)

    def __enter__(self) -> LiveView:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def __call__(self, record: StepRecord, sample: Sample) -> None:
        self.on_step(record, sample)
