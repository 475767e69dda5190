"""The `remote` store backend: an HTTP client of a devplace API server (`devplace server`).

It speaks the server's Kubernetes-style resource API, building paths from the kind registry
(`/apis/{group}/{version}/namespaces/{ns}/{plural}/{name}`, `/api/v1/...` for core kinds), plus the server's
`/store` paths for what Kubernetes has no path for (revision, compaction, a watch over every kind).

Semantics are the server's store's: every write is a compare-and-swap done by the server's backend, so a stale
resourceVersion comes back as 409 and is raised here as `Conflict`. A `Status` body is mapped back to the
devplace error of its HTTP code and reason (422 -> `Invalid` with the field causes, 410 -> `Gone`, ...); a server
that cannot be reached is `Unavailable`.

Watch streams NDJSON. The server tells where a watch from "now" started (header `X-Devplace-Watch-From`), and
every event carries its revision (`metadata.resourceVersion`), so when the stream ends or the connection drops
the watch reconnects from the last revision it delivered: consumers see every event once, in order, or `Gone`
when the server has compacted past it. Reconnects back off through the injected clock: after a failure (giving up
with `Unavailable` after a few), and after streams that keep ending without an event (never giving up: the server
answers, it just has nothing to say, or a proxy keeps cutting the stream).

The HTTP client is created on first use, in the event loop that uses it; `close` closes it and ends watches.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2

from devplace import errors
from devplace.api import registry
from devplace.api.registry import KindInfo
from devplace.clocks import Clock, SystemClock
from devplace.store import base
from devplace.store.base import Event, EventType, ObjectList

__all__ = ["WATCH_FROM_HEADER", "RemoteStore", "error_from_status"]

WATCH_FROM_HEADER = "X-Devplace-Watch-From"
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

    async def list(self, kind: str, namespace: str | None = None, selector: str | None = None) -> ObjectList:
        info = self._kind(kind)
        if (info.namespaced and namespace == "") or (not info.namespaced and namespace):
            return ObjectList([], await self.revision())  # that scope cannot hold this kind
        params = {"labelSelector": selector} if selector else None
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

    async def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        *,
        since: int | None = None,
        selector: str | None = None,
    ) -> AsyncIterator[Event]:
        path, base_params = self._watch_path(kind, namespace)
        if selector:
            base_params["labelSelector"] = selector
        last = since
        failures = 0
        quiet = 0  # streams in a row that ended cleanly without delivering anything
        while True:
            params = dict(base_params)
            if last is not None:
                params["resourceVersion"] = str(last)
            try:
                async with self._http().stream(
                    "GET", path, params=params, timeout=httpx2.Timeout(self._timeout, read=None)
                ) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        raise error_from_status(response.status_code, _json_or_none(response), response.text[:200])
                    started = response.headers.get(WATCH_FROM_HEADER)
                    if last is None and started is not None and started.isdigit():
                        last = int(started)
                    failures = 0
                    quiet += 1
                    async for line in response.aiter_lines():
                        if not line.strip():
                            continue
                        event = _event(line)
                        if last is not None and event.revision <= last:
                            continue  # already delivered before a reconnect
                        last = event.revision
                        quiet = 0
                        yield event
            except httpx2.TransportError as e:
                if self._closed:
                    raise errors.Unavailable("store is closed") from e
                failures += 1
                if failures > _MAX_RECONNECTS:
                    raise errors.Unavailable(f"watch {path}: the API server at {self.base_url} is gone: {e!r}") from e
                await self._clock.sleep(0.05 * 2 ** (failures - 1))
            if self._closed:
                raise errors.Unavailable("store is closed")
            # The stream ended (server timeout, restart): resume after the last delivered revision. A server (or a
            # proxy) that keeps ending streams at once must not turn this into a busy loop: back off, never give up.
            if quiet > 1:
                await self._clock.sleep(min(0.05 * 2 ** (quiet - 2), _MAX_QUIET_PAUSE))


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
