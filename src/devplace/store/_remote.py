"""The `remote` store backend: an HTTP client of a devplace API server (`devplace server`).

It speaks the server's Kubernetes-style resource API, building paths from the kind registry
(`/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}`, `/api/v1/...` for core kinds), plus the server's
`/store` paths for what Kubernetes has no path for (revision, compaction, a watch over every kind).

Semantics are the server's store's: every write is a compare-and-swap done by the server's backend, so a stale
resourceVersion comes back as 409 and is raised here as `Conflict`. A `Status` body is mapped back to the
devplace error of its HTTP code and reason (422 -> `Invalid` with the field causes, 413 -> `TooLarge`, 410 -> `Gone`,
504 with a `ResourceVersionTooLarge` cause -> `ResourceVersionTooLarge`, ...); a server that cannot be reached is
`Unavailable`. Revisions (an update's resourceVersion, a delete precondition, a watch's `since`, a compaction
target) are checked here first with the same strict parser as every backend, so a bad one costs no round trip.

Filters: `list` and `watch` send the label selector as `labelSelector` and the field selector as `fieldSelector`;
the server's store filters, so only what was asked for crosses the network. Both are parsed here first, so a bad
one is refused with the same `Invalid` as every backend, before a round trip.

Watch: entering `watch(...)` opens the HTTP stream and checks its status, so `Gone` (410) and every other refusal is
raised by `async with` (watches ask for NDJSON, to which the server answers a compacted revision with a 410 status;
to a Kubernetes JSON watch it answers 200 and an ERROR event, which would surface only on the first read), and the
watch is registered on the server before the caller writes anything. A watch from
"now" (`since=None`) first asks the server for its revision (`/store/revision`) and watches from there: events
written between the two requests are replayed, and `revision` is known at entry. Every event carries its revision
(`metadata.resourceVersion`), so when the stream ends or the connection drops the watch reconnects from the last
revision it delivered: consumers see every event once, in order, or `Gone` when the server has compacted past it or
has not reached it (a server restarted on a fresh memory store: the consumer relists).
Reconnects back off through the injected clock: after a failure (giving up with `Unavailable` after a few), and
after streams that keep ending without an event (never giving up: the server answers, it just has nothing to say,
or a proxy keeps cutting the stream). A caller cancelled while reading loses only the connection (the next read
reconnects from the last delivered revision).

Lists: the server pages every list (`devplace.server._lists`), so `list` follows `continue` tokens until the last
page; the result's revision is the first page's (a later page may show an object newer than it, which a watch from
that revision then replays). A token that expires while paging (410) starts the list again, a few times at most.

The HTTP client, the Status-to-error mapping, list paging and the watch's reconnect loop are the Kubernetes REST
client core's (`store.restclients`), shared with the `kube` backend; this module keeps the devplace server's URL
layout and its `/store` paths.

Credentials (`restclients.Credentials`): a bearer token, client certificate and key (files or PEM data), and the CA
that signs the server's certificate (files or PEM data; else the system's roots), as `RemoteStore.from_url` takes
them from a kubeconfig and a token (`kubeconfigs.credentials_for_server`: only the credentials of a context that
names the store URL; an explicit token wins over the kubeconfig's). devplace's server checks bearer tokens and
client certificates only, so a kubeconfig user with an exec plugin or a username and password is refused
(`Invalid` naming `kubeconfig.user.exec`, ...). 401 answers are raised as `Unauthenticated`, 403 as `Forbidden`, 429
(too many watches) as `TooManyRequests` (an `Unavailable`: callers retry it like a server that did not answer).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from devplace.api import DEFAULT_NAMESPACE, parse_revision
from devplace.clocks import Clock
from devplace.store import _base as base
from devplace.store import _kubeconfigs as kubeconfigs
from devplace.store._base import STORE_CLIENT_HEADER, ObjectList
from devplace.store._exchanges import Exchanges
from devplace.store._restclients import (
    JSON_PATCH,
    Credentials,
    LineStreamWatch,
    Resource,
    RestClient,
    delete_options,
    kind_info,
    scope_holds,
    selector_params,
)

DEVPLACE_UNSUPPORTED = ("exec", "username", "password")  # kubeconfig user fields devplace's server cannot check
_WATCH_ACCEPT = "application/x-ndjson"  # NDJSON: the server refuses a gone revision with 410 at once


class RemoteStore(RestClient):
    """A `Store` whose objects live behind a devplace API server at `base_url` (e.g. http://127.0.0.1:8080)."""

    def __init__(
        self,
        base_url: str,
        *,
        clock: Clock | None = None,
        timeout: float = 30.0,
        credentials: Credentials | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        super().__init__(self.base_url, credentials or Credentials(), clock=clock, timeout=timeout)

    @classmethod
    def from_url(
        cls, url: str, *, clock: Clock | None = None, token: str | None = None, kubeconfig: str | None = None
    ) -> RemoteStore:
        """The store at `url`, with `token` or the credentials a kubeconfig (a path list) has for that server."""
        credentials = kubeconfigs.credentials_for_server(
            url, token=token, kubeconfig=kubeconfig, unsupported=DEVPLACE_UNSUPPORTED
        )
        return cls(url, clock=clock, credentials=credentials)

    def _new_client(self) -> Exchanges:
        client = super()._new_client()
        client.headers[STORE_CLIENT_HEADER] = "kinds"
        return client

    # -- paths ----------------------------------------------------------------------------------------------------

    @staticmethod
    def _resource(kind: str, api_version: str | None = None) -> Resource:
        """Where `kind` lives: in the object's own group version when the kind is served there."""
        info = kind_info(kind)
        gv = api_version if api_version in info.group_versions else info.preferred_api_version
        return Resource(info.kind, gv, info.plural, info.namespaced)

    # -- Store protocol -------------------------------------------------------------------------------------------

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        key = base.key_of(obj)  # the same refusals as every backend, before a round trip
        resource = self._resource(key.kind, _str_or_none(obj.get("apiVersion")))
        namespace = key.namespace or (DEFAULT_NAMESPACE if resource.namespaced else "")
        result: dict[str, Any] = await self._call("POST", resource.collection(namespace), body=dict(obj))
        return result

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        result: dict[str, Any] = await self._call("GET", self._resource(kind).item(name, namespace or ""))
        return result

    async def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None, *, fields: str | None = None
    ) -> ObjectList:
        resource = self._resource(kind)
        base.parse_filters(kind, namespace, selector, fields)  # the same refusals as every backend
        if not scope_holds(resource.namespaced, namespace):
            return ObjectList([], await self.revision())  # that scope cannot hold this kind
        return await self._list_pages(resource.collection(namespace), selector_params(selector, fields))

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        key = base.key_of(obj)
        base.resource_version_of(obj)  # the same refusals as every backend, before a round trip
        resource = self._resource(key.kind, _str_or_none(obj.get("apiVersion")))
        namespace = key.namespace or (DEFAULT_NAMESPACE if resource.namespaced else "")
        result: dict[str, Any] = await self._call("PUT", resource.item(key.name, namespace), body=dict(obj))
        return result

    async def json_patch(
        self,
        kind: str,
        name: str,
        namespace: str,
        ops: Sequence[Mapping[str, Any]],
        *,
        api_version: str | None = None,
    ) -> dict[str, Any]:
        """`store.JsonPatchStore`: the PATCH, the server's compare-and-swap applying it."""
        resource = self._resource(kind, api_version)
        namespace = namespace or (DEFAULT_NAMESPACE if resource.namespaced else "")
        path = resource.item(name, namespace)
        result: dict[str, Any] = await self._call("PATCH", path, body=[dict(op) for op in ops], content_type=JSON_PATCH)
        return result

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        resource = self._resource(kind)
        body = delete_options(resource_version)
        result: dict[str, Any] = await self._call("DELETE", resource.item(name, namespace or ""), body=body)
        return result

    async def revision(self) -> int:
        return int((await self._call("GET", "/store/revision"))["revision"])

    async def compact(self, revision: int) -> None:
        target = parse_revision("revision", revision)  # the server refuses one beyond its head
        await self._call("POST", "/store/compact", body={"revision": target})

    # -- watch ----------------------------------------------------------------------------------------------------

    def _watch_path(self, kind: str | None, namespace: str | None) -> tuple[str, dict[str, str]]:
        """The Kubernetes watch path when the (kind, namespace) pair has one, else the server's /store/watch."""
        if kind is not None:
            resource = self._resource(kind)
            if scope_holds(resource.namespaced, namespace):
                return resource.collection(namespace), {"watch": "1"}
        params = {"kind": kind} if kind is not None else {}
        if namespace is not None:
            params["namespace"] = namespace
        return "/store/watch", params

    def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        *,
        since: int | None = None,
        selector: str | None = None,
        fields: str | None = None,
    ) -> _RemoteWatch:
        return _RemoteWatch(self, kind, namespace, since, selector, fields)


class _RemoteWatch(LineStreamWatch[RemoteStore]):
    """One watch of a `RemoteStore` (see the module docstring): an HTTP stream opened on entry, reopened from the
    last delivered revision when it ends."""

    _ACCEPT = _WATCH_ACCEPT

    async def __aenter__(self) -> _RemoteWatch:
        store = self._store
        store._http()  # Unavailable when closed
        kind, namespace, selector, fields = self._args
        base.parse_filters(kind, namespace, selector, fields)  # the same refusals as every backend
        since = base.watch_since(self._since)
        self._path, params = store._watch_path(kind, namespace)
        self._params = {**params, **selector_params(selector, fields)}
        start = await store.revision() if since is None else since
        self._revision = start
        await self._open(start)
        return self


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
