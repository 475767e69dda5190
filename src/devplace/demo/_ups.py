"""`devplace up`: a simulated cluster that keeps running, served as a Kubernetes API and steered through `/sim/v1`.

`Up` composes what `devplace sim run` runs once into something that stays: a `ScenarioRun` whose fleet (agents,
simulated kubelets, scheduler, broker controller) runs on one store, the API server app over that same store
(`devplace.server.create_app`, with the fleet's clock), the simulation's control routes mounted on it, a ticker
that moves simulated time with wall time, and the simulated world saved beside the store.

Control API (`router`; mounted with `app.include_router` after `create_app`, so the app's authentication,
authorization, body limits and `Status` errors apply as to any request; `server.authz` reads `GET /sim/v1` as
`get nodes` and `POST /sim/v1/steps` as `update nodes`, subresource `sim`):
- `GET /sim/v1` -> `{"nodes": [{"name", "down"}], "devices": [{"id", "nodes", "properties"}], "time": <simulated
  seconds since the world began>}`;
- `POST /sim/v1/steps` with ONE scenario step as its JSON body (a scenario file's `steps:` syntax, `expect` included).
  It is checked with the scenario models and their reference rules against the live fleet (its nodes, the devices
  plugged now): a bad step is `errors.Invalid` (422 `Status`) naming each field relative to the body
  (`plug.nodes[0]`), and nothing runs. `apply: {file: ...}` is refused: the server reads no files for a client. A
  good step runs through `ScenarioRun.run_step` (act, settle, sample, check) and is answered 200 with the record's
  wire form (`ok`, `error`, `mismatches`, ...) and `sample`, the cluster after it. One step at a time: an
  `asyncio.Lock` serializes steps, the ticker and saves (validation runs under it too, against the world the step
  will meet).

Time: the fleet's clock is a `FakeClock`. A fresh world starts it at the wall time (object timestamps read as real
ones); then `tick` advances it by the wall seconds that passed since the last tick and settles, every `tick_seconds`
(1 s), so grace periods pass as they would on a cluster; an `advance: 5m` step still jumps. A tick that cannot
settle is logged (once until one settles again), never fatal: the API keeps answering.

The saved world: `<store file>.sim.yaml` (`world_file`), YAML written to a temporary file and renamed over it after
the scenario's setup and steps, after every step, every `SAVE_EVERY` ticks and on exit: the scenario's name and
settings, the clock's reading and when the world began, every node (down or not) and every plugged device with its
nodes and properties. A file, not an object in the store: the store holds what the cluster's API serves, and the
simulator's devices and machines are not cluster objects (kubectl would list them, watches and the dashboard would see
them as a kind); beside the store file it is readable, and it goes with the store when both are copied. Restoring
(when the file exists): nodes come back as they were (a down node is added down, so it never registers for a moment),
devices are plugged back, the clock resumes where it stood (time the process was stopped did not pass for the world),
and the scenario's manifests, fleet requests and steps are not run again: the file is first written only once they
have run, so its existence is the marker. A process stopped or killed before that runs the scenario again from the
start on the next start (its applies are create-or-update; a step that creates what exists then fails, and says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import yaml
from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from devplace import errors
from devplace.demo._timelines import Observer, ScenarioRun
from devplace.errors import FieldError
from devplace.files import write_atomically
from devplace.sim import Scenario, ScenarioStep, load_scenario
from devplace.store import sqlite_file

SIM_PATH = "/sim/v1"
"""Where the control API lives (`GET SIM_PATH`, `POST SIM_PATH/steps`)."""
SAVE_EVERY = 10
"""Ticks between saves of the world when no step saved it (a crash loses at most this many seconds of time)."""
TICK_SETTLE = 5.0
"""Real seconds a tick waits for the fleet to settle before it gives the lock back (and logs that it did not)."""
DEFAULT_CONFIGURATION = "devices"
"""The Configuration a generated world applies, so every simulated device becomes an Instance."""

_API_VERSION = "devplace.io/v1alpha1"
_STEP_AT = "spec.steps[0]"
log = logging.getLogger(__name__)


def world_file(store: str) -> Path | None:
    """Where `up` saves the simulated world of the store at `store`: `<file>.sim.yaml` for `sqlite:///FILE`, None
    for `memory` (nothing outlives the process); any other store is refused (`up` runs its own, embedded)."""
    if store in ("memory", "memory://"):
        return None
    if not store.startswith("sqlite://"):
        raise errors.Invalid.field("store", f"{store!r}: `up` runs on its own store: sqlite:///PATH or memory")
    return Path(sqlite_file(store) + ".sim.yaml")


def up_scenario(
    nodes: int,
    devices: str | None = None,
    *,
    source: str = "--devices",
    configuration: bool = True,
) -> Scenario:
    """The scenario of `up --nodes N --devices FILE`: nodes `node-1`..`node-N`, the devices of `devices` (YAML text:
    a list of `{id, nodes, properties}`, a scenario's `devices:` entries) and, with `configuration`, a Configuration
    (`DEFAULT_CONFIGURATION`, capacity 1) whose `sim` discovery reports every device. A bad list is `errors.Invalid`
    naming `source` and each entry's field (`devices[1].nodes[0]: unknown node ...`)."""
    if nodes < 1:
        raise errors.Invalid.field("nodes", "at least one node")
    listed: Any = []
    if devices is not None:
        try:
            listed = yaml.safe_load(devices) or []
        except yaml.YAMLError as e:
            raise errors.Invalid(f"{source}: malformed YAML: {e}") from e
        if not isinstance(listed, list):
            raise errors.Invalid.field(source, "a YAML list of devices, each {id, nodes, properties}")
    manifests: list[dict[str, Any]] = []
    if configuration:
        manifests.append(
            {
                "apiVersion": "akri.sh/v0",
                "kind": "Configuration",
                "metadata": {"name": DEFAULT_CONFIGURATION, "namespace": "default"},
                "spec": {"discoveryHandler": {"name": "sim", "discoveryDetails": ""}, "capacity": 1},
            }
        )
    document = _document(
        "up",
        spec={
            "nodes": [{"name": f"node-{i}"} for i in range(1, nodes + 1)],
            "devices": listed,
            "manifests": manifests,
        },
    )
    return _load(document, source, prefix="spec.")


def _document(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": _API_VERSION, "kind": "Scenario", "metadata": {"name": name}, "spec": dict(spec)}


def _load(document: Mapping[str, Any], source: str, *, prefix: str, root: str = "") -> Scenario:
    """`load_scenario` of a document built here; its problems renamed relative to what the user wrote (the positions
    `load_scenario` gives are of the generated text, so they are left out)."""
    try:
        return load_scenario(json.dumps(document, default=str), source)  # YAML dates: text, as JSON has them
    except errors.Invalid as e:
        raise _relative(e, source, prefix, root) from None


def _relative(e: errors.Invalid, source: str, prefix: str, root: str) -> errors.Invalid:
    fields: list[FieldError] = []
    for problem in e.fields:
        path = problem.path
        if path == prefix.rstrip("."):
            path = root or source
        elif path.startswith(prefix):
            path = path[len(prefix) :]
        fields.append(FieldError(path, problem.reason))
    if not fields:
        return errors.Invalid(f"{source}: {e.message}")
    return errors.Invalid(f"{source}: " + "; ".join(str(f) for f in fields), fields)


# -- the saved world ---------------------------------------------------------------------------------------------------


class _Saved(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SavedNode(_Saved):
    name: str = Field(min_length=1)
    down: bool = False


class SavedDevice(_Saved):
    id: str = Field(min_length=1)
    nodes: list[str] = Field(min_length=1)
    properties: dict[str, str] = Field(default_factory=dict)


class SavedWorld(_Saved):
    """The file `up` keeps beside its store (module docstring)."""

    api_version: Literal["devplace.io/v1alpha1"] = Field("devplace.io/v1alpha1", alias="apiVersion")
    kind: Literal["SimWorld"] = "SimWorld"
    scenario: str = Field(min_length=1, description="the scenario that set the world up")
    settings: dict[str, Any] = Field(default_factory=dict, description="its settings, as a scenario file writes them")
    started: float = Field(description="the fleet clock's reading when the world began (time 0)")
    clock: float = Field(description="the fleet clock's reading when saved")
    nodes: list[SavedNode] = Field(default_factory=list)
    devices: list[SavedDevice] = Field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> SavedWorld:
        """The world saved at `path`; `errors.Invalid` naming the file and each bad field."""
        try:
            raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise errors.Invalid.field(str(path), f"cannot read it: {e.strerror or e}") from e
        except yaml.YAMLError as e:
            raise errors.Invalid(f"{path}: malformed YAML: {e}") from e
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            fields = [
                FieldError(".".join(str(p) for p in err["loc"]) or "world", str(err["msg"])) for err in e.errors()
            ]
            raise errors.Invalid(f"{path}: " + "; ".join(str(f) for f in fields), fields) from e

    def scenario_of(self, source: str) -> Scenario:
        """A scenario of the saved settings, nodes and devices (checked as a scenario file is), nothing to run."""
        spec = {
            "settings": self.settings,
            "nodes": [{"name": n.name} for n in self.nodes],
            "devices": [d.model_dump() for d in self.devices],
        }
        return _load(_document(self.scenario, spec), source, prefix="spec.")

    def dump(self) -> str:
        return yaml.safe_dump(self.model_dump(by_alias=True), sort_keys=False)


# -- the composition ---------------------------------------------------------------------------------------------------


class Up:
    """A scenario's fleet kept running on `store` (a URL: the fleet opens it with its clock and closes it), with its
    world saved to `world` (None: not saved) and restored from it when the file exists (module docstring; the
    scenario is then not used, and may be None).

    `async with Up(...) as up` starts the fleet (restored, or set up: the scenario's nodes, devices, manifests and
    fleet requests); `await up.start()` runs the scenario's steps (a fresh world only), saves the world and starts
    the ticker; `up.app(...)` is the API server app with the control routes. Leaving the block stops the ticker,
    saves the world, and stops the fleet (which closes the store)."""

    def __init__(
        self,
        scenario: Scenario | None,
        store: str,
        *,
        world: Path | None = None,
        seed: int = 0,
        on_step: Observer | None = None,
        tick_seconds: float = 1.0,
        wall: Callable[[], float] = time.monotonic,
        epoch: Callable[[], float] = time.time,
        keep_steps: int = 100,
    ) -> None:
        self.world_path = world
        self.saved = SavedWorld.read(world) if world is not None and world.exists() else None
        if self.saved is not None:
            scenario = self.saved.scenario_of(str(world))
        if scenario is None:
            raise errors.Invalid.field("scenario", f"no world saved at {world} and no scenario to start one from")
        self.scenario = scenario
        self.run = ScenarioRun(scenario, store=store, seed=seed, on_step=on_step)
        self.tick_seconds = tick_seconds
        self.keep_steps = keep_steps
        self._wall = wall
        self._epoch = epoch
        self._lock = asyncio.Lock()
        self._started = 0.0
        self._last_wall = 0.0
        self._ticks = 0
        self._next_index = 0
        self._ticker: asyncio.Task[None] | None = None
        self._unsettled = False
        self._stack = contextlib.AsyncExitStack()
        self._ready = False

    @property
    def restored(self) -> bool:
        """Whether the world came from a saved file (then the scenario's setup and steps do not run again)."""
        return self.saved is not None

    @property
    def sim_time(self) -> float:
        """Simulated seconds since the world began."""
        return self.run.fleet.clock.now() - self._started

    # -- lifecycle -------------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Up:
        fleet = self.run.fleet
        clock = fleet.clock
        if self.saved is not None:
            for node in self.saved.nodes:
                fleet.add_node(node.name, down=node.down)
            for device in self.saved.devices:
                fleet.plug(device.id, device.nodes, device.properties)
            self._started = self.saved.started
            await clock.advance(self.saved.clock - clock.now())  # no sleepers yet: it only sets the reading
        else:
            self._started = self._epoch()
            await clock.advance(self._started - clock.now())
        try:
            await self._stack.enter_async_context(self.run.live(setup=self.saved is None, started=self._started))
            if self.saved is not None:
                try:
                    await fleet.settle(self.run.settle_timeout)
                except errors.Unavailable as e:  # the API still serves what there is; the ticker keeps settling
                    log.warning("the restored fleet did not settle: %s", e.message)
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def start(self) -> None:
        """Run the scenario's steps (a fresh world only; each one through `on_step`), save the world, start ticking."""
        async with self._lock:
            if self.saved is None:
                for index, step in enumerate(self.scenario.spec.steps):
                    record = await self.run.run_step(index, step)
                    if record.stopped:
                        break
            self._next_index = len(self.run.report.steps)
            self._trim()
            self._ready = True
            await self._save()
            self._last_wall = self._wall()
        if self.tick_seconds > 0:
            self._ticker = asyncio.get_running_loop().create_task(self._tick_forever(), name="sim-ticker")

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self._ticker is not None:
                self._ticker.cancel()
                await asyncio.gather(self._ticker, return_exceptions=True)
                self._ticker = None
            async with self._lock:
                await self._save()
        finally:
            await self._stack.aclose()

    def app(self, **options: Any) -> FastAPI:
        """The API server app over the fleet's store and clock (`create_app(**options)`), with the control routes."""
        from devplace.server import create_app

        app = create_app(self.run.fleet.store, clock=self.run.fleet.clock, **options)
        app.include_router(self.router())
        return app

    # -- time ------------------------------------------------------------------------------------------------------

    async def tick(self) -> float:
        """Advance the fleet's clock by the wall seconds since the last tick and settle; returns those seconds."""
        async with self._lock:
            now = self._wall()
            elapsed, self._last_wall = max(0.0, now - self._last_wall), now
            try:
                if elapsed > 0:  # a tick settles briefly: it holds the lock, and steps wait for it
                    await self.run.fleet.advance(elapsed, timeout=min(self.run.settle_timeout, TICK_SETTLE))
                if self._unsettled:
                    log.info("the simulated fleet settles again")
                self._unsettled = False
            except errors.DevplaceError as e:
                if not self._unsettled:
                    log.warning("the simulated fleet did not settle after %.1f s of time: %s", elapsed, e.message)
                self._unsettled = True
            self._ticks += 1
            if self._ticks % SAVE_EVERY == 0:
                await self._save()
            return elapsed

    async def _tick_forever(self) -> None:
        while True:
            await asyncio.sleep(self.tick_seconds)  # wall time by design: it is what the fake clock follows
            try:
                await self.tick()
            except OSError as e:  # the world could not be saved; the next save tries again
                log.warning("cannot save the simulated world to %s: %s", self.world_path, e)

    # -- the world -------------------------------------------------------------------------------------------------

    def devices(self) -> list[dict[str, Any]]:
        """Every plugged device: id, the nodes that see it, its properties (sorted by id)."""
        fleet = self.run.fleet
        seen: dict[str, dict[str, Any]] = {}
        for node in fleet.nodes:
            for device in fleet.world.devices_on(node):
                if device.id not in seen:
                    seen[device.id] = {
                        "id": device.id,
                        "nodes": fleet.world.nodes_of(device.id),
                        "properties": dict(device.properties),
                    }
        return [seen[i] for i in sorted(seen)]

    def world(self) -> dict[str, Any]:
        """`GET /sim/v1`'s answer."""
        fleet = self.run.fleet
        return {
            "nodes": [{"name": n, "down": fleet.is_down(n)} for n in fleet.nodes],
            "devices": self.devices(),
            "time": self.sim_time,
        }

    def snapshot(self) -> SavedWorld:
        fleet = self.run.fleet
        return SavedWorld(
            scenario=self.scenario.name,
            settings=self.scenario.spec.settings.model_dump(by_alias=True, exclude_none=True, mode="json"),
            started=self._started,
            clock=fleet.clock.now(),
            nodes=[SavedNode(name=n, down=fleet.is_down(n)) for n in fleet.nodes],
            devices=[SavedDevice.model_validate(d) for d in self.devices()],
        )

    async def _save(self) -> None:
        """Write the world (under the lock; only once the scenario has run: the file is the marker)."""
        if self.world_path is None or not self._ready:
            return
        text = self.snapshot().dump()
        await asyncio.to_thread(write_atomically, self.world_path, text)

    def _trim(self) -> None:
        report = self.run.report
        del report.steps[: -self.keep_steps or None]
        del report.samples[: -self.keep_steps or None]

    # -- steps -----------------------------------------------------------------------------------------------------

    def validate(self, body: Any) -> ScenarioStep:
        """One step from a request body, checked against the live fleet (module docstring); `errors.Invalid`."""
        if not isinstance(body, dict):
            raise errors.Invalid.field("step", 'a step is a JSON object, e.g. {"unplug": {"device": "cam-1"}}')
        for at in _file_references(body.get("apply")):
            raise errors.Invalid.field(at, "the server reads no files for a client: send the manifests themselves")
        spec = {
            "nodes": [{"name": n} for n in self.run.fleet.nodes],
            "devices": self.devices(),
            "steps": [body],
        }
        scenario = _load(_document("step", spec), "step", prefix=f"{_STEP_AT}.", root="step")
        return scenario.spec.steps[0]

    async def step(self, body: Any) -> dict[str, Any]:
        """Check and run one step (serialized); the record's wire form with `sample`, the cluster after it."""
        async with self._lock:
            step = self.validate(body)
            record = await self.run.run_step(self._next_index, step)
            self._next_index += 1
            sample = self.run.report.samples[-1]
            self._trim()
            await self._save()
        return {**record.to_wire(), "sample": sample.to_wire()}

    def router(self) -> APIRouter:
        """`GET /sim/v1` and `POST /sim/v1/steps` (module docstring)."""
        api = APIRouter(tags=["simulation"])

        @api.get(SIM_PATH, summary="The simulated world: nodes, devices, simulated time")
        async def get_world() -> dict[str, Any]:
            return self.world()

        @api.post(f"{SIM_PATH}/steps", summary="Run one scenario step on the simulated fleet")
        async def post_step(request: Request) -> dict[str, Any]:
            raw = await request.body()
            try:
                body = json.loads(raw) if raw.strip() else None
            except ValueError as e:
                raise errors.Malformed(f"the request body is not JSON: {e}") from None
            return await self.step(body)

        return api


def _file_references(apply: Any) -> Iterable[str]:
    items = apply if isinstance(apply, list) else [apply]
    for i, item in enumerate(items):
        if isinstance(item, dict) and "file" in item:
            yield f"apply[{i}].file" if isinstance(apply, list) else "apply.file"
