"""The `remote` store backend: an HTTP client of a devplace API server (`devplace server`).

It speaks the server's Kubernetes-style resource API, building paths from the kind registry
(`/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}`, `/api/v1/...` for core kinds), plus the server's
`/store` paths for what Kubernetes has no path for (revision, compaction, a watch over every kind).

Semantics are the server's store's: every write is a compare-and-swap done by the server's backend, so a stale
resourceVersion comes back as 409 and is raised here as `Conflict`. A `Status` body is mapped back to the
devplace error of its HTTP code and reason (422 -> `Invalid` with the field causes, 410 -> `Gone`, ...); a server
that cannot be reached is `Unavailable`.

Filters: `list` and `watch` send the label selector as `labelSelector` and the field selector as `fieldSelector`;
the server's store filters, so only what was asked for crosses the network. Both are parsed here first, so a bad
one is refused with the same `Invalid` as every backend, before a round trip.

Watch: entering `watch(...)` opens the HTTP stream and checks its status, so `Gone` (410) and every other refusal is
raised by `async with`, and the watch is registered on the server before the caller writes anything. A watch from
"now" (`since=None`) first asks the server for its revision (`/store/revision`) and watches from there: events
written between the two requests are replayed, and `revision` is known at entry. Every event carries its revision
(`metadata.resourceVersion`), so when the stream ends or the connection drops the watch reconnects from the last
revision it delivered: consumers see every event once, in order, or `Gone` when the server has compacted past it.
Reconnects back off through the injected clock: after a failure (giving up with `Unavailable` after a few), and
after streams that keep ending without an event (never giving up: the server answers, it just has nothing to say,
or a proxy keeps cutting the stream). A caller cancelled while reading loses only the connection (the next read
reconnects from the last delivered revision).

The HTTP client is created on first use, in the event loop that uses it; `close` closes the open watch streams
(their readers get `Unavailable`) and then the client.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import TracebackType
from typing import Any

import httpx2

from devplace import errors
from devplace.api import registry
from devplace.api.registry import KindInfo
from devplace.clocks import Clock, SystemClock
from devplace.store import base
from devplace.store.base import Event, EventType, ObjectList

__all__ = ["RemoteStore", "error_from_status"]

_MAX_QUIET_PAUSE = 5.0
_EVENT_TYPES: frozenset[str] = frozenset({"ADDED", "MODIFIED", "DELETED"})
_MAX_RECONNECTS = 5


def error_from_status(code: int, body: Any, fallback: str = "") -> errors.DevplaceError:
    """The devplace error a `Status` response stands for (by HTTP code, then reason)."""
    status = body if isinstance(body, Mapping) else {}
    message = str(status.get("message") or fallback or f"HTTP {code}")
    reason = status.get("reason")
    if code == 404:
        return errors.NotFound(message)
    if code == 409:
        if reason == "AlreadyExists":
            return errors.AlreadyExists(message)
        if reason == "Refused":
            return errors.Refused(message)
        return errors.Conflict(message)
    if code == 410:
        return errors.Gone(message)
    if code == 403:
        return errors.Forbidden(message)
    if code in (400, 405, 413, 422):
        causes = (status.get("details") or {}).get("causes") or []
        fields = [
            errors.FieldError(str(c.get("field") or ""), str(c.get("message") or ""))
            for c in causes
            if isinstance(c, Mapping)
        ]
        return errors.Invalid(message, fields)
    if code == 503:
        return errors.Unavailable(message)
    return errors.Unavailable(f"the API server answered {code}: {message}")


class RemoteStore:
    """A `Store` whose objects live behind a devplace API server at `base_url` (e.g. http://127.0.0.1:8080)."""

    def __init__(self, base_url: str, *, clock: Clock | None = None, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._clock = clock or SystemClock()
        self._timeout = timeout
        self._client: httpx2.AsyncClient | None = None
        self._watches: set[_RemoteWatch] = set()
        self._closed = False

    # -- plumbing -----------------------------------------------------------------------------------------------

    def _http(self) -> httpx2.AsyncClient:
        if self._closed:
            raise errors.Unavailable("store is closed")
        if self._client is None:
            self._client = httpx2.AsyncClient(
                base_url=self.base_url,
                timeout=httpx2.Timeout(self._timeout),
                limits=httpx2.Limits(max_connections=None, max_keepalive_connections=32),
                headers={"Accept": "application/json"},
            )
        return self._client

    async def _call(self, method: str, path: str, *, body: Any = None, params: Mapping[str, str] | None = None) -> Any:
        try:
            response = await self._http().request(method, path, json=body, params=params)
        except httpx2.TransportError as e:
            raise errors.Unavailable(f"the API server at {self.base_url} did not answer: {e!r}") from e
        if response.status_code >= 400:
            raise error_from_status(response.status_code, _json_or_none(response), response.text[:200])
        return response.json()

    @staticmethod
    def _kind(kind: str) -> KindInfo:
        info = registry.lookup(kind)
        if info.kind != kind:
            raise errors.Invalid.field("kind", f"{kind!r} is not a kind (did you mean {info.kind!r}?)")
        return info

    @staticmethod
    def _collection(info: KindInfo, namespace: str | None, api_version: str | None = None) -> str:
        gv = api_version if api_version in info.group_versions else info.preferred_api_version
        root = f"/apis/{gv}" if "/" in gv else f"/api/{gv}"
        if info.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{info.plural}"
        return f"{root}/{info.plural}"

    def _item(self, info: KindInfo, name: str, namespace: str, api_version: str | None = None) -> str:
        if info.namespaced and not namespace:
            raise errors.NotFound(f"{info.kind} /{name} not found (a namespaced kind needs a namespace)")
        if not info.namespaced and namespace:
            raise errors.NotFound(f"{info.kind} {namespace}/{name} not found ({info.kind} is cluster-scoped)")
        return f"{self._collection(info, namespace, api_version)}/{name}"

    # -- Store protocol -------------------------------------------------------------------------------------------

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        key = base.key_of(obj)  # the same refusals as every backend, before a round trip
        info = self._kind(key.kind)
        namespace = key.namespace or (registry.DEFAULT_NAMESPACE if info.namespaced else "")
        path = self._collection(info, namespace, _str_or_none(obj.get("apiVersion")))
        result: dict[str, Any] = await self._call("POST", path, body=dict(obj))
        return result

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        info = self._kind(kind)
        result: dict[str, Any] = await self._call("GET", self._item(info, name, namespace or ""))
        return result

    async def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None, *, fields: str | None = None
    ) -> ObjectList:
        info = self._kind(kind)
        base.parse_filters(kind, namespace, selector, fields)  # the same refusals as every backend
        if (info.namespaced and namespace == "") or (not info.namespaced and namespace):
            return ObjectList([], await self.revision())  # that scope cannot hold this kind
        params = _selector_params(selector, fields)
        body = await self._call("GET", self._collection(info, namespace), params=params)
        return ObjectList(list(body.get("items") or []), int(body["metadata"]["resourceVersion"]))

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        key = base.key_of(obj)
        info = self._kind(key.kind)
        namespace = key.namespace or (registry.DEFAULT_NAMESPACE if info.namespaced else "")
        path = self._item(info, key.name, namespace, _str_or_none(obj.get("apiVersion")))
        result: dict[str, Any] = await self._call("PUT", path, body=dict(obj))
        return result

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        info = self._kind(kind)
        body = None
        if resource_version is not None:
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": resource_version}}
        result: dict[str, Any] = await self._call("DELETE", self._item(info, name, namespace or ""), body=body)
        return result

    async def revision(self) -> int:
        return int((await self._call("GET", "/store/revision"))["revision"])

    async def compact(self, revision: int) -> None:
        await self._call("POST", "/store/compact", body={"revision": int(revision)})

    async def close(self) -> None:
        self._closed = True
        for watch in list(self._watches):
            await watch._disconnect()
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    # -- watch ----------------------------------------------------------------------------------------------------

    def _watch_path(self, kind: str | None, namespace: str | None) -> tuple[str, dict[str, str]]:
        """The Kubernetes watch path when the (kind, namespace) pair has one, else the server's /store/watch."""
        if kind is not None:
            info = self._kind(kind)
            if namespace is None or (info.namespaced and namespace) or (not info.namespaced and namespace == ""):
                return self._collection(info, namespace), {"watch": "1"}
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


class _RemoteWatch(base.BaseWatch):
    """One watch of a `RemoteStore` (see the module docstring): an HTTP stream opened on entry, reopened from the
    last delivered revision when it ends."""

    def __init__(
        self,
        store: RemoteStore,
        kind: str | None,
        namespace: str | None,
        since: int | None,
        selector: str | None,
        fields: str | None,
    ) -> None:
        super().__init__(kind, namespace, since, selector, fields)
        self._store = store
        self._path = ""
        self._params: dict[str, str] = {}
        self._last = -1
        self._response: httpx2.Response | None = None
        self._lines: Any = None  # the open response's line iterator
        self._failures = 0  # failed attempts in a row
        self._quiet = 0  # streams in a row that ended cleanly without delivering anything

    async def __aenter__(self) -> _RemoteWatch:
        store = self._store
        store._http()  # Unavailable when closed
        kind, namespace, selector, fields = self._args
        base.parse_filters(kind, namespace, selector, fields)  # the same refusals as every backend
        self._path, params = store._watch_path(kind, namespace)
        self._params = {**params, **_selector_params(selector, fields)}
        self._last = await store.revision() if self._since is None else self._since
        self._revision = self._last
        store._watches.add(self)
        try:
            await self._connect()
        except httpx2.TransportError as e:
            store._watches.discard(self)
            raise errors.Unavailable(
                f"watch {self._path}: the API server at {store.base_url} did not answer: {e!r}"
            ) from e
        except BaseException:
            store._watches.discard(self)
            raise
        self._entered = True
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._entered = False
        self._store._watches.discard(self)
        await self._disconnect()

    async def __anext__(self) -> Event:
        self._require_entered()
        while True:
            self._check_open()
            if self._lines is None:
                await self._reconnect()
                continue
            try:
                line: str = await anext(self._lines)
            except StopAsyncIteration:
                # The stream ended (server timeout, restart): resume after the last delivered revision. A server
                # (or a proxy) that keeps ending streams at once must not turn this into a busy loop: back off.
                await self._disconnect()
                self._check_open()
                if self._quiet > 1:
                    await self._store._clock.sleep(min(0.05 * 2 ** (self._quiet - 2), _MAX_QUIET_PAUSE))
                continue
            except httpx2.TransportError as e:
                await self._disconnect()
                self._check_open()
                await self._failed(e)
                continue
            except Exception as e:
                if self._store._closed:  # `close` shut the stream under this reader
                    raise errors.Unavailable("store is closed") from e
                raise
            if not line.strip():
                continue
            event = _event(line)
            if event.revision <= self._last:
                continue  # already delivered before a reconnect
            self._last = event.revision
            self._quiet = 0
            return event

    async def _connect(self) -> None:
        """Open the stream from the last delivered revision; a refusal raises its devplace error."""
        store = self._store
        client = store._http()
        params = {**self._params, "resourceVersion": str(self._last)}
        request = client.build_request(
            "GET", self._path, params=params, timeout=httpx2.Timeout(store._timeout, read=None)
        )
        response = await client.send(request, stream=True)
        if response.status_code >= 400:
            try:
                await response.aread()
            finally:
                await response.aclose()
            raise error_from_status(response.status_code, _json_or_none(response), response.text[:200])
        self._response = response
        self._lines = response.aiter_lines()
        self._failures = 0
        self._quiet += 1

    async def _reconnect(self) -> None:
        while True:
            self._check_open()
            try:
                await self._connect()
                return
            except httpx2.TransportError as e:
                self._check_open()
                await self._failed(e)

    async def _failed(self, e: httpx2.TransportError) -> None:
        self._failures += 1
        if self._failures > _MAX_RECONNECTS:
            raise errors.Unavailable(
                f"watch {self._path}: the API server at {self._store.base_url} is gone: {e!r}"
            ) from e
        await self._store._clock.sleep(0.05 * 2 ** (self._failures - 1))

    async def _disconnect(self) -> None:
        response, self._response, self._lines = self._response, None, None
        if response is not None:
            await response.aclose()

    def _check_open(self) -> None:
        if self._store._closed:
            raise errors.Unavailable("store is closed")


def _selector_params(selector: str | None, fields: str | None) -> dict[str, str]:
    params = {}
    if selector:
        params["labelSelector"] = selector
    if fields:
        params["fieldSelector"] = fields
    return params


def _event(line: str) -> Event:
    try:
        payload = json.loads(line)
        type_ = payload["type"]
        obj = payload["object"]
    except (ValueError, KeyError, TypeError) as e:
        raise errors.Unavailable(f"the API server sent a malformed watch event: {line[:200]!r}") from e
    if type_ == "ERROR":
        raise error_from_status(int(obj.get("code") or 500), obj)
    if type_ not in _EVENT_TYPES:
        raise errors.Unavailable(f"the API server sent an unknown watch event type {type_!r}")
    try:
        revision = int(obj["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError) as e:
        raise errors.Unavailable(f"the API server sent a watch event without a revision: {line[:200]!r}") from e
    event_type: EventType = type_
    return Event(event_type, obj, revision)


def _json_or_none(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
