"""The dashboard in a real browser: Debian's Chromium, headless, driven by Playwright, against a `devplace server`
subprocess on loopback (SQLite store, tokens configured: an admin and a reader).

Each test writes objects through the API and waits for the page to show them through its watches: seed 000's
walk-through slot by slot, an invalid manifest's field error, a reader without actions and an admin with them,
hostile device properties shown as text, every view rendered with screenshots saved under the test's tmp_path, and
no request leaving 127.0.0.1. The simulator's actions need `devplace up` (its /sim/v1): that test runs only where
`devplace up` exists. One browser for the module; a fresh context (no shared state, no token) per test.
"""

from __future__ import annotations

import copy
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.servers import free_port, spawn_server

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="Debian's chromium is not installed (`make test` installs chromium chromium-driver)"
)
sync_api = pytest.importorskip("playwright.sync_api")

ADMIN = "admin-token-0123"
READER = "reader-token-4567"
TOKENS = f'{ADMIN},alice,1,"admin"\n{READER},bob,2,"reader"\n'
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
INSTANCES = "/apis/devplace.io/v1alpha1/namespaces/default/instances"
TIMEOUT_MS = 10_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp("dashboard")
    tokens = directory / "tokens.csv"
    tokens.write_text(TOKENS)
    with spawn_server(f"sqlite:///{directory / 'store.db'}", extra_args=("--token-auth-file", str(tokens))) as url:
        yield url


@pytest.fixture(scope="module")
def api(server: str) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=server, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=10) as client:
        yield client


class Page:
    """A browser page on the dashboard that records every request it makes and every dialog it opens."""

    def __init__(self, page: Any, base: str) -> None:
        self.page = page
        self.base = base
        self.requests: list[str] = []
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.set_default_timeout(TIMEOUT_MS)
        page.on("request", lambda request: self.requests.append(request.url))
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda error: self.errors.append(str(error)))

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self, view: str, token: str | None = ADMIN) -> Page:
        self.page.goto(f"{self.base}/ui#{view}")
        if token is not None:
            self.page.fill("#token", token)
            self.page.click("#sign-in")
        self.page.wait_for_selector("#layout:not([hidden])")
        self.page.wait_for_selector(".connection[data-state=live]")
        return self

    def show(self, view: str) -> None:
        self.page.click(f"#tabs button[data-view={view}]")
        self.page.wait_for_selector(f"#{view}")

    def screenshot(self, path: Path) -> None:
        self.page.screenshot(path=str(path), full_page=True)

    def hosts(self) -> set[str]:
        return {urlsplit(url).hostname or "" for url in self.requests}


@pytest.fixture
def page(browser: Any, server: str) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        yield Page(context.new_page(), server)
    finally:
        context.close()


def instance(name: str, capacity: int, properties: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "configurationName": "akri-onvif",
            "capacity": capacity,
            "shared": True,
            "nodes": ["node-a", "node-b"],
            "deviceUsage": {f"{name}-{i}": "" for i in range(capacity)},
            "brokerProperties": properties or {},
        },
    }


def create(api: httpx2.Client, path: str, obj: dict[str, Any]) -> dict[str, Any]:
    answer = api.post(path, json=obj)
    assert answer.status_code == 201, answer.text
    created: dict[str, Any] = answer.json()
    return created


def set_holder(api: httpx2.Client, name: str, slot: str, holder: str) -> None:
    """One slot claim as the agent writes it: a compare-and-swap on the Instance's resourceVersion."""
    current = api.get(f"{INSTANCES}/{name}").json()
    updated = copy.deepcopy(current)
    updated["spec"]["deviceUsage"][slot] = holder
    answer = api.put(f"{INSTANCES}/{name}", json=updated)
    assert answer.status_code == 200, answer.text


def slot_selector(slot: str, holder: str) -> str:
    return f'.slot[data-slot="{slot}"][data-holder="{holder}"]'


def test_seed_000_walk_through_shows_each_slot_as_it_is_taken(page: Page, api: httpx2.Client, tmp_path: Path) -> None:
    left, right = "akri-onvif-8120fe", "akri-onvif-a19705"
    create(api, INSTANCES, instance(left, 2))
    create(api, INSTANCES, instance(right, 2))
    page.open("instances")
    for name in (left, right):
        for i in range(2):
            page.page.wait_for_selector(slot_selector(f"{name}-{i}", "") + ".slot-free")
    # A pod asking for 2 configuration-level devices lands on node-a: one slot of each camera (uniqueDevices).
    steps = [
        (left, f"{left}-0", f"C:{left}:node-a", "slot-cl"),
        (right, f"{right}-1", f"C:{right}:node-a", "slot-cl"),
        # A pod asking for the instance-level device of a19705 lands on node-b.
        (right, f"{right}-0", "node-b", "slot-il"),
        # devplace's fourth holder: a DRA claim allocated for a pod on node-b.
        (left, f"{left}-1", "D:default/camera-claim:node-b", "slot-dra"),
    ]
    for number, (name, slot, holder, colour) in enumerate(steps, 1):
        set_holder(api, name, slot, holder)
        shown = page.page.wait_for_selector(slot_selector(slot, holder) + f".{colour}")
        assert shown is not None
        page.screenshot(tmp_path / f"walk-through-{number}.png")
    row = page.page.locator(f'tr[data-key="default/{right}"] .slot')
    assert row.all_text_contents() == ["0: node-b · IL", "1: node-a · CL"]
    assert page.errors == []


def test_an_invalid_manifest_shows_the_error_next_to_the_field_and_a_valid_one_is_applied(
    page: Page, api: httpx2.Client
) -> None:
    page.open("instances")
    bad = "\n".join(
        [
            "apiVersion: devplace.io/v1alpha1",
            "kind: Instance",
            "metadata:",
            "  name: camera-bad",
            "spec:",
            "  configurationName: cams",
            "  capacity: many",
        ]
    )
    page.page.fill("#manifest", bad)
    page.page.click("#apply")
    error = page.page.wait_for_selector('#apply-errors .field-error[data-field="spec.capacity"]')
    assert error is not None
    assert "spec.capacity" in error.inner_text()
    assert api.get(f"{INSTANCES}/camera-bad").status_code == 404

    page.page.fill("#manifest", "kind: Instance\nmetadata:\n  name: x\n")
    page.page.click("#apply")
    assert page.page.wait_for_selector('#apply-errors .field-error[data-field="apiVersion"]') is not None

    good = bad.replace("capacity: many", "capacity: 1").replace("camera-bad", "camera-good")
    page.page.fill("#manifest", good)
    page.page.click("#apply")
    page.page.wait_for_selector("#apply-results li")
    assert page.page.inner_text("#apply-results") == "Instance default/camera-good created"
    assert page.page.inner_text("#apply-errors") == ""
    page.page.wait_for_selector('tr[data-key="default/camera-good"]')  # through the watch
    page.page.fill("#manifest", good + "\n  shared: true\n")
    page.page.click("#apply")
    page.page.wait_for_selector("#apply-results li:text-is('Instance default/camera-good applied')")
    assert api.get(f"{INSTANCES}/camera-good").json()["spec"]["shared"] is True


def test_a_reader_sees_no_actions_and_an_admin_does(page: Page, api: httpx2.Client, browser: Any) -> None:
    create(api, INSTANCES, instance("camera-doomed", 1))
    page.open("instances", token=READER)
    page.page.wait_for_selector('tr[data-key="default/camera-doomed"]')
    assert page.page.inner_text("#whoami").startswith("signed in as bob")
    assert page.page.is_hidden("#apply-panel")
    assert page.page.is_hidden("#sim-panel")
    assert page.page.locator("button.delete").count() == 0

    page.page.click("#sign-out")
    page.page.wait_for_selector("#login:not([hidden])")
    page.page.fill("#token", "not-a-token")
    page.page.click("#sign-in")
    assert page.page.wait_for_selector("#login-error:has-text('refused')") is not None

    admin = Page(browser.new_page(), page.base).open("instances")
    try:
        assert admin.page.is_visible("#apply-panel")
        delete = admin.page.locator('button[data-delete="Instance/default/camera-doomed"]')
        delete.click()
        delete.click()  # the second click confirms
        admin.page.wait_for_selector('tr[data-key="default/camera-doomed"]', state="detached")
        assert api.get(f"{INSTANCES}/camera-doomed").status_code == 404
        assert admin.page.inner_text("#notice") == "Deleted Instance default/camera-doomed."
    finally:
        admin.page.close()


def test_hostile_properties_show_as_text_and_run_nothing(page: Page, api: httpx2.Client) -> None:
    payload = "<img src=x onerror=alert(1)>"
    script = "<script>window.pwned = 1</script>"
    create(api, INSTANCES, instance("camera-hostile", 1, {"scope": payload, "name": script, payload: "key"}))
    page.open("instances")
    row = page.page.wait_for_selector('tr[data-key="default/camera-hostile"]')
    assert row is not None
    text = row.inner_text()
    assert payload in text
    assert script in text
    assert page.page.locator("#view img, #view script").count() == 0
    assert page.page.evaluate("window.pwned") is None
    page.page.wait_for_timeout(300)  # an onerror would fire on the failed load of x, had an img been made
    assert page.dialogs == []
    assert not [url for url in page.requests if urlsplit(url).path.endswith("/x")]


def test_every_view_renders_its_objects_and_no_request_leaves_loopback(
    page: Page, api: httpx2.Client, tmp_path: Path
) -> None:
    seed_every_view(api)
    page.open("nodes")
    page.page.wait_for_selector('tr[data-node="node-a"][data-resource="devplace.io/akri-onvif"]')
    cells = page.page.locator('tr[data-node="node-a"][data-resource="devplace.io/akri-onvif"] td.num')
    assert cells.all_text_contents() == ["2", "1", "1", "0", "1"]  # capacity, allocatable, held, available, unhealthy
    cells = page.page.locator('tr[data-node="node-b"][data-resource="devplace.io/akri-onvif"] td.num')
    assert cells.all_text_contents() == ["2", "1", "0", "1", "1"]
    page.screenshot(tmp_path / "nodes.png")

    page.show("instances")
    page.page.wait_for_selector(".slot")
    page.screenshot(tmp_path / "instances.png")

    page.show("brokers")
    pending = page.page.wait_for_selector('tr[data-key="default/waiting"] .reason')
    assert pending is not None
    assert pending.inner_text() == "0/2 nodes: 2 no device matches class gpu"
    assert page.page.locator('.card[data-key="default/akri-onvif"] h3').inner_text().startswith("default/akri-onvif")
    page.page.wait_for_selector('.card[data-key="default/akri-onvif"] tr[data-key="default/node-a-broker"]')
    page.screenshot(tmp_path / "brokers.png")

    page.show("classes")
    page.page.wait_for_selector('tr[data-key="fast-cameras"]')
    assert "Kind In [onvif, udev]" in page.page.inner_text('tr[data-key="fast-cameras"] .selector')
    create(api, INSTANCES, instance("akri-onvif-c1a55e", 1))  # created while the view shows: it reads devices again
    selected = page.page.wait_for_selector(
        'tr[data-key="fast-cameras"] .device[data-device="default/akri-onvif-c1a55e"]'
    )
    assert selected is not None
    assert selected.inner_text() == "default/akri-onvif-c1a55e · node-a, node-b"
    page.screenshot(tmp_path / "classes.png")

    page.show("fleet")
    rejected = page.page.wait_for_selector('.app[data-app="camera-app"] ul.rejected li')
    assert rejected is not None
    assert rejected.inner_text() == "edge/c2: no node has 2 x devplace.io/akri-onvif"
    page.screenshot(tmp_path / "fleet.png")

    for view in ("nodes", "instances", "brokers", "classes", "fleet"):
        assert (tmp_path / f"{view}.png").stat().st_size > 0
    assert page.hosts() == {"127.0.0.1"}, sorted(set(page.requests))
    assert page.errors == []


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A server without tokens: every request may do anything."""
    with spawn_server(f"sqlite:///{tmp_path_factory.mktemp('open') / 'store.db'}") as url:
        yield url


def test_without_tokens_the_page_asks_none_and_docs_work_offline(
    browser: Any, open_server: str, tmp_path: Path
) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = Page(context.new_page(), open_server).open("fleet", token=None)
        assert page.page.is_hidden("#login")
        assert page.page.inner_text("#whoami") == "no authentication"
        assert page.page.is_visible("#apply-panel")
        page.page.goto(f"{open_server}/docs")
        page.page.wait_for_selector(".swagger-ui .info .title:has-text('devplace')")
        page.screenshot(tmp_path / "docs.png")
        assert page.hosts() == {"127.0.0.1"}, sorted(set(page.requests))
        assert page.errors == []
    finally:
        context.close()


def seed_every_view(api: httpx2.Client) -> None:
    resource = "devplace.io/akri-onvif"
    for node in ("node-a", "node-b"):
        capacity = {"cpu": "4", resource: "2"}
        create(
            api,
            "/api/v1/nodes",
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": node},
                "status": {
                    "capacity": capacity,
                    "allocatable": {**capacity, resource: "1"},
                    "conditions": [{"type": "Ready", "status": "True"}],
                },
            },
        )
    container = {"name": "broker", "image": "nginx", "resources": {"limits": {resource: "1"}}}
    create(
        api,
        "/apis/devplace.io/v1alpha1/namespaces/default/configurations",
        {
            "apiVersion": "devplace.io/v1alpha1",
            "kind": "Configuration",
            "metadata": {"name": "akri-onvif"},
            "spec": {
                "discoveryHandler": {"name": "onvif"},
                "capacity": 2,
                "brokerSpec": {"brokerPodSpec": {"containers": [{"name": "broker", "image": "nginx"}]}},
            },
        },
    )
    create(
        api,
        "/api/v1/namespaces/default/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "node-a-broker", "labels": {"akri.sh/configuration": "akri-onvif"}},
            "spec": {"nodeName": "node-a", "containers": [container]},
            "status": {"phase": "Running"},
        },
    )
    create(
        api,
        "/api/v1/namespaces/default/pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "waiting"},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/2 nodes: 2 no device matches class gpu",
                    }
                ],
            },
        },
    )
    create(
        api,
        "/apis/devplace.io/v1alpha1/resourceclasses",
        {
            "apiVersion": "devplace.io/v1alpha1",
            "kind": "ResourceClass",
            "metadata": {"name": "fast-cameras"},
            "spec": {
                "resourceSelector": [
                    {"matchExpressions": [{"key": "Kind", "operator": "In", "values": ["onvif", "udev"]}]}
                ]
            },
        },
    )
    create(
        api,
        "/apis/fleet.devplace.io/v1alpha1/clusters",
        {
            "apiVersion": "fleet.devplace.io/v1alpha1",
            "kind": "Cluster",
            "metadata": {"name": "edge-c1"},
            "spec": {"path": ["edge", "c1"], "emco": {"metadata": {"name": "c1"}}, "labels": {"site": "lab"}},
        },
    )
    create(
        api,
        "/apis/fleet.devplace.io/v1alpha1/deploymentintentgroups",
        {
            "apiVersion": "fleet.devplace.io/v1alpha1",
            "kind": "DeploymentIntentGroup",
            "metadata": {"name": "cameras-dig"},
            "spec": {
                "path": ["demo", "cameras", "v1", "dig"],
                "emco": {"metadata": {"name": "dig"}, "spec": {"profile": "p", "version": "r1"}},
            },
            "status": {
                "state": "Instantiated",
                "actions": [
                    {"state": "Created", "instance": "", "time": "2026-01-01T00:00:00Z"},
                    {"state": "Approved", "instance": "", "time": "2026-01-01T00:00:01Z"},
                    {"state": "Instantiated", "instance": "1", "time": "2026-01-01T00:00:02Z"},
                ],
                "placement": {
                    "state": "Instantiated",
                    "apps": [
                        {
                            "name": "camera-app",
                            "clusters": [{"clusterProvider": "edge", "cluster": "c1", "replicas": 1, "score": 1.0}],
                            "rejected": [
                                {"clusterProvider": "edge", "cluster": "c2", "reason": f"no node has 2 x {resource}"}
                            ],
                        }
                    ],
                    "errors": [],
                },
            },
        },
    )


# -- the simulator's actions: against `devplace up` only ----------------------------------------------------------


def _has_up() -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "devplace.cli", "up", "--help"], capture_output=True, text=True, check=False
    )
    return done.returncode == 0


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not _has_up():
        pytest.skip("`devplace up` is not in this tree yet: the simulator's actions need its /sim/v1")
    directory = tmp_path_factory.mktemp("up")
    port = free_port()
    log = (directory / "up.log").open("wb")
    command = [sys.executable, "-m", "devplace.cli", "up", "--nodes", "2", "--port", str(port)]
    command += ["--store", f"sqlite:///{directory / 'store.db'}", "--write-kubeconfig", str(directory / "kubeconfig")]
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=directory)
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx2.Client(base_url=base, timeout=2) as client:
            for _ in range(600):
                try:
                    if client.get("/sim/v1").status_code == 200:
                        break
                except httpx2.TransportError:
                    pass
                if proc.poll() is not None:
                    pytest.fail(f"devplace up exited with {proc.returncode}: {(directory / 'up.log').read_text()}")
                time.sleep(0.1)  # polling a child's startup, bounded by the loop
            else:
                pytest.fail("devplace up did not serve /sim/v1 within 60 s")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


BROKERED = """apiVersion: akri.sh/v0
kind: Configuration
metadata:
  name: cams
spec:
  discoveryHandler:
    name: sim
    discoveryDetails: ""
  capacity: 1
  brokerSpec:
    brokerPodSpec:
      containers:
      - name: broker
        image: nginx
"""


def test_simulated_devices_plug_and_unplug_and_nodes_go_down_from_the_page(
    browser: Any, up: str, tmp_path: Path
) -> None:
    with httpx2.Client(base_url=up, timeout=5) as client:
        node = client.get("/sim/v1").json()["nodes"][0]["name"]
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        try:
            page = Page(context.new_page(), up).open("brokers", token=None)
            page.page.wait_for_selector("#sim-panel:not([hidden])")
            page.page.fill("#manifest", BROKERED)  # Akri's own manifest, applied from the page
            page.page.click("#apply")
            page.page.wait_for_selector("#apply-results li:text-is('Configuration default/cams created')")
            page.page.fill("#plug-device", "cam-ui")
            page.page.fill("#plug-nodes", node)
            page.page.fill("#plug-properties", "IP=10.0.0.99")
            page.page.click("#plug")
            page.page.wait_for_selector('#sim-devices li[data-device="cam-ui"]')
            broker = f'.card[data-key="default/cams"] tr[data-key^="default/{node}-cams-"]'
            page.page.wait_for_selector(broker)
            page.screenshot(tmp_path / "simulator-brokers.png")
            page.show("instances")
            device = "#instances tr:has(dd:text-is('10.0.0.99'))"
            page.page.wait_for_selector(device)
            page.page.click('button[data-unplug="cam-ui"]')
            page.page.wait_for_selector('#sim-devices li[data-device="cam-ui"]', state="detached")
            page.page.wait_for_selector(f"{device} td.health-offline")  # gone from every node: offline
            assert client.post("/sim/v1/steps", json={"advance": "10m"}).json()["ok"] is True  # past the grace
            page.page.wait_for_selector(device, state="detached")
            page.show("brokers")
            page.page.wait_for_selector('.card[data-key="default/cams"]')
            assert page.page.locator(broker).count() == 0
            page.page.click(f'button[data-sim-node="{node}"]')
            page.page.wait_for_selector(f'#sim-nodes li[data-node="{node}"][data-down="true"]')
            page.page.click(f'button[data-sim-node="{node}"]')
            page.page.wait_for_selector(f'#sim-nodes li[data-node="{node}"][data-down="false"]')
            assert page.hosts() == {"127.0.0.1"}
            assert page.errors == []
        finally:
            context.close()
