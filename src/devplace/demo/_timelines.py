"""Running a scenario's timeline (`devplace sim run`, `make demo`): steps on a `Fleet`, checks, samples, a report.

`ScenarioRun` builds a `devplace.sim.Fleet` from the scenario (its settings, nodes with their labels, devices), applies
its manifests, sends its fleet's `/v2` requests to the real API app (`devplace.server.create_app` over the same store,
in process through an ASGI transport: the same routes, bodies and status codes a client gets), and then runs every
step in order. After each step it waits for the fleet to settle, takes a `Sample` (what the plots and the live view
draw), and checks the step's `expect` block (`sim.check_expectations`).

Failures: a step whose `expect` does not hold is recorded with every mismatch and the run goes on (one run shows every
broken promise); a step that raises where no `expect.error` asked for it stops the run (what follows would run on a
cluster the scenario did not describe). Either way `Report.ok` is False and the command exits 1. A bad scenario never
gets here: `sim.load_scenario` refuses it first. Time is the fleet's fake clock: `advance: 5m` moves it by five
minutes at once, with the PodResources polls and grace periods that fall inside it; wall time is measured per step
for the report.

The observer (`on_step`) is called after every step with the record and the sample; the live view and `devplace up`'s
step endpoint use it. It must not block.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devplace import errors
from devplace.api import resource_prefix
from devplace.sim import (
    Fleet,
    Mismatch,
    Observed,
    Scenario,
    ScenarioStep,
    check_expectations,
    device_resource,
    expectation_kinds,
    holder_label,
)
from devplace.store import Store, cas

Obj = dict[str, Any]


@dataclass(frozen=True)
class Sample:
    """The cluster after a step, as plain data: what plots and the live view draw.

    `nodes`: node -> resource -> {capacity, allocatable, available} as the node's kubelet sees them (running nodes);
    `down`: nodes taken down; `pods`: phase -> count; `pending`: `ns/name` -> the scheduler's or kubelet's reason;
    `instances`: name -> {configuration, nodes, slots: slot -> holder label}; `brokers`: configuration ->
    {running, pending}; `decision`: app -> {clusters, rejected: cluster -> reason} of the last plan or instantiate.
    """

    step: int
    time: float
    nodes: dict[str, dict[str, dict[str, int]]]
    down: list[str]
    pods: dict[str, int]
    pending: dict[str, str]
    instances: dict[str, dict[str, Any]]
    brokers: dict[str, dict[str, int]]
    decision: dict[str, dict[str, Any]]

    def to_wire(self) -> dict[str, Any]:
        return asdict(self)  # every field is plain data already, named as the report names it


@dataclass
class StepRecord:
    """One step as it ran: what it was, when (simulated seconds), how long (wall), and what its checks found."""

    index: int
    title: str
    action: str | None
    say: str | None
    sim_time: float = 0.0
    wall_seconds: float = 0.0
    error: str | None = None
    checked: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)
    stopped: bool = False

    @property
    def ok(self) -> bool:
        return not self.mismatches and not self.stopped

    def to_wire(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "title": self.title,
            "action": self.action,
            "say": self.say,
            "simTime": self.sim_time,
            "wallSeconds": self.wall_seconds,
            "ok": self.ok,
            "error": self.error,
            "checked": self.checked,
            "mismatches": [m.to_wire() for m in self.mismatches],
        }


@dataclass
class Report:
    """A whole run: every step and sample, and whether every expectation held."""

    scenario: str
    source: str
    seed: int
    store: str
    steps: list[StepRecord] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    wall_seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.steps)

    @property
    def expectations(self) -> tuple[int, int]:
        """(held, checked) over every step."""
        checked = sum(s.checked for s in self.steps)
        return checked - sum(len(s.mismatches) for s in self.steps), checked

    def to_wire(self) -> dict[str, Any]:
        held, checked = self.expectations
        return {
            "scenario": self.scenario,
            "source": self.source,
            "seed": self.seed,
            "store": self.store,
            "ok": self.ok,
            "expectations": {"held": held, "checked": checked},
            "wallSeconds": self.wall_seconds,
            "simSeconds": self.samples[-1].time if self.samples else 0.0,
            "steps": [s.to_wire() for s in self.steps],
            "samples": [s.to_wire() for s in self.samples],
        }


Observer = Callable[[StepRecord, Sample], None]


def _count_checks(step: ScenarioStep) -> int:
    expect = step.expect
    if expect is None:
        return 0
    n = 1 if expect.error is not None else 0
    n += len(expect.counts or {}) + len(expect.phases or {}) + len(expect.holders or {})
    n += sum(len(r) for r in (expect.available or {}).values()) + sum(len(s) for s in (expect.slots or {}).values())
    n += sum(len(f) for f in (expect.fields or {}).values())
    n += len(expect.placement or {}) + sum(len(r) for r in (expect.rejected or {}).values())
    return n


class ScenarioRun:
    """Runs one scenario on a fleet over `store` (a URL or a `Store`; "memory" by default)."""

    def __init__(
        self,
        scenario: Scenario,
        *,
        store: str | Store = "memory",
        seed: int = 0,
        on_step: Observer | None = None,
    ) -> None:
        self.scenario = scenario
        self.seed = seed
        self.on_step = on_step
        settings = scenario.spec.settings
        self.settle_timeout = settings.settle_timeout
        self.fleet = Fleet(
            store,
            resource_prefix=settings.resource_prefix,
            release_grace=settings.release_grace,
            offline_grace=settings.offline_grace,
            podresources_poll=settings.podresources_poll,
            scheduler=settings.scheduler,
            controller=settings.controller,
            strategy=settings.strategy,
            node_grace=settings.node_grace,
            pending_grace=settings.pending_grace,
            dra=settings.dra,
            device_paths=settings.device_paths,
            transport=settings.transport,
        )
        self.report = Report(scenario.name, scenario.source, seed, store if isinstance(store, str) else "given")
        self.decision: Obj | None = None
        self._started = 0.0
        self._http: Any = None

    # -- the run ---------------------------------------------------------------------------------------------------

    async def run(self) -> Report:
        """Set up, run every step, return the report (never raises for a failed step: see `Report.ok`)."""
        random.seed(self.seed)
        began = time.perf_counter()
        async with self.fleet:
            self._started = self.fleet.clock.now()
            try:
                await self._setup()
                for index, step in enumerate(self.scenario.spec.steps):
                    record = await self.run_step(index, step)
                    if record.stopped:
                        break
            finally:
                if self._http is not None:
                    await self._http.aclose()
        self.report.wall_seconds = time.perf_counter() - began
        return self.report

    @contextlib.asynccontextmanager
    async def live(self, *, setup: bool = True, started: float | None = None) -> AsyncIterator[ScenarioRun]:
        """The fleet running until the block ends, for steps that come one at a time (`run_step`; `devplace up`).

        With `setup`, the scenario's nodes, devices, manifests and fleet requests first (not its steps: the caller
        runs them); without, the fleet as the caller built it before (a saved world restored). `started` is the clock
        reading simulated time counts from (default: now)."""
        random.seed(self.seed)
        async with self.fleet:
            self._started = self.fleet.clock.now() if started is None else started
            try:
                if setup:
                    await self._setup()
                yield self
            finally:
                if self._http is not None:
                    await self._http.aclose()
                    self._http = None

    async def _setup(self) -> None:
        spec = self.scenario.spec
        for node in spec.nodes:
            self.fleet.add_node(node.name)
        for device in spec.devices:
            self.fleet.plug(device.id, device.nodes, device.properties)
        await self.fleet.settle(self.settle_timeout)
        for node in spec.nodes:
            if node.labels:
                await self._label(node.name, node.labels)
        documents: list[Obj] = []
        for i, item in enumerate(spec.manifests):
            documents.extend(self._manifests(item, ("spec", "manifests", i)))
        if documents:
            await self.fleet.apply(documents)
        if spec.fleet is not None:
            await self._fleet_requests()
        await self.fleet.settle(self.settle_timeout)
        self.report.samples.append(await self.sample(-1))

    async def _label(self, node: str, labels: Mapping[str, str]) -> None:
        def decide(current: Obj | None) -> Obj | None:
            if current is None:
                raise errors.NotFound(f"node {node} has not registered")
            meta = current.setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), **labels}
            return current

        await cas(self.fleet.store, "Node", node, "", decide)

    def _manifests(self, item: Mapping[str, Any], at: Sequence[str | int]) -> list[Obj]:
        if set(item) != {"file"}:
            return [dict(item)]
        path = self.scenario.base / str(item["file"])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise errors.Invalid(f"{self.scenario.where(at)}: cannot read {path}: {e.strerror or e}") from e
        return [d for d in yaml.safe_load_all(text) if d is not None]

    async def _client(self) -> Any:
        if self._http is None:
            import httpx2  # the API app and its client load only for scenarios with a fleet

            from devplace.server import create_app

            app = create_app(self.fleet.store)
            self._http = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://scenario")
        return self._http

    async def _fleet_requests(self) -> None:
        fleet = self.scenario.spec.fleet
        assert fleet is not None
        requests: list[Mapping[str, Any]] = [r.model_dump() for r in fleet.requests]
        if fleet.file is not None:
            path = self.scenario.base / fleet.file
            try:
                loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            except (OSError, yaml.YAMLError) as e:
                raise errors.Invalid(
                    f"{self.scenario.where(('spec', 'fleet', 'file'))}: cannot read {path}: {e}"
                ) from e
            requests = [*(loaded.get("requests") or []), *requests]
        client = await self._client()
        for n, request in enumerate(requests):
            response = await client.post(str(request["post"]), json=request.get("body") or {})
            if response.status_code != 201:
                raise errors.Invalid(
                    f"fleet request {n} (POST {request['post']}) answered {response.status_code}: {response.text}"
                )

    async def _lifecycle(self, action: str, path: str) -> None:
        client = await self._client()
        response = await client.post(f"{path.rstrip('/')}/{action}", json={})
        if response.status_code >= 400:
            raise errors.Refused(f"POST {path}/{action} answered {response.status_code}: {_message(response)}")
        if action in ("plan", "instantiate"):
            body = response.json() if response.content else None
            if action == "instantiate":
                status = await client.get(f"{path.rstrip('/')}/status")
                body = (status.json() or {}).get("placement") if status.status_code == 200 else body
            self.decision = body if isinstance(body, dict) else self.decision

    # -- one step --------------------------------------------------------------------------------------------------

    async def run_step(self, index: int, step: ScenarioStep) -> StepRecord:
        """Do the step's action, settle, sample, check; the record is also appended to the report."""
        record = StepRecord(index, step.title(), step.action, step.say, checked=_count_checks(step))
        began = time.perf_counter()
        try:
            await self._act(step)
            await self.fleet.settle(self.settle_timeout)
        except errors.DevplaceError as e:
            record.error = f"{type(e).__name__}: {e.message}"
            if step.expect is None or step.expect.error is None:
                record.stopped = True
                record.mismatches.append(Mismatch("error", None, record.error))
            await self._settle_quietly()
        record.wall_seconds = time.perf_counter() - began
        record.sim_time = self.fleet.clock.now() - self._started
        sample = await self.sample(index)
        if step.expect is not None and not record.stopped:
            observed = await self.observe(expectation_kinds(step.expect), record.error)
            record.mismatches.extend(check_expectations(step.expect, observed))
        self.report.steps.append(record)
        self.report.samples.append(sample)
        if self.on_step is not None:
            self.on_step(record, sample)
        return record

    async def _settle_quietly(self) -> None:
        try:
            await self.fleet.settle(self.settle_timeout)
        except errors.DevplaceError:
            pass

    async def _act(self, step: ScenarioStep) -> None:
        fleet = self.fleet
        action, arg = step.action, step.argument
        if action is None:
            return
        if action == "apply":
            items = arg if isinstance(arg, list) else [arg]
            documents = [d for i, item in enumerate(items) for d in self._manifests(item, ("apply", i))]
            await fleet.apply(documents)
        elif action == "delete":
            await fleet.delete(arg.kind, arg.name, arg.namespace)
        elif action == "plug":
            fleet.plug(arg.device, arg.nodes, arg.properties)
        elif action == "unplug":
            fleet.unplug(arg.device, arg.nodes)
        elif action == "node-down":
            await fleet.stop_node(arg)
        elif action == "node-up":
            await fleet.start_node(arg)
        elif action == "restart-agent":
            await fleet.restart_agent(arg)
        elif action == "restart-kubelet":
            await fleet.restart_kubelet(arg)
        elif action == "restart-part":
            await fleet.restart_part(arg)
        elif action == "advance":
            await fleet.advance(arg, timeout=self.settle_timeout)
        elif action == "settle":
            pass
        elif action == "run-pod":
            await fleet.run_pod(
                arg.name,
                arg.node,
                requests=await self._requests(arg.requests),
                namespace=arg.namespace,
                spec=arg.spec,
                timeout=self.settle_timeout,
            )
        else:  # plan, approve, instantiate, terminate
            await self._lifecycle(action, arg)

    async def _requests(self, requests: Mapping[str, int | str]) -> dict[str, int | str]:
        """Requests with `device:<configuration>/<device id>` keys named as the kubelet knows them."""
        if not any(key.startswith("device:") for key in requests):
            return dict(requests)
        observed = await self.observe({"Instance"})
        out: dict[str, int | str] = {}
        for key, value in requests.items():
            resource = device_resource(key, observed)
            if resource is None:
                raise errors.Invalid.field(f"run-pod.requests.{key}", "the device has no Instance (yet)")
            out[resource] = value
        return out

    # -- what the cluster holds ------------------------------------------------------------------------------------

    async def observe(self, kinds: set[str], error: str | None = None) -> Observed:
        objects = {kind: await self.fleet.list(kind) for kind in kinds}
        available = {n: self.fleet.available(n) for n in self.fleet.nodes if not self.fleet.is_down(n)}
        prefixes: dict[str, str] = {}
        if "Instance" in kinds:
            for configuration in await self.fleet.list("Configuration"):
                prefix = resource_prefix(str(configuration.get("apiVersion", "")), self.fleet.resource_prefix)
                prefixes[configuration["metadata"]["name"]] = prefix
        return Observed(objects, available, prefixes, self.decision, error)

    async def sample(self, index: int) -> Sample:
        fleet = self.fleet
        nodes: dict[str, dict[str, dict[str, int]]] = {}
        down = [n for n in fleet.nodes if fleet.is_down(n)]
        for node in fleet.nodes:
            if node in down:
                continue
            capacity, allocatable, available = fleet.capacity(node), fleet.allocatable(node), fleet.available(node)
            nodes[node] = {
                r: {
                    "capacity": capacity.get(r, 0),
                    "allocatable": allocatable.get(r, 0),
                    "available": available.get(r, 0),
                }
                for r in sorted(set(capacity) | set(allocatable))
            }
        pods = await fleet.list("Pod")
        phases = Counter(str((p.get("status") or {}).get("phase", "Pending")) for p in pods)
        pending = {
            f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}": _pending_reason(p)
            for p in pods
            if (p.get("status") or {}).get("phase", "Pending") == "Pending"
        }
        instances = {
            i["metadata"]["name"]: {
                "configuration": i["spec"].get("configurationName", ""),
                "nodes": list(i["spec"].get("nodes") or []),
                "slots": {s: holder_label(str(h)) for s, h in sorted((i["spec"].get("deviceUsage") or {}).items())},
            }
            for i in await fleet.list("Instance")
        }
        brokers: dict[str, dict[str, int]] = {}
        for pod in pods:
            configuration = ((pod.get("metadata") or {}).get("labels") or {}).get("akri.sh/configuration")
            if configuration:
                tally = brokers.setdefault(configuration, {"running": 0, "pending": 0})
                phase = (pod.get("status") or {}).get("phase", "Pending")
                tally["running" if phase == "Running" else "pending"] += phase in ("Running", "Pending")
        decision = {
            str(a.get("name")): {
                "clusters": [f"{c.get('clusterProvider')}/{c.get('cluster')}" for c in a.get("clusters") or []],
                "rejected": {
                    f"{r.get('clusterProvider')}/{r.get('cluster')}": str(r.get("reason", ""))
                    for r in a.get("rejected") or []
                },
            }
            for a in (self.decision or {}).get("apps") or []
        }
        return Sample(
            index,
            fleet.clock.now() - self._started,
            nodes,
            down,
            dict(sorted(phases.items())),
            pending,
            instances,
            brokers,
            decision,
        )


def _pending_reason(pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "unschedulable")
    return str(status.get("message") or status.get("reason") or "waiting")


def _message(response: Any) -> str:
    try:
        body = response.json()
    except ValueError:
        return str(response.text)
    return str(body.get("message", body)) if isinstance(body, dict) else str(body)


async def run_scenario(
    scenario: Scenario, *, store: str | Store = "memory", seed: int = 0, on_step: Observer | None = None
) -> Report:
    """Run `scenario` and return its report."""
    return await ScenarioRun(scenario, store=store, seed=seed, on_step=on_step).run()


def scenario_path(value: str | Path) -> Path:
    """A scenario's file: as given, else under the source tree's `examples/` (so `seed-000` finds the seed file)."""
    path = Path(value)
    if path.is_file():
        return path
    root = Path(__file__).resolve().parents[3] / "examples"
    for candidate in (root / path, root / "scenarios" / path, root / "scenarios" / f"{path}.yaml"):
        if candidate.is_file():
            return candidate
    raise errors.Invalid.field("scenario", f"{value}: no such file")
