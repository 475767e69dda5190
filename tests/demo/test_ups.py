"""`devplace up`'s composition: the `/sim/v1` control API on a served app over a running fleet, the saved world, time.

Every test runs a real `Up` (a fleet of simulated nodes, its scheduler and controller) and talks to its app over a
loopback port (tests/servers.py). The ticker is off (`tick_seconds=0`): time moves only by `advance` steps or by
`tick()` with a fake wall clock, so `time` is exact.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from devplace import errors
from devplace.demo import SIM_PATH, Up, up_scenario, world_file
from devplace.demo._ups import SavedWorld
from devplace.server import Auth, Tokens
from devplace.sim import Scenario, load_scenario
from tests.servers import serve_app

EPOCH = 1_800_000_000.0

SCENARIO = """
apiVersion: devplace.io/v1alpha1
kind: Scenario
metadata: {name: up-test}
spec:
  settings: {releaseGrace: 60s, offlineGrace: 60s}
  nodes: [{name: node-a}, {name: node-b}]
  devices:
    - {id: cam-1, nodes: [node-a, node-b], properties: {kind: camera}}
  manifests:
    - apiVersion: akri.sh/v0
      kind: Configuration
      metadata: {name: cams, namespace: default}
      spec: {discoveryHandler: {name: sim, discoveryDetails: "kind: camera"}, capacity: 1}
  steps:
    - plug: {device: cam-9, nodes: [node-b], properties: {kind: camera}}
      expect: {counts: {instances: 2}}
"""

TOKENS = """admin-token,alice,1,"admin"
reader-token,bob,2,"reader"
node-token,system:node:node-a,3,"system:nodes"
"""


def scenario() -> Scenario:
    return load_scenario(SCENARIO, "up-test.yaml")


def fake_wall(*readings: float) -> Any:
    values = iter(readings)
    return lambda: next(values)


@pytest.fixture
async def up() -> AsyncIterator[Up]:
    session = Up(scenario(), "memory", tick_seconds=0, epoch=lambda: EPOCH)
    async with session:
        await session.start()
        yield session


@pytest.fixture
async def client(up: Up) -> AsyncIterator[httpx2.AsyncClient]:
    async with serve_app(up.app(fleet_api=False)) as base_url, httpx2.AsyncClient(base_url=base_url) as http:
        yield http


async def instances(up: Up) -> list[str]:
    return sorted(i["metadata"]["name"] for i in await up.run.fleet.list("Instance"))


async def test_the_world_lists_nodes_devices_and_simulated_time(client: httpx2.AsyncClient) -> None:
    response = await client.get(SIM_PATH)
    assert response.status_code == 200
    assert response.json() == {
        "nodes": [{"name": "node-a", "down": False}, {"name": "node-b", "down": False}],
        "devices": [
            {"id": "cam-1", "nodes": ["node-a", "node-b"], "properties": {"kind": "camera"}},
            {"id": "cam-9", "nodes": ["node-b"], "properties": {"kind": "camera"}},
        ],
        "time": 0.0,
    }


async def test_the_scenario_steps_ran_once_at_start(up: Up) -> None:
    assert [(s.title, s.ok) for s in up.run.report.steps] == [("plug cam-9", True)]
    assert len(await instances(up)) == 2


async def test_plugging_a_device_makes_an_instance_and_answers_the_record_and_sample(
    up: Up, client: httpx2.AsyncClient
) -> None:
    before = await instances(up)
    response = await client.post(
        f"{SIM_PATH}/steps",
        json={"plug": {"device": "cam-3", "nodes": ["node-a"], "properties": {"kind": "camera"}}},
    )
    assert response.status_code == 200
    answer = response.json()
    assert (answer["index"], answer["title"], answer["action"], answer["ok"]) == (1, "plug cam-3", "plug", True)
    assert (answer["error"], answer["mismatches"]) == (None, [])
    after = await instances(up)
    assert len(after) == len(before) + 1
    (new,) = set(after) - set(before)
    assert answer["sample"]["instances"][new] == {
        "configuration": "cams",
        "nodes": ["node-a"],
        "slots": {f"{new}-0": "free"},
    }


async def test_unplugging_a_shared_device_removes_its_instance_after_the_offline_grace(
    up: Up, client: httpx2.AsyncClient
) -> None:
    response = await client.post(f"{SIM_PATH}/steps", json={"unplug": {"device": "cam-9"}})
    assert (response.status_code, response.json()["ok"]) == (200, True)
    assert [d["id"] for d in (await client.get(SIM_PATH)).json()["devices"]] == ["cam-1"]
    assert len(await instances(up)) == 2  # offline, kept for the offline grace (60 s here)
    response = await client.post(f"{SIM_PATH}/steps", json={"advance": "61s", "expect": {"counts": {"instances": 1}}})
    assert (response.status_code, response.json()["ok"]) == (200, True)
    assert len(await instances(up)) == 1


async def test_a_step_whose_expectation_fails_is_answered_with_the_mismatch(client: httpx2.AsyncClient) -> None:
    response = await client.post(f"{SIM_PATH}/steps", json={"settle": True, "expect": {"counts": {"instances": 5}}})
    assert response.status_code == 200
    answer = response.json()
    assert answer["ok"] is False
    assert answer["mismatches"] == [{"field": "counts.instances", "wanted": 5, "got": 2}]


async def test_node_down_and_advance_show_in_the_world(client: httpx2.AsyncClient) -> None:
    assert (await client.post(f"{SIM_PATH}/steps", json={"node-down": "node-b"})).json()["ok"] is True
    assert (await client.post(f"{SIM_PATH}/steps", json={"advance": "90s"})).json()["simTime"] == 90.0
    world = (await client.get(SIM_PATH)).json()
    assert world["nodes"] == [{"name": "node-a", "down": False}, {"name": "node-b", "down": True}]
    assert world["time"] == 90.0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"plug": {"device": "cam-3", "nodes": ["node-z"]}}, "plug.nodes[0]"),
        ({"unplug": {"device": "cam-404"}}, "unplug.device"),
        ({"node-down": "node-z"}, "node-down"),
        ({"advance": "5 minutes"}, "advance"),
        ({"plug": {"device": "cam-3"}}, "plug.nodes"),
        ({"teleport": "node-a"}, "teleport"),
        ({"unplug": {"device": "cam-1"}, "node-down": "node-a"}, "step"),
        ({"apply": {"file": "/etc/passwd"}}, "apply.file"),
        (["plug"], "step"),
    ],
)
async def test_a_bad_step_is_a_422_naming_the_field_and_changes_nothing(
    up: Up, client: httpx2.AsyncClient, body: Any, field: str
) -> None:
    world = (await client.get(SIM_PATH)).json()
    before = await instances(up)
    response = await client.post(f"{SIM_PATH}/steps", json=body)
    assert response.status_code == 422
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Invalid", 422)
    assert field in [cause["field"] for cause in status["details"]["causes"]]
    assert (await client.get(SIM_PATH)).json() == world
    assert await instances(up) == before
    assert len(up.run.report.steps) == 1  # only the scenario's own step ran


async def test_a_body_that_is_not_json_is_a_400(client: httpx2.AsyncClient) -> None:
    response = await client.post(
        f"{SIM_PATH}/steps", content=b"plug: {device: x}", headers={"Content-Type": "application/yaml"}
    )
    assert (response.status_code, response.json()["reason"]) == (400, "BadRequest")


async def test_with_tokens_the_control_api_is_authenticated_and_authorized(up: Up, tmp_path: Path) -> None:
    app = up.app(fleet_api=False, auth=Auth(Tokens.parse(TOKENS)))
    step = {"advance": "1s"}
    async with serve_app(app) as base_url, httpx2.AsyncClient(base_url=base_url) as http:

        def as_(token: str) -> dict[str, str]:
            return {"Authorization": f"Bearer {token}"}

        assert (await http.get(SIM_PATH)).status_code == 401
        assert (await http.post(f"{SIM_PATH}/steps", json=step)).status_code == 401
        assert (await http.get(SIM_PATH, headers=as_("reader-token"))).status_code == 200
        refused = await http.post(f"{SIM_PATH}/steps", json=step, headers=as_("reader-token"))
        assert refused.status_code == 403
        assert "rule reader-read-only" in refused.json()["message"]
        assert (await http.get(SIM_PATH, headers=as_("node-token"))).status_code == 200
        refused = await http.post(f"{SIM_PATH}/steps", json=step, headers=as_("node-token"))
        assert refused.status_code == 403
        assert "rule node-kinds" in refused.json()["message"]
        allowed = await http.post(f"{SIM_PATH}/steps", json=step, headers=as_("admin-token"))
        assert (allowed.status_code, allowed.json()["ok"], allowed.json()["simTime"]) == (200, True, 1.0)


async def test_a_tick_moves_simulated_time_by_the_wall_seconds_that_passed() -> None:
    session = Up(scenario(), "memory", tick_seconds=0, epoch=lambda: EPOCH, wall=fake_wall(100.0, 103.5, 103.5))
    async with session:
        await session.start()  # reads the wall once: 100.0
        assert await session.tick() == 3.5
        assert session.sim_time == 3.5
        assert session.run.fleet.clock.now() == EPOCH + 3.5
        assert await session.tick() == 0.0
        assert session.world()["time"] == 3.5


async def test_a_restart_on_the_same_store_restores_the_world_and_runs_no_scenario_again(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path}/devplace.db"
    world = world_file(store)
    assert world == tmp_path / "devplace.db.sim.yaml"
    first = Up(scenario(), store, world=world, tick_seconds=0, epoch=lambda: EPOCH)
    async with first:
        assert not first.restored
        await first.start()
        await first.step({"unplug": {"device": "cam-9"}})
        await first.step({"plug": {"device": "usb-1", "nodes": ["node-a"], "properties": {"kind": "camera"}}})
        await first.step({"node-down": "node-b"})
        await first.step({"advance": "2m"})
        kept = first.world()
        names = await instances(first)
    assert world.exists()

    again = Up(None, store, world=world, tick_seconds=0, epoch=lambda: EPOCH + 3600)
    async with again:
        await again.start()
        assert again.restored
        assert again.run.report.steps == []  # neither the scenario's steps nor its manifests ran again
        assert again.world() == kept  # nodes (node-b still down), devices (no cam-9), time (120 s)
        assert await again.run.fleet.get("Node", "node-b") is None  # restored down: it never registered
        assert await instances(again) == names
        assert again.run.fleet.clock.now() == EPOCH + 120.0
        assert again.scenario.spec.settings.release_grace == 60.0
        assert (await again.step({"node-up": "node-b"}))["ok"] is True
        assert again.world()["nodes"][1] == {"name": "node-b", "down": False}


def test_the_world_is_kept_beside_a_sqlite_store_only() -> None:
    assert world_file("sqlite:///./x/devplace.db") == Path("./x/devplace.db.sim.yaml")
    assert world_file("memory") is None
    with pytest.raises(errors.Invalid, match="store"):
        world_file("etcd://127.0.0.1:2379")


def test_a_generated_world_has_numbered_nodes_the_listed_devices_and_a_configuration() -> None:
    generated = up_scenario(3, "- {id: cam-1, nodes: [node-1, node-3], properties: {kind: camera}}\n")
    assert [n.name for n in generated.spec.nodes] == ["node-1", "node-2", "node-3"]
    assert [(d.id, d.nodes, d.properties) for d in generated.spec.devices] == [
        ("cam-1", ["node-1", "node-3"], {"kind": "camera"})
    ]
    assert [m["metadata"]["name"] for m in generated.spec.manifests] == ["devices"]
    assert up_scenario(1, configuration=False).spec.manifests == []


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("- {id: cam-1, nodes: [node-7]}\n", "devices[0].nodes[0]"),
        ("- {id: cam-1}\n", "devices[0].nodes"),
        ("- {id: cam-1, nodes: [node-1], colour: red}\n", "devices[0].colour"),
        ("{id: cam-1}\n", "devices.yaml"),
    ],
)
def test_a_bad_devices_file_is_refused_naming_the_entry(text: str, field: str) -> None:
    with pytest.raises(errors.Invalid) as refused:
        up_scenario(2, text, source="devices.yaml")
    assert field in [f.path for f in refused.value.fields]
    assert refused.value.message.startswith("devices.yaml: ")


def test_a_damaged_world_file_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "devplace.db.sim.yaml"
    path.write_text("kind: SimWorld\nscenario: x\nstarted: 1.0\nclock: soon\n")
    with pytest.raises(errors.Invalid) as refused:
        SavedWorld.read(path)
    assert [f.path for f in refused.value.fields] == ["clock"]
    assert str(path) in refused.value.message
