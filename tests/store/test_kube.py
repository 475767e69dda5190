"""The kube store backend beyond the contract (tests/store/test_contract.py runs it too, as `kube`).

Where the Kubernetes API differs from devplace's own: the `kube://` URL and its refusals (finding the configuration
is tests/store/test_kubeconfigs.py's), one resource per kind, watches that resume from their position (a dropped
stream loses nothing; a BOOKMARK moves the position), 410 on the first read and the informer's relist, `since=0` as
a list then a watch, and `status` written through `/status` where Kubernetes ignores it in a create or an update.

The API server is `devplace server` (a real uvicorn on 127.0.0.1) wherever it can say what is tested. Two things it
cannot: a BOOKMARK ahead of the last event (its bookmarks promise only what the stream already sent; server/_watches.py
says why), and ignoring `status` on the main resource (a documented departure of devplace's). For those a small ASGI
app speaks the few lines of the protocol a real API server would, still over real HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import uvicorn
import yaml
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule, run_state_machine_as_test

from devplace import errors
from devplace.clocks import FakeClock
from devplace.server._app import create_app, running
from devplace.store import Event, Informer, MemoryStore, open_store
from devplace.store._kube import KubeOptions, KubeStore, group_apart, load_config, parse_url, resource_of
from devplace.store._kubeconfigs import ServerConfig
from tests.store.conftest import kube_store as kube_backend
from tests.store.samples import WATCH_BOUND, configmap, rv, take
from tests.store.test_contract import StoreMatchesModel

# -- the URL and the configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("kube://", KubeOptions()),
        ("kube:///etc/devplace/kubeconfig", KubeOptions("/etc/devplace/kubeconfig")),
        ("kube://~/.kube/other", KubeOptions("~/.kube/other")),
        ("kube:///k?context=edge", KubeOptions("/k", "edge")),
        ("kube://?context=edge&group=devplace.io", KubeOptions(None, "edge", ("devplace.io",))),
        ("kube://?group=akri.sh,devplace.io&timeout=2.5", KubeOptions(None, None, ("akri.sh", "devplace.io"), 2.5)),
    ],
)
def test_a_kube_url_names_the_kubeconfig_its_context_and_the_preferred_groups(url: str, expected: KubeOptions) -> None:
    assert parse_url(url) == expected


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("kubes://", "expected kube://"),
        ("kube://relative/path", "must be absolute"),
        ("kube://?namespace=x", "unknown option 'namespace'"),
        ("kube://?context=a&context=b", "given more than once"),
        ("kube://?context=", "'context' is empty"),
        ("kube://?timeout=0", "timeout must be a positive number"),
        ("kube://?timeout=soon", "timeout must be a positive number"),
    ],
)
def test_a_bad_kube_url_is_invalid_naming_store_and_the_reason(url: str, reason: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        parse_url(url)
    assert [f.path for f in caught.value.fields] == ["store"]
    assert reason in caught.value.message


@given(st.text(max_size=40))
def test_any_text_after_kube_scheme_parses_or_is_refused_with_invalid(rest: str) -> None:
    refusal: errors.Invalid | None = None
    try:
        parse_url("kube://" + rest)
    except errors.Invalid as e:
        refusal = e
    assert refusal is None or [f.path for f in refusal.fields] == ["store"]


def kubeconfig(path: Path, **servers: str) -> Path:
    """A kubeconfig with one context per `name=server`, the first current."""
    names = list(servers)
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": n, "cluster": {"server": s}} for n, s in servers.items()],
                "users": [{"name": n, "user": {"token": f"token-{n}"}} for n in names],
                "contexts": [{"name": n, "context": {"cluster": n, "user": n}} for n in names],
                "current-context": names[0],
            }
        )
    )
    return path


@pytest.fixture
def no_cluster_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No service account environment, no KUBECONFIG, and a HOME of our own; returns that HOME."""
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


def test_a_kube_url_loads_the_context_it_names_or_the_current_one_of_its_file(
    tmp_path: Path, no_cluster_env: Path
) -> None:
    path = kubeconfig(tmp_path / "kc", lab="https://lab:6443", edge="https://edge:6443")
    current = load_config(parse_url(f"kube://{path}"))
    assert (current.context, current.server, current.credentials.token) == ("lab", "https://lab:6443", "token-lab")
    edge = load_config(parse_url(f"kube://{path}?context=edge"))
    assert (edge.context, edge.server, edge.credentials.token) == ("edge", "https://edge:6443", "token-edge")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("kube:///nowhere/kubeconfig", "not found"),
        ("kube://{kc}?context=absent", "Context 'absent' not found"),
        ("kube://{bad}", "kubeconfig.user.auth-provider: is not supported"),
    ],
)
def test_a_configuration_that_cannot_be_loaded_is_invalid_naming_store(
    tmp_path: Path, no_cluster_env: Path, url: str, reason: str
) -> None:
    path = kubeconfig(tmp_path / "kc", lab="https://lab:6443")
    bad = tmp_path / "bad"
    doc = yaml.safe_load(path.read_text())
    doc["users"][0]["user"] = {"auth-provider": {"name": "gcp"}}
    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(errors.Invalid) as caught:
        open_store(url.format(kc=path, bad=bad))
    assert [f.path for f in caught.value.fields] == ["store"]
    assert reason in caught.value.message


def test_open_store_opens_a_kube_store_on_the_kubeconfigs_server(tmp_path: Path, no_cluster_env: Path) -> None:
    path = kubeconfig(tmp_path / "kc", lab="https://lab:6443")
    store = open_store(f"kube://{path}?group=akri.sh")
    assert isinstance(store, KubeStore)
    assert store.server == "https://lab:6443"


def test_each_kind_is_one_resource_in_the_preferred_group_or_the_one_asked_for() -> None:
    assert resource_of("Configuration").collection("default") == (
        "/apis/devplace.io/v1alpha1/namespaces/default/configurations"
    )
    assert resource_of("Instance", ["akri.sh"]).collection("edge") == "/apis/akri.sh/v0/namespaces/edge/instances"
    assert resource_of("Node", ["akri.sh"]).item("n1", "") == "/api/v1/nodes/n1"
    assert resource_of("Job").collection(None) == "/apis/batch/v1/jobs"
    with pytest.raises(errors.Invalid):
        resource_of("instances")  # a plural is not a kind


# -- against devplace server ------------------------------------------------------------------------------------


def kube_store(base_url: str, clock: FakeClock, groups: tuple[str, ...] = ()) -> KubeStore:
    """A KubeStore on `base_url` (groups: the default, `akri.sh`, when empty)."""
    return KubeStore(ServerConfig(base_url), clock=clock, groups=groups)


@contextlib.asynccontextmanager
async def served(app: Any, port: int = 0) -> AsyncIterator[str]:
    async with running(app, host="127.0.0.1", port=port, shutdown_timeout=0) as base_url:
        yield base_url


@contextlib.asynccontextmanager
async def clock_driven(clock: FakeClock) -> AsyncIterator[None]:
    """Move the fake clock on in the background, so reconnect back-offs end."""

    async def drive() -> None:
        while True:
            await clock.advance(0.05)

    driver = asyncio.create_task(drive())
    try:
        yield
    finally:
        driver.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await driver


def instance(name: str, api_version: str = "devplace.io/v1alpha1", **extra: Any) -> dict[str, Any]:
    usage = {f"{name}-0": ""}
    spec = {"configurationName": "cam", "nodes": ["node-a"], "capacity": 1, "deviceUsage": usage}
    return {"apiVersion": api_version, "kind": "Instance", "metadata": {"name": name}, "spec": spec, **extra}


@pytest.mark.parametrize(
    ("groups", "written", "stored"),
    [
        ((), "devplace.io/v1alpha1", "akri.sh/v0"),  # by default, where an Akri user's objects live
        (("devplace.io",), "akri.sh/v0", "devplace.io/v1alpha1"),
    ],
)
async def test_objects_are_written_to_the_one_resource_the_store_reads(
    clock: FakeClock, groups: tuple[str, ...], written: str, stored: str
) -> None:
    backing = MemoryStore(clock=clock)
    async with served(create_app(backing, fleet_api=False)) as url:
        store = kube_store(url, clock, groups=groups)
        try:
            created = await store.create(instance("cam-aaaaaa", api_version=written))
            assert created["apiVersion"] == stored
            assert (await store.list("Instance", "default")).items == [created]
        finally:
            await store.close()
    await backing.close()


@pytest.mark.parametrize(
    ("fields", "sent", "own"),
    [
        (None, None, True),
        ("apiVersion=akri.sh/v0", None, True),
        ("apiVersion=devplace.io/v1alpha1", None, False),
        ("spec.configurationName=cams,apiVersion!=devplace.io/v1alpha1", "spec.configurationName=cams", True),
        ("spec.configurationName=cams,apiVersion==devplace.io/v1alpha1", "spec.configurationName=cams", False),
        ("spec.configurationName=cams", "spec.configurationName=cams", True),
    ],
)
def test_a_group_narrowing_field_selector_is_decided_here_and_never_sent_to_kubernetes(
    fields: str | None, sent: str | None, own: bool
) -> None:
    resource = resource_of("Instance", ("akri.sh",))  # where the kube store reads Instances by default
    assert group_apart(resource, fields) == (sent, own)


async def test_a_list_and_a_watch_narrowed_to_the_other_group_see_nothing_of_the_group_the_store_reads(
    clock: FakeClock,
) -> None:
    backing = MemoryStore(clock=clock)
    async with served(create_app(backing, fleet_api=False)) as url:
        store = kube_store(url, clock)
        try:
            created = await store.create(instance("cam-aaaaaa"))
            assert (await store.list("Instance", fields="apiVersion=akri.sh/v0")).items == [created]
            assert (await store.list("Instance", fields="apiVersion=devplace.io/v1alpha1")).items == []
            async with store.watch("Instance", since=0, fields="apiVersion=devplace.io/v1alpha1") as events:
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(anext(events), 0.2)
        finally:
            await store.close()
    await backing.close()


async def test_a_watch_from_zero_hands_out_the_current_objects_in_revision_order_then_every_change(
    clock: FakeClock,
) -> None:
    backing = MemoryStore(clock=clock)
    async with served(create_app(backing, fleet_api=False)) as url:
        store = kube_store(url, clock)
        try:
            a = await store.create(configmap("a"))
            b = await store.create(configmap("b"))
            gone = await store.create(configmap("gone"))
            await store.delete("ConfigMap", "gone", "default", resource_version=str(rv(gone)))
            a["data"]["x"] = "1"
            a = await store.update(a)  # a sorts first by name, last by revision
            async with store.watch("ConfigMap", since=0) as stream:
                assert stream.revision == 0
                c = await store.create(configmap("c"))
                events = await take(stream, 3)
            assert [(e.type, e.object, e.revision) for e in events] == [
                ("ADDED", b, 2),
                ("ADDED", a, 5),
                ("ADDED", c, 6),
            ]
        finally:
            await store.close()
    await backing.close()


async def test_a_watch_across_kinds_and_compaction_are_refused_as_invalid(clock: FakeClock) -> None:
    backing = MemoryStore(clock=clock)
    async with served(create_app(backing, fleet_api=False)) as url:
        store = kube_store(url, clock)
        try:
            await store.create(configmap("a"))
            with pytest.raises(errors.Invalid) as caught:
                async with store.watch(since=0):
                    pytest.fail("entered a watch of every kind")
            assert [f.path for f in caught.value.fields] == ["kind"]
            with pytest.raises(errors.Invalid, match="compacts its history itself"):
                await store.compact(1)
            async with backing.watch(since=0) as stream:  # nothing was compacted
                assert len(await take(stream, 1)) == 1
        finally:
            await store.close()
    await backing.close()


async def test_a_watch_from_a_compacted_revision_raises_gone_on_its_first_read(clock: FakeClock) -> None:
    backing = MemoryStore(clock=clock)
    async with served(create_app(backing, fleet_api=False)) as url:
        store = kube_store(url, clock)
        try:
            for i in range(4):
                await store.create(configmap(f"o{i}"))
            await backing.compact(3)
            async with store.watch("ConfigMap", since=1) as stream:
                with pytest.raises(errors.Gone):
                    await asyncio.wait_for(anext(stream), WATCH_BOUND)
        finally:
            await store.close()
    await backing.close()


async def test_a_stream_cut_by_a_server_restart_resumes_where_it_was_and_loses_nothing(clock: FakeClock) -> None:
    backing = MemoryStore(clock=clock)
    app = create_app(backing, fleet_api=False)
    async with served(app) as url:
        port = int(url.rsplit(":", 1)[1])
        store = kube_store(url, clock)
        watch = store.watch("ConfigMap", "default")
        stream = await watch.__aenter__()
        first = await store.create(configmap("first"))
        seen = await take(stream, 1)
    try:
        # the server is down: these writes happen while the watch has no stream
        during = [await backing.create(configmap(f"during-{i}")) for i in range(2)]
        async with served(app, port), clock_driven(clock):
            after = await store.create(configmap("after"))
            seen += await take(stream, 3)
        assert [e.object for e in seen] == [first, *during, after]
        assert [e.revision for e in seen] == [1, 2, 3, 4]
    finally:
        await watch.__aexit__(None, None, None)
        await store.close()
        await backing.close()


async def test_an_informer_relists_when_a_restarted_server_answers_its_watch_with_410(clock: FakeClock) -> None:
    old, new = MemoryStore(clock=clock), MemoryStore(clock=clock)
    for name in ("a", "b"):
        await old.create(configmap(name))
    await new.create(configmap("c"))  # a fresh store: its revision (1) is behind the informer's (2)
    async with served(create_app(old, fleet_api=False)) as url:
        port = int(url.rsplit(":", 1)[1])
        store = kube_store(url, clock)
        informer = Informer(store, "ConfigMap", namespace="default")
        running_informer = asyncio.create_task(informer.run())
        await asyncio.wait_for(informer.wait_synced(), WATCH_BOUND)
        assert sorted(informer.keys()) == [("default", "a"), ("default", "b")]
        # The restart must find the watch open on the server: one still being opened would wait out its opening's
        # timeout on a server that took the connection as it shut down, which is not what this test is about.
        await until(lambda: bool(old._watchers), "the informer's watch is open on the first server")
    try:
        async with served(create_app(new, fleet_api=False), port), clock_driven(clock):
            await until(lambda: sorted(informer.keys()) == [("default", "c")], "the informer relisted")
    finally:
        running_informer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running_informer
        await store.close()
        await old.close()
        await new.close()


@contextlib.asynccontextmanager
async def served_plain(app: Any) -> AsyncIterator[str]:
    """Any ASGI app under a real uvicorn on 127.0.0.1 (a free port) in this event loop; yields the base URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off"))
    server.config.timeout_graceful_shutdown = 0
    task = asyncio.create_task(server.serve())
    try:
        await until(lambda: server.started or task.done(), "uvicorn started")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def until(check: Callable[[], bool], what: str) -> None:
    async def poll() -> None:
        for _ in itertools.count():  # waiting for another task's I/O, bounded below
            if check():
                return
            await asyncio.sleep(0.01)

    try:
        await asyncio.wait_for(poll(), WATCH_BOUND)
    except TimeoutError:
        raise AssertionError(f"{what}: not within {WATCH_BOUND} s") from None


# -- what devplace server does not do: a scripted API server ----------------------------------------------------


def scripted_watches(streams: list[list[dict[str, Any]]], requests: list[dict[str, str]]) -> FastAPI:
    """An API server that answers each ConfigMap watch with the next scripted stream of events, then ends it."""
    app = FastAPI()

    @app.get("/api/v1/namespaces/{namespace}/configmaps")
    async def watch(request: Request) -> StreamingResponse:
        requests.append({**request.query_params, "accept": request.headers.get("accept", "")})
        lines = streams.pop(0) if streams else []

        async def body() -> AsyncIterator[bytes]:
            for line in lines:
                yield json.dumps(line).encode() + b"\n"

        return StreamingResponse(body(), media_type="application/json;stream=watch")

    return app


def added(name: str, revision: int) -> dict[str, Any]:
    obj = configmap(name)
    obj["metadata"]["resourceVersion"] = str(revision)
    return {"type": "ADDED", "object": obj}


def bookmark(revision: int) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"kind": "ConfigMap", "metadata": {"resourceVersion": str(revision)}}}


async def test_a_bookmark_moves_the_position_a_watch_resumes_from_and_is_not_delivered(clock: FakeClock) -> None:
    requests: list[dict[str, str]] = []
    streams = [[added("a", 5), bookmark(9)], [added("b", 10)]]
    async with served_plain(scripted_watches(streams, requests)) as url:
        store = kube_store(url, clock)
        try:
            async with store.watch("ConfigMap", "default", since=4, selector="app=web") as stream:
                events = await take(stream, 2)
        finally:
            await store.close()
    assert [(e.object["metadata"]["name"], e.revision) for e in events] == [("a", 5), ("b", 10)]
    assert [r["resourceVersion"] for r in requests[:2]] == ["4", "9"]  # resumed from the bookmark, not from 5
    first = requests[0]
    assert (first["watch"], first["allowWatchBookmarks"], first["labelSelector"]) == ("true", "true", "app=web")
    assert first["accept"] == "application/json"


def status_ignored_on_the_main_resource(app: Any, backing: MemoryStore, writes: list[str]) -> Callable[..., Any]:
    """ASGI middleware: Instance creates and updates keep the stored `status` whatever the body says, as Kubernetes
    does for a kind with a `/status` subresource; `writes` records each write's method and path."""

    async def middleware(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT") or "/instances" not in path:
            await app(scope, receive, send)
            return
        writes.append(f"{scope['method']} {path}")
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        if not path.endswith("/status"):
            obj = json.loads(raw)
            obj.pop("status", None)
            if scope["method"] == "PUT":
                stored = await backing.get("Instance", obj["metadata"]["name"], "default")
                if "status" in stored:
                    obj["status"] = stored["status"]
            raw = json.dumps(obj).encode()
        headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}

        await app({**scope, "headers": [*headers, (b"content-length", str(len(raw)).encode())]}, replay, send)

    return middleware


async def test_status_kubernetes_ignored_in_a_create_or_update_is_written_through_the_status_subresource(
    clock: FakeClock,
) -> None:
    backing = MemoryStore(clock=clock)
    writes: list[str] = []
    app = status_ignored_on_the_main_resource(create_app(backing, fleet_api=False), backing, writes)
    item = "/apis/akri.sh/v0/namespaces/default/instances/cam-aaaaaa"
    async with served_plain(app) as url:
        store = kube_store(url, clock)
        try:
            created = await store.create(instance("cam-aaaaaa", status={"seen": "1"}))
            assert created["status"] == {"seen": "1"}
            created["status"] = {"seen": "2"}
            created["spec"]["nodes"] = ["node-a", "node-b"]
            updated = await store.update(created)
            assert (updated["status"], updated["spec"]["nodes"]) == ({"seen": "2"}, ["node-a", "node-b"])
            assert await store.get("Instance", "cam-aaaaaa", "default") == updated
            assert writes == [
                "POST /apis/akri.sh/v0/namespaces/default/instances",
                f"PUT {item}/status",
                f"PUT {item}",
                f"PUT {item}/status",
            ]
        finally:
            await store.close()
    await backing.close()


async def test_devplace_server_writes_status_with_the_object_so_no_status_write_follows(clock: FakeClock) -> None:
    backing = MemoryStore(clock=clock)
    async with served(create_app(backing, fleet_api=False)) as url:
        store = kube_store(url, clock)
        try:
            created = await store.create(instance("cam-aaaaaa", status={"seen": "1"}))
            assert (created["status"], rv(created)) == ({"seen": "1"}, 1)
            created["status"] = {"seen": "2"}
            assert rv(await store.update(created)) == 2
        finally:
            await store.close()
    await backing.close()


# -- the contract's model, less what Kubernetes has not -----------------------------------------------------------


class KubeMatchesModel(StoreMatchesModel):
    """The contract's stateful model (test_contract.py) on the kube backend, without its compaction rules and with
    history replayed per kind (Kubernetes watches one resource at a time) from a revision the store has passed."""

    compact = None  # type: ignore[assignment]
    compact_beyond_the_head = None  # type: ignore[assignment]
    replay_history = None  # type: ignore[assignment]
    watch_before_compaction_is_gone = None  # type: ignore[assignment]

    @precondition(lambda self: self.revision > 0)
    @rule(kind=st.sampled_from(["ConfigMap", "Node"]), back=st.integers(1, 8))
    def replay_one_kind(self, kind: str, back: int) -> None:
        since = max(1, self.revision - back)
        expected = [e for e in self.log if e.revision > since and e.object["kind"] == kind]

        async def replay() -> list[Event]:
            async with self.store.watch(kind, since=since) as stream:
                return await take(stream, len(expected))

        events = self.run(replay())
        assert [(e.type, e.object, e.revision) for e in events] == [(e.type, e.object, e.revision) for e in expected]


def test_the_kube_store_behaves_like_the_contracts_model(tmp_path: Path) -> None:
    examples = itertools.count()
    run_state_machine_as_test(
        lambda: KubeMatchesModel(kube_backend, tmp_path / f"example-{next(examples)}"),
        settings=settings(max_examples=15, stateful_step_count=40, deadline=None),
    )
