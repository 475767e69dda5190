"""`devplace explain pod NAME`: why a pod can or cannot go to each node, computed from the store alone;
`devplace explain resourceclass NAME`: the DRA DeviceClass the class compiles to (`api.compiles`), as YAML;
`devplace explain configuration NAME [-n NS]`: the DeviceClass of the Configuration's Akri resource
(`<group>/<configuration>`, selecting its devices), as YAML.

The command reads a snapshot (Nodes, Pods, Instances, Configurations, ResourceClasses) into a scheduler's informer
caches, without starting it, and asks the scheduler's own pure `explain` (the decision core run over every node; it
writes nothing). So the answer is the one the scheduler would give now, against any store, and no scheduler process
needs to run or be reachable. A bound pod is explained as if it were pending (its own requests taken off its node).

    Pod default/web (pending): 0/3 nodes are available: 2 insufficient cpu, 1 no device matches class gpu.
    NODE     VERDICT
    node-a   insufficient cpu
    ...

`-o json|yaml` prints `{pod, node, message, verdicts: [{node, fits, reason}]}`.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any

import typer

from devplace import errors
from devplace.api import DEFAULT_NAMESPACE, lookup
from devplace.cli import _output as output
from devplace.cli._resources import NamespaceOption, StoreOption, register_fleet_kinds, run, store_url, with_store
from devplace.clocks import SystemClock
from devplace.store import Informer, Store

if TYPE_CHECKING:
    from devplace.scheduler import NodeVerdict

HEADERS = ["NODE", "VERDICT"]
FITS = "fits"


@dataclass(frozen=True)
class Explanation:
    pod: str
    """`namespace/name`."""
    node: str
    """The node the pod is bound to, "" while pending."""
    verdicts: tuple[NodeVerdict, ...]
    """Every node in name order; reason None: the pod fits there."""

    @property
    def message(self) -> str:
        """`2/3 nodes are available.`, or when none is, the scheduler's `0/3 nodes are available: <reasons>.`"""
        fits = sum(1 for v in self.verdicts if v.reason is None)
        if fits:
            return f"{fits}/{len(self.verdicts)} nodes are available."
        if not self.verdicts:
            return "0/0 nodes are available: no nodes."
        from devplace.scheduler import availability_message

        return availability_message(len(self.verdicts), (v.reason or "" for v in self.verdicts))

    @property
    def heading(self) -> str:
        state = f"bound to {self.node}" if self.node else "pending"
        return f"Pod {self.pod} ({state}): {self.message}"

    def rows(self) -> list[list[str]]:
        return [[v.node, FITS if v.reason is None else v.reason] for v in self.verdicts]

    def to_wire(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "node": self.node,
            "message": self.message,
            "verdicts": [{"node": v.node, "fits": v.reason is None, "reason": v.reason} for v in self.verdicts],
        }


async def explain_pod(store: Store, namespace: str, name: str) -> Explanation:
    """Read the snapshot the scheduler reads and evaluate the pod against every node (module docstring)."""
    from devplace.scheduler import Scheduler

    scheduler = Scheduler(store, SystemClock())
    informers: list[Informer[Any]] = [
        scheduler.nodes,
        scheduler.instances,
        scheduler.configurations,
        scheduler.classes,
        scheduler.pods,
    ]
    try:
        pod = await store.get("Pod", name, namespace)
    except errors.NotFound:
        pod = {}  # `explain` says so, as for any pod it does not know
    if (pod.get("spec") or {}).get("resourceClaims"):  # DRA: the claims, the slices and the DeviceClasses too
        informers += [scheduler.claims, scheduler.slices, scheduler.device_classes]
    for informer in informers:
        await informer.list_once()
    key = f"{namespace}/{name}"
    verdicts = scheduler.explain(key)
    state = scheduler.pods.get(namespace, name)
    return Explanation(key, state.node if state is not None else "", tuple(verdicts))


def render(explanation: Explanation, output_format: str, *, tty: bool) -> Sequence[Any]:
    """What to print: lines of text, or a rich table after the heading on a terminal."""
    if output_format == "json":
        return [output.to_json(explanation.to_wire())]
    if output_format == "yaml":
        return [output.to_yaml(explanation.to_wire())]
    if tty:
        return [explanation.heading, output.rich_table(HEADERS, explanation.rows())]
    return [explanation.heading, output.plain_table(HEADERS, explanation.rows())]


def explain(
    ctx: typer.Context,
    kind: Annotated[str, typer.Argument(help="pod, or resourceclass or configuration (its DRA DeviceClass)")],
    name: Annotated[str, typer.Argument(help="The pod's name")],
    namespace: NamespaceOption = None,
    output_format: Annotated[str, typer.Option("--output", "-o", help="table, json or yaml")] = "table",
    store: StoreOption = None,
) -> None:
    """Show, for every node, whether a pod fits there and if not why (the scheduler's verdicts, from the store)."""
    url = store_url(ctx, store)

    async def body(st: Store) -> int:
        register_fleet_kinds()  # `explain apps x` says only pods are explained, as for every other known kind
        if lookup(kind).kind == "ResourceClass":  # its DRA form: the DeviceClass it compiles to
            typer.echo(output.to_yaml(await device_class_of(st, name)))
            return 0
        if lookup(kind).kind == "Configuration":  # the DeviceClass of its Configuration-level (Akri) resource
            from devplace.api import compile_configuration

            configuration = await st.get("Configuration", name, namespace or DEFAULT_NAMESPACE)
            typer.echo(output.to_yaml(compile_configuration(configuration)))
            return 0
        if lookup(kind).kind != "Pod":
            raise errors.Invalid.field(
                "kind", f"only pods, resource classes and configurations are explained, not {kind!r}"
            )
        if output_format not in ("table", "json", "yaml"):
            raise errors.Invalid.field("output", f"{output_format!r} is not one of table, json, yaml")
        explanation = await explain_pod(st, namespace or DEFAULT_NAMESPACE, name)
        tty = sys.stdout.isatty()
        for part in render(explanation, output_format, tty=tty):
            if isinstance(part, str):
                typer.echo(part)
            else:
                from rich.console import Console

                Console().print(part)
        return 0

    run(lambda: with_store(url, body, ctx))


async def device_class_of(store: Store, name: str) -> dict[str, Any]:
    """The DeviceClass ResourceClass `name` compiles to (its references flattened as the scheduler resolves them)."""
    from devplace.api import compile_class
    from devplace.scheduler import resolve_each

    specs = {str(o["metadata"]["name"]): o.get("spec") for o in (await store.list("ResourceClass", "")).items}
    if name not in specs:
        raise errors.NotFound(f"resourceclasses {name!r} not found")
    resolved, refused = resolve_each(specs)
    if name in refused:
        raise refused[name]
    return compile_class(name, resolved[name].selector)


def register(app: typer.Typer) -> None:
    app.command()(explain)
