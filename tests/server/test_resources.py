"""The resource API's pure parts: which URL addresses what, and how a body is checked against its URL."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from devplace import errors
from devplace.server._requests import Target, delete_preconditions, prepare_write, resolve
from devplace.server._watches import watch_media_type, watch_response
from devplace.store._base import Event


def config(name: str = "cam", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": name, **meta},
        "spec": {"discoveryHandler": {"name": "debugEcho"}},
    }


@pytest.mark.parametrize(
    ("api_version", "plural", "namespace", "name", "kind", "store_ns"),
    [
        ("devplace.io/v1alpha1", "configurations", "default", "x", "Configuration", "default"),
        ("akri.sh/v0", "instances", "team-a", None, "Instance", "team-a"),
        ("v1", "nodes", None, "node-a", "Node", ""),
        ("devplace.io/v1alpha1", "resourceclasses", None, None, "ResourceClass", ""),
        ("apps/v1", "deployments", "default", "web", "Deployment", "default"),
        ("batch/v1", "jobs", None, None, "Job", ""),  # a namespaced kind listed across namespaces
    ],
)
def test_resolve_finds_the_kind_its_scope_allows(
    api_version: str, plural: str, namespace: str | None, name: str | None, kind: str, store_ns: str
) -> None:
    target = resolve(api_version, plural, namespace, name)
    assert (target.info.kind, target.store_namespace, target.name) == (kind, store_ns, name)


@pytest.mark.parametrize(
    ("api_version", "plural", "namespace", "name", "creating", "says"),
    [
        ("devplace.io/v1alpha1", "widgets", None, None, False, "widgets"),
        ("apps/v1", "configurations", "default", None, False, "apps/v1 does not serve configurations"),
        ("v1", "configurations", "default", None, False, "v1 does not serve configurations"),
        ("devplace.io/v1alpha1", "nodes", None, None, False, "does not serve nodes"),
        ("v1", "nodes", "default", "node-a", False, "Node is cluster-scoped"),
        ("devplace.io/v1alpha1", "resourceclasses", "default", None, False, "ResourceClass is cluster-scoped"),
        ("akri.sh/v0", "configurations", None, "x", False, "Configuration is namespaced"),
        ("v1", "pods", None, None, True, "Pod is namespaced"),
    ],
)
def test_resolve_refuses_paths_the_registry_does_not_serve_with_not_found(
    api_version: str, plural: str, namespace: str | None, name: str | None, creating: bool, says: str
) -> None:
    with pytest.raises(errors.NotFound) as caught:
        resolve(api_version, plural, namespace, name, creating=creating)
    assert says in caught.value.message


def target(namespace: str | None = "default", name: str | None = None, api_version: str = "akri.sh/v0") -> Target:
    return resolve(api_version, "configurations", namespace, name)


def test_prepare_write_fills_the_namespace_kind_and_api_version_from_the_url() -> None:
    body = {"metadata": {"name": "cam"}, "spec": {"discoveryHandler": {"name": "debugEcho"}}}
    obj = prepare_write(body, target("team-a", api_version="devplace.io/v1alpha1"))
    assert obj["kind"] == "Configuration"
    assert obj["apiVersion"] == "devplace.io/v1alpha1"
    assert obj["metadata"]["namespace"] == "team-a"


def test_prepare_write_refuses_a_body_of_the_kinds_other_group_as_kubernetes_refuses_it() -> None:
    with pytest.raises(errors.Malformed) as caught:
        prepare_write(config(), target(api_version="devplace.io/v1alpha1"))
    assert caught.value.message == (
        "apiVersion: the API version in the data (akri.sh/v0) does not match the expected API version "
        "(devplace.io/v1alpha1)"
    )


def test_prepare_write_takes_the_name_from_the_url_for_an_update_without_one() -> None:
    body = config()
    del body["metadata"]["name"]
    assert prepare_write(body, target(name="from-url"))["metadata"]["name"] == "from-url"


@pytest.mark.parametrize(
    ("body", "where", "field"),
    [
        (config(namespace="other"), target("default"), "metadata.namespace"),
        (config("cam"), target(name="dog"), "metadata.name"),
        ({**config(), "kind": "Instance"}, target(), "kind"),
        ({**config(), "apiVersion": "apps/v1"}, target(), "apiVersion"),
        ({**config(), "spec": {"discoveryHandler": {"name": "x"}, "capacity": 0}}, target(), "spec.capacity"),
        (config("Not_A_Name"), target(), "metadata.name"),
    ],
)
def test_prepare_write_refuses_a_body_naming_something_else_with_the_field(
    body: dict[str, Any], where: Target, field: str
) -> None:
    with pytest.raises(errors.Invalid) as caught:
        prepare_write(body, where)
    assert field in [f.path for f in caught.value.fields]


@pytest.mark.parametrize(
    ("body", "query", "expected"),
    [
        (None, None, (None, None)),
        (None, "7", ("7", None)),
        ({"preconditions": {"resourceVersion": "9"}}, "7", ("9", None)),
        ({"preconditions": {"resourceVersion": 9, "uid": "u-1"}}, None, ("9", "u-1")),
        ({"kind": "DeleteOptions", "apiVersion": "v1"}, None, (None, None)),
    ],
)
def test_delete_preconditions_come_from_the_body_then_the_query(
    body: dict[str, Any] | None, query: str | None, expected: tuple[str | None, str | None]
) -> None:
    pre = delete_preconditions(body, query)
    assert (pre.resource_version, pre.uid) == expected


@pytest.mark.parametrize(
    ("body", "query", "field"),
    [
        ({"preconditions": "7"}, None, "preconditions"),
        ({"preconditions": {"resourceVersion": True}}, None, "preconditions.resourceVersion"),
        ({"preconditions": {"uid": 5}}, None, "preconditions.uid"),
        (None, "seven", "preconditions.resourceVersion"),
        (None, "-1", "preconditions.resourceVersion"),
    ],
)
def test_delete_preconditions_refuse_malformed_values(
    body: dict[str, Any] | None, query: str | None, field: str
) -> None:
    with pytest.raises(errors.Invalid) as caught:
        delete_preconditions(body, query)
    assert caught.value.fields[0].path == field


class _Stream:
    """A store watch stand-in: `events` to deliver, then `failure` (or the end); records entry and exit."""

    def __init__(
        self,
        events: list[Event],
        failure: errors.DevplaceError | None = None,
        *,
        refuse: bool = False,
        idle: bool = False,
    ) -> None:
        self.events = list(events)
        self.failure = failure
        self.refuse = refuse  # the failure is raised at entry
        self.idle = idle  # after the events, wait forever (an idle watch)
        self.log: list[str] = []

    @property
    def revision(self) -> int:
        return 0

    async def __aenter__(self) -> _Stream:
        self.log.append("enter")
        if self.refuse and self.failure is not None:
            raise self.failure
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.log.append("exit")

    def __aiter__(self) -> _Stream:
        return self

    async def __anext__(self) -> Event:
        await asyncio.sleep(0)
        if self.events:
            return self.events.pop(0)
        if self.idle:
            await asyncio.Event().wait()
        if self.failure is not None:
            raise self.failure
        raise StopAsyncIteration


ADDED = Event("ADDED", {"kind": "Node", "metadata": {"name": "a", "resourceVersion": "3"}}, 3)


async def test_a_watch_refused_at_entry_raises_before_any_response_exists() -> None:
    stream = _Stream([], errors.Gone("revision 1 has been compacted"), refuse=True)
    with pytest.raises(errors.Gone):
        await watch_response(stream, timeout=None)
    assert stream.log == ["enter"]


async def test_a_watch_that_fails_mid_stream_ends_with_an_error_event_carrying_the_status() -> None:
    stream = _Stream([ADDED], errors.Gone("revision 3 has been compacted"))
    response = await watch_response(stream, timeout=None)
    lines = [json.loads(chunk) async for chunk in response.body_iterator]  # type: ignore[attr-defined]
    assert [line["type"] for line in lines] == ["ADDED", "ERROR"]
    assert lines[1]["object"]["code"] == 410
    assert lines[1]["object"]["reason"] == "Expired"


async def test_the_response_exits_the_store_watch_when_the_stream_ends() -> None:
    stream = _Stream([ADDED])
    response = await watch_response(stream, timeout=None)
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()  # the client never leaves
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await response({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)
    assert stream.log == ["enter", "exit"]
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body", "http.response.body"]


async def test_the_response_exits_the_store_watch_when_the_client_leaves_before_any_event() -> None:
    stream = _Stream([], idle=True)
    response = await watch_response(stream, timeout=None)

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        pass

    await response({"type": "http", "asgi": {"spec_version": "2.4"}}, receive, send)
    assert stream.log == ["enter", "exit"]


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, "application/json;stream=watch"),  # Kubernetes serves JSON to a client that names nothing
        ("*/*", "application/json;stream=watch"),
        ("application/json", "application/json;stream=watch"),
        ("application/json;as=Table;v=v1;g=meta.k8s.io, application/json", "application/json;stream=watch"),
        ("application/x-ndjson, application/json", "application/x-ndjson"),
    ],
)
def test_watch_media_type_follows_the_accept_header(accept: str | None, expected: str) -> None:
    assert watch_media_type(accept) == expected


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, "application/x-ndjson"),
        ("*/*", "application/x-ndjson"),
        ("application/json", "application/json;stream=watch"),
        ("application/x-ndjson", "application/x-ndjson"),
    ],
)
def test_the_store_watch_path_keeps_ndjson_unless_json_is_asked_for(accept: str | None, expected: str) -> None:
    assert watch_media_type(accept, store_protocol=True) == expected


def test_prepare_write_under_ignore_drops_unknown_fields_inside_lists_and_keeps_the_rest() -> None:
    rc = {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": "gpu"},
        "spec": {"resourceSelector": [{"matchExpressions": [{"key": "Kind", "operator": "In", "values": ["gpu"]}]}]},
    }
    expression = {"key": "Kind", "operator": "In", "values": ["gpu"], "colour": "x"}
    noisy = {**rc, "spec": {"resourceSelector": [{"matchExpressions": [expression]}]}}
    where = resolve("devplace.io/v1alpha1", "resourceclasses", None, None)
    warnings: list[str] = []
    assert prepare_write(noisy, where, validation="Warn", warnings=warnings) == rc
    assert warnings == ['unknown field "spec.resourceSelector[0].matchExpressions[0].colour"']
    with pytest.raises(errors.Invalid) as caught:
        prepare_write(noisy, where)
    assert [f.path for f in caught.value.fields] == ["spec.resourceSelector[0].matchExpressions[0].colour"]
