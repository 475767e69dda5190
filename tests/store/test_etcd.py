"""The etcd backend's own promises (the shared contract runs it too, via tests/store/conftest.py).

Every test talks to a real etcd on loopback: the session's shared one under a fresh key prefix, or, for tests that
change or stop the server (TLS, authentication, a restart, counting its watch streams), one of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import os
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from devplace import errors, store
from devplace.clocks import FakeClock
from devplace.store import _etcd as etcd
from devplace.store._etcd import EtcdOptions, EtcdStore, parse_url
from devplace.store.etcdserverpb import rpc_pb2 as pb
from devplace.store.etcdserverpb import rpc_pb2_grpc as pb_grpc
from tests import etcds
from tests.servers import free_port
from tests.store.samples import configmap, node, pod, rv, take

# -- URLs ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("etcd://10.0.0.1:2379", EtcdOptions(endpoints=(("10.0.0.1", 2379),))),
        ("etcd://etcd-a", EtcdOptions(endpoints=(("etcd-a", 2379),))),
        (
            "etcd://10.0.0.1:2379,10.0.0.2:22379,[::1]:2379/devplace",
            EtcdOptions(endpoints=(("10.0.0.1", 2379), ("10.0.0.2", 22379), ("::1", 2379)), prefix="/devplace"),
        ),
        (
            "etcd://h:1?cacert=/ca.pem&cert=/c.pem&key=/k.pem",
            EtcdOptions(endpoints=(("h", 1),), tls=True, cacert="/ca.pem", cert="/c.pem", key="/k.pem"),
        ),
        ("etcds://h:1", EtcdOptions(endpoints=(("h", 1),), tls=True)),
        ("etcd://h:1?server_name=etcd.local", EtcdOptions(endpoints=(("h", 1),), tls=True, server_name="etcd.local")),
        ("etcd://u:p%40ss@h:1", EtcdOptions(endpoints=(("h", 1),), user="u", password="p@ss")),
        ("etcd://h:1?user=u&password=p", EtcdOptions(endpoints=(("h", 1),), user="u", password="p")),
        ("etcd://h:1/a/b/?timeout=2.5", EtcdOptions(endpoints=(("h", 1),), prefix="/a/b", timeout=2.5)),
    ],
)
def test_etcd_urls_name_endpoints_prefix_tls_and_credentials(url: str, expected: EtcdOptions) -> None:
    assert parse_url(url) == expected


def test_the_password_may_come_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    options = parse_url(f"etcd://h:1?user=devplace&password_file={secret}")
    assert (options.user, options.password) == ("devplace", "s3cret")


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("etcd://", "an endpoint is empty"),
        ("etcd://h:1,,h:2", "an endpoint is empty"),
        ("etcd://h:", "the port is empty"),
        ("etcd://h:0", "is not a number from 1 to 65535"),
        ("etcd://h:x", "is not a number from 1 to 65535"),
        ("etcd://::1:2379", "IPv6 addresses in brackets"),
        ("etcd://[zz]:1", "is not an IPv6 address"),
        ("redis://h:1", "expected etcd://"),
        ("etcd://h:1?colour=blue", "unknown option 'colour'"),
        ("etcd://h:1?user=a&user=b", "option 'user' is given more than once"),
        ("etcd://h:1?user=a", "user and password go together"),
        ("etcd://h:1?password=hunter2", "user and password go together"),
        ("etcd://u:hunter2@h:1?password=hunter2", "the password is given twice"),
        ("etcd://h:1?cert=/c.pem", "cert and key go together"),
        ("etcd://h:1?cacert=", "option 'cacert' is empty"),
        ("etcd://h:1?timeout=-1", "timeout must be a positive number"),
        ("etcd://h:1?timeout=soon", "is not a number of seconds"),
        ("etcd://h:1?user=u&password_file=/nonexistent/password", "password_file /nonexistent/password"),
    ],
)
def test_a_bad_etcd_url_is_invalid_naming_the_store_and_the_reason_but_never_the_password(
    url: str, reason: str
) -> None:
    with pytest.raises(errors.Invalid) as caught:
        parse_url(url)
    assert [f.path for f in caught.value.fields] == ["store"]
    assert reason in caught.value.message
    assert "hunter2" not in caught.value.message


def test_open_store_opens_etcd_urls_and_the_store_package_exports_the_class() -> None:
    opened = store.open_store("etcd://127.0.0.1:2379,127.0.0.1:22379/devplace?timeout=3")
    assert isinstance(opened, store.EtcdStore)
    assert opened.options.endpoints == (("127.0.0.1", 2379), ("127.0.0.1", 22379))
    assert opened.options.prefix == "/devplace"


def test_a_missing_certificate_file_is_invalid_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(errors.Invalid, match=r"cacert .*ca\.pem"):
        EtcdStore(f"etcd://h:1?cacert={tmp_path / 'ca.pem'}")


# -- stores on the shared etcd ---------------------------------------------------------------------------------

_prefixes = itertools.count(1)


@pytest.fixture
def server() -> etcds.EtcdServer:
    return etcds.shared_etcd()


@pytest.fixture
def prefix() -> str:
    return f"/test-etcd-{os.getpid()}-{next(_prefixes)}"


@pytest.fixture
async def raw(server: etcds.EtcdServer) -> AsyncIterator[pb_grpc.KVAsyncStub]:
    """etcd's KV API with no store in between, to see what the store wrote."""
    async with grpc.aio.insecure_channel(server.endpoint) as channel:
        yield pb_grpc.KVStub(channel)


@pytest.fixture
async def etcd_store(server: etcds.EtcdServer, prefix: str, clock: FakeClock) -> AsyncIterator[EtcdStore]:
    """A store under a fresh prefix, showing etcd's revisions as they are (revision_base 0)."""
    opened = EtcdStore(f"{server.url}{prefix}", clock=clock)
    yield opened
    await opened.close()
    await etcds.wipe(server.endpoint, prefix.encode() + b"/")


async def test_objects_live_at_kubernetes_keys_without_resource_version_which_is_the_mod_revision(
    etcd_store: EtcdStore, raw: pb_grpc.KVAsyncStub, prefix: str
) -> None:
    instance = {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Instance",
        "metadata": {"name": "cam-1a2b3c", "namespace": "default"},
        "spec": {},
    }
    written = [
        await etcd_store.create(instance),
        await etcd_store.create(pod("web", "edge")),
        await etcd_store.create(node("n1")),
        await etcd_store.create({"kind": "Gadget", "metadata": {"name": "g"}}),
    ]
    keys = [
        f"{prefix}/devplace.io/instances/default/cam-1a2b3c",
        f"{prefix}/pods/edge/web",
        f"{prefix}/nodes/n1",
        f"{prefix}/-/Gadget/g",
    ]
    for obj, key in zip(written, keys, strict=True):
        (kv,) = (await raw.Range(pb.RangeRequest(key=key.encode()))).kvs
        assert str(kv.mod_revision) == obj["metadata"]["resourceVersion"]
        stored = etcd._loads(kv.value)
        assert stored is not None
        assert "resourceVersion" not in stored["metadata"]
        stored["metadata"]["resourceVersion"] = obj["metadata"]["resourceVersion"]
        assert stored == obj


async def test_a_slash_in_a_name_or_namespace_is_refused_and_addresses_nothing(etcd_store: EtcdStore) -> None:
    await etcd_store.create(configmap("b", "a"))  # key .../configmaps/a/b
    with pytest.raises(errors.Invalid) as caught:
        await etcd_store.create(configmap("a/b", ""))
    assert [f.path for f in caught.value.fields] == ["metadata.name"]
    with pytest.raises(errors.Invalid) as caught:
        await etcd_store.create(configmap("x", "a/b"))
    assert [f.path for f in caught.value.fields] == ["metadata.namespace"]
    with pytest.raises(errors.NotFound):
        await etcd_store.get("ConfigMap", "a/b", "")
    with pytest.raises(errors.NotFound):
        await etcd_store.delete("ConfigMap", "a/b", "")


async def test_the_largest_revisions_are_refused_as_stale_when_etcd_revisions_are_shifted(clock: FakeClock) -> None:
    async with etcds.etcd_backend(Path(), clock) as shifted:  # revision_base > 0: 2**63-1 is past etcd's range
        created = await shifted.create(configmap("a"))
        largest = str(2**63 - 1)
        with pytest.raises(errors.Conflict):
            await shifted.delete("ConfigMap", "a", "default", resource_version=largest)
        with pytest.raises(errors.Conflict):
            await shifted.update({**created, "metadata": {**created["metadata"], "resourceVersion": largest}})
        with pytest.raises(errors.Gone, match="too large resource version"):
            async with shifted.watch(since=2**63 - 1):
                pytest.fail("entered a watch from beyond etcd's revisions")
        with pytest.raises(errors.Invalid):
            await shifted.compact(2**63 - 1)
        assert await shifted.get("ConfigMap", "a", "default") == created


class _Counting:
    """Wraps a store's connection: counts its calls and runs `between_pages` before a list's second page."""

    def __init__(self, store: EtcdStore) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.between_pages: Any = None
        self._call = store._conn.call
        store._conn.call = self.call  # type: ignore[method-assign]

    async def call(self, method: str, request: Any) -> Any:
        pages = sum(1 for name, r in self.calls if name == "Range" and r.limit)
        if method == "Range" and request.limit and pages == 1 and self.between_pages is not None:
            await self.between_pages()
        self.calls.append((method, request))
        return await self._call(method, request)


async def test_a_large_list_is_read_in_pages_at_one_revision(server: etcds.EtcdServer, prefix: str) -> None:
    paged = EtcdStore(f"{server.url}{prefix}", page_size=10)
    other = EtcdStore(f"{server.url}{prefix}")
    try:
        namespaces = ["a", "a-b", "b"]  # etcd's key order puts "a-b/" before "a/"
        for i in range(95):
            await paged.create(configmap(f"cm-{i:03}", namespaces[i % 3]))
        counting = _Counting(paged)
        late: list[dict[str, Any]] = []

        async def write_between_pages() -> None:
            late.append(await other.create(configmap("late", "a")))

        counting.between_pages = write_between_pages
        listed = await paged.list("ConfigMap")
        pages = [request for method, request in counting.calls if method == "Range"]
        assert len(pages) == 10
        assert all(request.limit == 10 for request in pages)
        assert {request.revision for request in pages[1:]} == {listed.revision}  # every page at the first's
        assert [o["metadata"]["name"] for o in listed.items].count("late") == 0
        assert rv(late[0]) == listed.revision + 1
        order = [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in listed.items]
        assert order == sorted(order)
        assert len(order) == 95
    finally:
        await paged.close()
        await other.close()
        await etcds.wipe(server.endpoint, prefix.encode() + b"/")


async def test_a_list_page_reads_the_keys_then_only_the_values_it_takes_all_at_one_revision(
    etcd_store: EtcdStore,
) -> None:
    for i in range(40):
        await etcd_store.create(configmap(f"cm-{i:02}", ("a", "a-b")[i % 2], blob="x" * 1000))
    whole = await etcd_store.list_page("ConfigMap", limit=100, max_bytes=1 << 20)
    bound = sum(len(item.body) for item in whole.items[:12])
    counting = _Counting(etcd_store)
    page = await etcd_store.list_page("ConfigMap", limit=100, max_bytes=bound)
    assert page.items == whole.items[:12]
    assert [(item.namespace, item.name) for item in page.items] == [("a", f"cm-{i:02}") for i in range(0, 24, 2)]
    assert page.remaining == 40 - 12
    ranges = [request for method, request in counting.calls if method == "Range"]
    keys, values = [r for r in ranges if r.keys_only], [r for r in ranges if not r.keys_only]
    assert keys
    assert len(keys) == 1  # 40 keys: one request (its page size is 500 keys)
    assert {r.revision for r in values} == {page.revision}  # the keys' revision (this store's base is 0)
    assert values[0].limit == etcd._FIRST_VALUES  # before it knows how large they are
    assert sum(r.limit for r in values) <= len(page.items) + 1  # then as many as the bound leaves room for


async def test_a_list_page_passes_over_the_keys_of_other_namespaces_between_cluster_scoped_ones(
    etcd_store: EtcdStore,
) -> None:
    """A namespace's keys sit beside the cluster-scoped ones: ".../configmaps/a0/x" is between ".../a" and ".../b"."""
    for name, namespace in [("a", ""), ("x", "a0"), ("b", ""), ("c", ""), ("y", "a0")]:
        await etcd_store.create(configmap(name, namespace))
    for limit in (1, 2, 100):
        found, after = [], None
        while True:
            page = await etcd_store.list_page("ConfigMap", after=after, limit=limit, max_bytes=1 << 20)
            found += [(item.namespace, item.name) for item in page.items]
            if not page.remaining:
                break
            after = page.last
        assert found == [("", "a"), ("", "b"), ("", "c"), ("a0", "x"), ("a0", "y")]
    cluster = await etcd_store.list_page("ConfigMap", "", limit=100, max_bytes=1 << 20)
    assert [item.name for item in cluster.items] == ["a", "b", "c"]


async def test_a_second_store_on_the_same_etcd_sees_the_first_ones_writes_through_watch(
    etcd_store: EtcdStore, server: etcds.EtcdServer, prefix: str
) -> None:
    second = EtcdStore(f"{server.url}{prefix}")
    try:
        start = await second.revision()
        async with second.watch("ConfigMap", since=start) as stream:
            created = await etcd_store.create(configmap("a", x="1"))
            change = copy.deepcopy(created)
            change["data"]["x"] = "2"
            updated = await etcd_store.update(change)
            events = await take(stream, 2)
        assert [(e.type, e.object) for e in events] == [("ADDED", created), ("MODIFIED", updated)]
        stale = await second.get("ConfigMap", "a", "default")
        updated["data"]["x"] = "3"
        await etcd_store.update(updated)
        stale["data"]["x"] = "second"
        with pytest.raises(errors.Conflict):
            await second.update(stale)  # the second store remembers the value it read: CAS still holds
    finally:
        await second.close()


async def test_a_watch_of_one_kind_asks_etcd_only_for_that_kinds_keys(etcd_store: EtcdStore, prefix: str) -> None:
    async with etcd_store.watch("Pod", "edge") as pods, etcd_store.watch("Node") as nodes:
        assert (pods.create_request().key, pods.create_request().range_end) == (
            f"{prefix}/pods/edge/".encode(),
            f"{prefix}/pods/edge0".encode(),
        )
        assert nodes.create_request().key == f"{prefix}/nodes/".encode()


async def test_a_watcher_that_falls_behind_restarts_from_where_it_stopped_and_loses_nothing(
    etcd_store: EtcdStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(etcd, "_PENDING_LIMIT", 8)
    start = await etcd_store.revision()
    async with etcd_store.watch("ConfigMap", since=start) as stream:
        overflowed = _overflow_signal(stream)
        written = [await etcd_store.create(configmap(f"o{i:02}")) for i in range(30)]
        await asyncio.wait_for(overflowed.wait(), 5)  # its queue overflowed: its etcd watch was cancelled
        events = await take(stream, 30)
    assert [e.object for e in events] == written


async def test_a_watcher_that_falls_behind_past_a_compaction_gets_gone(
    etcd_store: EtcdStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(etcd, "_PENDING_LIMIT", 4)
    start = await etcd_store.revision()
    async with etcd_store.watch("ConfigMap", since=start) as stream:
        first = await etcd_store.create(configmap("first"))
        assert [e.object for e in await take(stream, 1)] == [first]
        overflowed = _overflow_signal(stream)
        for i in range(10):
            await etcd_store.create(configmap(f"o{i}"))
        await asyncio.wait_for(overflowed.wait(), 5)  # its queue overflowed: its etcd watch was cancelled
        await etcd_store.compact(await etcd_store.revision())
        with pytest.raises(errors.Gone):
            await take(stream, 10)


def _overflow_signal(stream: Any) -> asyncio.Event:
    """An event set when the watch's queue overflows (its `offer` refuses a batch)."""
    overflowed = asyncio.Event()
    offer = stream.offer

    def offer_and_tell(events: Any) -> bool:
        accepted: bool = offer(events)
        if not accepted:
            overflowed.set()
        return accepted

    stream.offer = offer_and_tell
    return overflowed


async def test_a_url_with_a_dead_endpoint_among_live_ones_still_works(
    server: etcds.EtcdServer, prefix: str, clock: FakeClock
) -> None:
    dead = f"127.0.0.1:{free_port()}"
    both = EtcdStore(f"etcd://{dead},{server.endpoint}{prefix}?timeout=5", clock=clock)
    try:
        start = await both.revision()
        async with both.watch("ConfigMap", since=start) as stream:
            created = await both.create(configmap("a"))
            assert [e.object for e in await take(stream, 1)] == [created]
        assert await both.get("ConfigMap", "a", "default") == created
    finally:
        await both.close()
        await etcds.wipe(server.endpoint, prefix.encode() + b"/")


async def test_a_store_whose_etcd_does_not_answer_raises_unavailable(clock: FakeClock) -> None:
    nobody = EtcdStore(f"etcd://127.0.0.1:{free_port()}?timeout=1", clock=clock)
    try:
        with pytest.raises(errors.Unavailable):
            await nobody.create(configmap("a"))
        with pytest.raises(errors.Unavailable):
            async with nobody.watch("ConfigMap"):
                pytest.fail("entered a watch with no etcd")
    finally:
        await nobody.close()


# -- stores on an etcd of their own ----------------------------------------------------------------------------


def _metric(server: etcds.EtcdServer, name: str) -> float:
    with urllib.request.urlopen(f"http://{server.endpoint}/metrics", timeout=5) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"etcd exports no metric {name}")


async def test_many_watches_of_one_store_share_one_etcd_watch_stream(tmp_path: Path) -> None:
    with etcds.running_etcd(tmp_path / "etcd") as server:
        opened = EtcdStore(server.url)
        try:
            kinds = ["Pod", "Node", "ConfigMap", "Instance", "Configuration"]
            async with contextlib.AsyncExitStack() as stack:
                for i in range(20):
                    await stack.enter_async_context(opened.watch(kinds[i % len(kinds)]))
                assert _metric(server, "etcd_debugging_mvcc_watcher_total") == 20
                assert _metric(server, "etcd_debugging_mvcc_watch_stream_total") == 1
        finally:
            await opened.close()


async def test_tls_with_client_certificates(tmp_path: Path) -> None:
    tls = etcds.make_tls(tmp_path)
    with etcds.running_etcd(tmp_path / "etcd", tls=tls) as server:
        secured = EtcdStore(server.url)
        try:
            start = await secured.revision()
            async with secured.watch("ConfigMap", since=start) as stream:
                created = await secured.create(configmap("a"))
                assert [e.object for e in await take(stream, 1)] == [created]
        finally:
            await secured.close()
        no_client_cert = EtcdStore(f"etcd://{server.endpoint}?cacert={tls.ca}&timeout=3")
        try:
            with pytest.raises(errors.Unavailable):
                await no_client_cert.get("ConfigMap", "a", "default")
        finally:
            await no_client_cert.close()
        plain = EtcdStore(f"etcd://{server.endpoint}?timeout=3")
        try:
            with pytest.raises(errors.Unavailable):
                await plain.get("ConfigMap", "a", "default")
        finally:
            await plain.close()


async def _enable_auth(server: etcds.EtcdServer, password: str) -> None:
    async with grpc.aio.insecure_channel(server.endpoint) as channel:
        auth = pb_grpc.AuthStub(channel)
        await auth.UserAdd(pb.AuthUserAddRequest(name="root", password=password), timeout=10)
        await auth.UserGrantRole(pb.AuthUserGrantRoleRequest(user="root", role="root"), timeout=10)
        await auth.AuthEnable(pb.AuthEnableRequest(), timeout=10)


async def test_user_and_password_authentication(tmp_path: Path) -> None:
    with etcds.running_etcd(tmp_path / "etcd") as server:
        await _enable_auth(server, "s3cret")
        (tmp_path / "password").write_text("s3cret\n")
        member = EtcdStore(f"{server.url}?user=root&password_file={tmp_path / 'password'}")
        try:
            start = await member.revision()
            async with member.watch("ConfigMap", since=start) as stream:
                created = await member.create(configmap("a"))
                assert [e.object for e in await take(stream, 1)] == [created]
        finally:
            await member.close()
        for url in [f"etcd://root:wrong@{server.endpoint}?timeout=3", f"{server.url}?timeout=3"]:
            refused = EtcdStore(url)
            try:
                with pytest.raises(errors.Unavailable):
                    await refused.get("ConfigMap", "a", "default")
            finally:
                await refused.close()


async def test_an_open_watch_resumes_when_etcd_restarts_and_misses_nothing(tmp_path: Path) -> None:
    ports = {"client_port": free_port(), "peer_port": free_port()}
    data = tmp_path / "etcd"
    with etcds.running_etcd(data, **ports) as server:
        opened = EtcdStore(server.url)
        start = await opened.revision()
        watch = opened.watch("ConfigMap", since=start)
        stream = await watch.__aenter__()
        before = await opened.create(configmap("before"))
    try:
        with etcds.running_etcd(data, **ports):
            after = await opened.create(configmap("after"))
            events = await take(stream, 2)
            assert [e.object for e in events] == [before, after]
    finally:
        await watch.__aexit__(None, None, None)
        await opened.close()
