"""The remote backend's own promises (the shared contract runs it too, via tests/store/conftest.py):
errors come back as the devplace errors the server's store raised (the Status mapping itself is
tests/store/test_restclients.py's), paths follow the registry, a watch survives the server going away and coming
back, losing and repeating nothing (or raising Gone if history was compacted), and only the credentials a devplace
server can check are taken from a kubeconfig.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from devplace import errors
from devplace.clocks import FakeClock
from devplace.server._app import create_app, running
from devplace.store import Informer, MemoryStore, open_store
from devplace.store._remote import RemoteStore
from devplace.supervisors import Supervisor
from tests.servers import free_port, serve_app
from tests.store.samples import WATCH_BOUND, configmap, node, take


@pytest.mark.parametrize(
    ("kind", "namespace", "path", "params"),
    [
        ("ConfigMap", "default", "/api/v1/namespaces/default/configmaps", {"watch": "1"}),
        ("ConfigMap", None, "/api/v1/configmaps", {"watch": "1"}),
        ("Configuration", "team", "/apis/devplace.io/v1alpha1/namespaces/team/configurations", {"watch": "1"}),
        ("Node", "", "/api/v1/nodes", {"watch": "1"}),
        ("Node", None, "/api/v1/nodes", {"watch": "1"}),
        ("Node", "default", "/store/watch", {"kind": "Node", "namespace": "default"}),
        ("ConfigMap", "", "/store/watch", {"kind": "ConfigMap", "namespace": ""}),
        (None, None, "/store/watch", {}),
        (None, "team", "/store/watch", {"namespace": "team"}),
    ],
)
def test_watch_uses_the_kubernetes_path_when_there_is_one(
    kind: str | None, namespace: str | None, path: str, params: dict[str, str]
) -> None:
    assert RemoteStore("http://127.0.0.1:1")._watch_path(kind, namespace) == (path, params)


async def test_an_unknown_kind_is_invalid_before_any_request() -> None:
    store = RemoteStore("http://127.0.0.1:1")  # nothing listens there: a request would be Unavailable
    with pytest.raises(errors.Invalid) as caught:
        await store.get("Gadget", "a", "default")
    assert caught.value.fields[0].path == "kind"
    await store.close()


async def test_a_server_that_does_not_answer_is_unavailable() -> None:
    store = RemoteStore(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(errors.Unavailable):
        await store.get("ConfigMap", "a", "default")
    await store.close()


async def test_an_akri_object_goes_to_the_akri_path_and_keeps_its_api_version(memory_store: MemoryStore) -> None:
    async with serve_app(create_app(memory_store, fleet_api=False)) as url:
        store = RemoteStore(url)
        obj = {
            "apiVersion": "akri.sh/v0",
            "kind": "Configuration",
            "metadata": {"name": "cam", "namespace": "default"},
            "spec": {"discoveryHandler": {"name": "debugEcho"}},
        }
        created = await store.create(obj)
        assert created["apiVersion"] == "akri.sh/v0"
        assert created["spec"] == obj["spec"]  # stored as written: no defaults added
        assert await memory_store.get("Configuration", "cam", "default") == created
        await store.close()


async def test_a_watch_resumes_across_a_server_restart_losing_and_repeating_nothing() -> None:
    backing = MemoryStore()
    app = create_app(backing, fleet_api=False)
    port = free_port()
    store = RemoteStore(f"http://127.0.0.1:{port}")
    try:
        async with AsyncExitStack() as watching:
            async with running(app, port=port, shutdown_timeout=0):
                await store.create(node("a"))
                stream = await watching.enter_async_context(store.watch("Node", since=0))
                (first,) = await take(stream, 1)
            await backing.create(node("b"))  # written while the server is down
            async with running(app, port=port, shutdown_timeout=0):
                c = await store.create(node("c"))
                rest = await take(stream, 2)
    finally:
        await store.close()
    assert [(e.type, e.object["metadata"]["name"], e.revision) for e in [first, *rest]] == [
        ("ADDED", "a", 1),
        ("ADDED", "b", 2),
        ("ADDED", "c", 3),
    ]
    assert rest[1].object == c


async def test_a_watch_resuming_after_compaction_raises_gone() -> None:
    backing = MemoryStore()
    app = create_app(backing, fleet_api=False)
    port = free_port()
    store = RemoteStore(f"http://127.0.0.1:{port}")
    try:
        async with AsyncExitStack() as watching:
            async with running(app, port=port, shutdown_timeout=0):
                await store.create(configmap("a"))
                stream = await watching.enter_async_context(store.watch("ConfigMap", since=0))
                await take(stream, 1)
            await backing.create(configmap("b"))
            await backing.create(configmap("c"))
            await backing.compact(2)  # the watch's next revision (2) is gone
            async with running(app, port=port, shutdown_timeout=0):
                with pytest.raises(errors.Gone):
                    await take(stream, 1)
    finally:
        await store.close()


async def test_a_watch_resuming_on_a_server_restarted_with_a_fresh_memory_store_raises_gone() -> None:
    port = free_port()
    store = RemoteStore(f"http://127.0.0.1:{port}")
    try:
        async with AsyncExitStack() as watching:
            async with running(create_app(MemoryStore(), fleet_api=False), port=port, shutdown_timeout=0):
                for name in ("a", "b", "c"):
                    await store.create(configmap(name))
                stream = await watching.enter_async_context(store.watch("ConfigMap", since=0))
                assert [e.revision for e in await take(stream, 3)] == [1, 2, 3]
            fresh = MemoryStore()  # the server comes back with nothing: its revision 1 is not the old one
            await fresh.create(configmap("x"))
            async with running(create_app(fresh, fleet_api=False), port=port, shutdown_timeout=0):
                with pytest.raises(errors.Gone, match="too large resource version: 3, current: 1"):
                    await take(stream, 1)  # not a silent stream that drops revisions up to 3
    finally:
        await store.close()


async def test_an_informer_relists_and_converges_when_its_server_restarts_on_a_fresh_memory_store() -> None:
    port = free_port()
    store = RemoteStore(f"http://127.0.0.1:{port}")
    informer: Informer[dict[str, Any]] = Informer(store, "ConfigMap", retry_pause=(0.01, 0.05))
    supervisor = Supervisor("test")

    def names() -> set[str]:
        return {name for (_, name), _ in informer.items()}

    try:
        async with running(create_app(MemoryStore(), fleet_api=False), port=port, shutdown_timeout=0):
            for name in ("a", "b", "c", "d"):
                await store.create(configmap(name))
            supervisor.loop("informer", informer.run)
            await _eventually(lambda: names() == {"a", "b", "c", "d"})
        fresh = MemoryStore()
        await fresh.create(configmap("x"))
        async with running(create_app(fresh, fleet_api=False), port=port, shutdown_timeout=0):
            await _eventually(lambda: names() == {"x"})  # relisted: nothing of the old store survives
            await store.create(configmap("y"))  # revision 2, below what the informer saw before: still delivered
            await _eventually(lambda: names() == {"x", "y"})
            assert informer.revision == 2
    finally:
        await supervisor.stop()
        await store.close()


async def _eventually(condition: Callable[[], bool]) -> None:
    """Wait (bounded by WATCH_BOUND plus the remote watch's reconnect backoff) for a condition that must come."""
    for _ in range(round((WATCH_BOUND + 2) / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition was not reached")


async def test_a_watch_whose_server_never_returns_gives_up_with_unavailable(clock: FakeClock) -> None:
    port = free_port()
    backing = MemoryStore()
    store = RemoteStore(f"http://127.0.0.1:{port}", clock=clock)
    async with AsyncExitStack() as watching:
        async with running(create_app(backing, fleet_api=False), port=port, shutdown_timeout=0):
            await store.create(node("a"))
            stream = await watching.enter_async_context(store.watch("Node", since=0))
            await take(stream, 1)
        pending = asyncio.ensure_future(anext(stream))
        for _ in range(200):  # drive the reconnect backoff on the fake clock (bounded)
            if pending.done():
                break
            await clock.advance(1)
            await asyncio.sleep(0.01)
        with pytest.raises(errors.Unavailable):
            await asyncio.wait_for(pending, WATCH_BOUND)
    await store.close()


async def test_entering_a_watch_opens_its_stream_and_closing_the_store_ends_it_with_unavailable(
    memory_store: MemoryStore,
) -> None:
    await memory_store.create(node("before"))
    async with serve_app(create_app(memory_store, fleet_api=False)) as url:
        store = RemoteStore(url)
        async with store.watch("Node") as stream:
            assert len(memory_store._watchers) == 1  # the server's store watch is registered: the stream is open
            assert stream.revision == 1  # from "now", asked of the server before the stream opened
            pending = asyncio.ensure_future(anext(stream))
            await asyncio.sleep(0)  # the reader is waiting on the open stream
            await store.close()
            with pytest.raises(errors.Unavailable):
                await asyncio.wait_for(pending, WATCH_BOUND)
        for _ in range(200):  # the server notices the disconnect asynchronously; bounded poll
            if not memory_store._watchers:
                break
            await asyncio.sleep(0.01)
        assert len(memory_store._watchers) == 0


async def test_a_refused_watch_raises_at_entry_and_leaves_nothing_open(memory_store: MemoryStore) -> None:
    for i in range(3):
        await memory_store.create(node(f"n{i}"))
    await memory_store.compact(2)
    async with serve_app(create_app(memory_store, fleet_api=False)) as url:
        store = RemoteStore(url)
        try:
            with pytest.raises(errors.Gone):
                async with store.watch("Node", since=1):
                    pytest.fail("entered a watch whose history was compacted")
            with pytest.raises(errors.Invalid) as caught:
                async with store.watch("Node", fields="spec.nodeName=x"):
                    pytest.fail("entered a watch with an unsupported field selector")
            assert [f.path for f in caught.value.fields] == ["fieldSelector"]
            assert store._watches == set()
        finally:
            await store.close()


async def test_selectors_travel_as_kubernetes_query_parameters(clock: FakeClock) -> None:
    seen: list[dict[str, str]] = []
    app = FastAPI()

    @app.get("/api/v1/namespaces/default/pods")
    async def pods(request: Request) -> Response:
        seen.append(dict(request.query_params))
        if request.query_params.get("watch"):
            return Response(b"", media_type="application/x-ndjson")
        return JSONResponse({"kind": "PodList", "metadata": {"resourceVersion": "4"}, "items": []})

    async with serve_app(app) as url:
        store = RemoteStore(url, clock=clock)
        try:
            await store.list("Pod", "default", "app=web", fields="spec.nodeName=node-a")
            async with store.watch("Pod", "default", since=4, selector="app=web", fields="spec.nodeName=node-a"):
                pass
        finally:
            await store.close()
    selected = {"labelSelector": "app=web", "fieldSelector": "spec.nodeName=node-a"}
    assert seen == [selected, {**selected, "watch": "1", "resourceVersion": "4"}]


async def test_a_watch_whose_streams_keep_ending_at_once_backs_off_instead_of_spinning(clock: FakeClock) -> None:
    # A server (or proxy) that answers every watch with an empty stream: the first end reconnects at once, then
    # the watch waits 0.05 s, 0.1 s, ... on the clock between attempts instead of hammering the server.
    requests: list[str] = []
    app = FastAPI()

    @app.get("/api/v1/nodes")
    async def nodes(resourceVersion: str | None = None) -> Response:
        requests.append(resourceVersion or "")
        return Response(b"", media_type="application/x-ndjson")

    async def settled(count: int) -> None:
        for _ in range(500):  # bounded wait for the I/O to happen, then exact assertions
            if len(requests) >= count and clock.pending_sleepers == 1:
                break
            await asyncio.sleep(0.01)
        assert (len(requests), clock.pending_sleepers) == (count, 1)

    async with serve_app(app) as url, AsyncExitStack() as watching:
        store = RemoteStore(url, clock=clock)
        stream = await watching.enter_async_context(store.watch("Node", since=7))
        pending = asyncio.ensure_future(anext(stream))
        try:
            await settled(2)
            await clock.advance(0.05)
            await settled(3)
            await clock.advance(0.05)  # half of the next pause (0.1 s): no new request
            await settled(3)
            await clock.advance(0.05)
            await settled(4)
            assert requests == ["7"] * 4  # each attempt resumes from the same revision
            assert not pending.done()  # never gives up on a server that answers
        finally:
            pending.cancel()
            await store.close()


# -- credentials from a kubeconfig (the reader itself: tests/store/test_kubeconfigs.py) ----------------------------


def kubeconfig_for(path: Path, server: str, user: dict[str, Any]) -> Path:
    """A kubeconfig whose one (current) context is `server` with `user`."""
    doc = {
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }
    path.write_text(yaml.safe_dump(doc))
    return path


def test_open_store_hands_the_credentials_to_the_remote_backend(tmp_path: Path) -> None:
    path = kubeconfig_for(tmp_path / "config", "http://h:1", {"token": "t"})
    store = open_store("http://h:1", kubeconfig=str(path))
    assert isinstance(store, RemoteStore)
    assert store.credentials.token == "t"
    with_token = open_store("http://h:1", token="u")
    assert isinstance(with_token, RemoteStore)
    assert with_token.credentials.token == "u"


@pytest.mark.parametrize(
    ("user", "field"),
    [
        ({"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws"}}, "kubeconfig.user.exec"),
        ({"auth-provider": {"name": "gcp"}}, "kubeconfig.user.auth-provider"),
        ({"username": "u", "password": "p"}, "kubeconfig.user.username"),
        ({"password": "p"}, "kubeconfig.user.password"),
    ],
)
def test_credentials_a_devplace_server_cannot_check_are_refused_naming_the_field(
    tmp_path: Path, user: dict[str, Any], field: str
) -> None:
    path = kubeconfig_for(tmp_path / "config", "http://h:1", user)
    with pytest.raises(errors.Invalid) as caught:
        open_store("http://h:1", kubeconfig=str(path))
    assert [f.path for f in caught.value.fields] == [field]
