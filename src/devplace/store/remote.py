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

Lists: the server pages every list (`devplace.server.lists`), so `list` follows `continue` tokens until the last
page; the result's revision is the first page's (a later page may show an object newer than it, which a watch from
that revision then replays). A token that expires while paging (410) starts the list again, a few times at most.

The HTTP client is created on first use, in the event loop that uses it; `close` closes the open watch streams
(their readers get `Unavailable`) and then the client.

Credentials (`Credentials`): a bearer token, client certificate and key (files or PEM data), and the CA that signs
the server's certificate (files or PEM data; else the system's roots), as `Credentials.for_server` takes them from
a kubeconfig and a token. A kubeconfig's credentials are used only for a server its context names: the current
context when its cluster's `server` is the store URL, else the first context whose cluster's is; a kubeconfig that
names no such server gives none (its credentials are never sent to another server). An explicit token wins over the
kubeconfig's. Relative paths in a kubeconfig are relative to its file; `KUBECONFIG` may list several files
(`os.pathsep`-separated), merged as kubectl merges them: the first file that sets a name or `current-context` wins.
401 answers are raised as `Unauthenticated`, 403 as `Forbidden`, 429 (too many watches) as `TooManyRequests` (an
`Unavailable`: callers retry it like a server that did not answer).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import os
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import httpx2
import yaml

from devplace import errors
from devplace.api import manifests, registry, revisions
from devplace.api.registry import KindInfo
from devplace.clocks import Clock, SystemClock
from devplace.store import base
from devplace.store.base import Event, EventType, ObjectList

__all__ = ["Credentials", "LineStreamWatch", "RemoteStore", "error_from_status", "kubeconfig_server"]

_MAX_QUIET_PAUSE = 5.0
_EVENT_TYPES: frozenset[str] = frozenset({"ADDED", "MODIFIED", "DELETED"})
_MAX_RECONNECTS = 5
_LIST_RESTARTS = 3
_WATCH_ACCEPT = {"Accept": "application/x-ndjson"}  # NDJSON: the server refuses a gone revision with 410 at once


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
    if code == 504 and _has_cause(status, "ResourceVersionTooLarge"):
        return errors.ResourceVersionTooLarge(message)
    if code == 401:
        return errors.Unauthenticated(message)
    if code == 403:
        return errors.Forbidden(message)
    if code == 429:
        return errors.TooManyRequests(message)
    if code in (400, 405, 413, 422):
        causes = _causes(status)
        fields = [errors.FieldError(str(c.get("field") or ""), str(c.get("message") or "")) for c in causes]
        return (errors.TooLarge if code == 413 else errors.Invalid)(message, fields)
    if code == 503:
        return errors.Unavailable(message)
    return errors.Unavailable(f"the API server answered {code}: {message}")


def _causes(status: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    details = status.get("details")
    causes = details.get("causes") if isinstance(details, Mapping) else None
    return [c for c in causes if isinstance(c, Mapping)] if isinstance(causes, list) else []


def _has_cause(status: Mapping[str, Any], reason: str) -> bool:
    return any(c.get("reason") == reason for c in _causes(status))


# -- credentials ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Credentials:
    """How the remote backend proves who it is and checks the server (module docstring). PEM data or file paths."""

    token: str | None = None
    ca_file: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: str | None = None
    key_data: str | None = None
    insecure_skip_verify: bool = False

    @property
    def presents_certificate(self) -> bool:
        return bool(self.cert_file or self.cert_data)

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context for an https server: its CA (else the system's roots) and this client's certificate."""
        try:
            context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
            if self.insecure_skip_verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            if self.cert_file or self.cert_data:
                self._load_certificate(context)
        except (OSError, ssl.SSLError, ValueError) as e:
            raise errors.Invalid.field("credentials", f"cannot load the TLS certificates: {e}") from e
        return context

    def _load_certificate(self, context: ssl.SSLContext) -> None:
        if self.cert_data is None and self.key_data is None:
            context.load_cert_chain(str(self.cert_file), self.key_file)
            return
        with tempfile.TemporaryDirectory(prefix="devplace-cert-") as directory:  # mode 0700; gone once loaded
            cert = self.cert_file
            key = self.key_file
            if self.cert_data is not None:
                cert = os.path.join(directory, "cert.pem")
                Path(cert).write_text(self.cert_data, encoding="utf-8")
            if self.key_data is not None:
                key = os.path.join(directory, "key.pem")
                Path(key).write_text(self.key_data, encoding="utf-8")
            context.load_cert_chain(str(cert), key)

    @classmethod
    def for_server(cls, url: str, *, token: str | None = None, kubeconfig: str | None = None) -> Credentials:
        """The credentials for the server at `url`: the kubeconfig's for it (module docstring), `token` winning."""
        found = _kubeconfig_entry(kubeconfig, url) if kubeconfig else None
        credentials = cls() if found is None else _credentials_of(*found)
        return dataclasses.replace(credentials, token=token) if token else credentials


def _normalized(url: str) -> tuple[str, str, int | None, str]:
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port, parts.path.rstrip("/")


_Kubeconfig = dict[str, Any]


def _read_kubeconfigs(paths: str) -> list[tuple[Path, _Kubeconfig]]:
    """The files of a KUBECONFIG-style list that exist, each parsed; `Invalid` naming a file that does not parse."""
    out = []
    for raw in paths.split(os.pathsep):
        if not raw:
            continue
        path = Path(raw).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        except (OSError, UnicodeDecodeError) as e:
            raise errors.Invalid.field("kubeconfig", f"cannot read {path}: {e}") from e
        try:  # under the hostile-input rules (nesting, aliases, duplicate keys) like every YAML devplace reads
            doc = manifests.yaml_value(text) or {}
        except yaml.YAMLError as e:
            raise errors.Invalid.field("kubeconfig", f"{path} is not YAML: {e}") from e
        except errors.Invalid as e:
            raise errors.Invalid.field("kubeconfig", f"{path}: {e.message}") from e
        if not isinstance(doc, dict):
            raise errors.Invalid.field("kubeconfig", f"{path} is not a kubeconfig (a mapping)")
        out.append((path, doc))
    return out


def _named(files: list[tuple[Path, _Kubeconfig]], section: str, entry: str) -> dict[str, tuple[Path, dict[str, Any]]]:
    """`clusters`/`users`/`contexts` by name across files, the first file's entry winning, with its file."""
    found: dict[str, tuple[Path, dict[str, Any]]] = {}
    for path, doc in files:
        for item in doc.get(section) or []:
            if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get(entry), dict):
                found.setdefault(item["name"], (path, item[entry]))
    return found


def _kubeconfig_entry(
    paths: str, url: str | None
) -> tuple[tuple[Path, dict[str, Any]], tuple[Path, dict[str, Any]] | None] | None:
    """The (cluster, user) entries, each with its file, of the context for `url` (None: the current context)."""
    files = _read_kubeconfigs(paths)
    clusters = _named(files, "clusters", "cluster")
    users = _named(files, "users", "user")
    contexts = _named(files, "contexts", "context")
    current = next((doc["current-context"] for _, doc in files if doc.get("current-context")), None)
    order = ([current] if current in contexts else []) + [name for name in contexts if name != current]
    for name in order:
        context = contexts[name][1]
        cluster = clusters.get(str(context.get("cluster")))
        if cluster is None:
            continue
        server = str(cluster[1].get("server") or "")
        wanted = name == current if url is None else _normalized(server) == _normalized(url)
        if wanted:
            return cluster, users.get(str(context.get("user")))
    return None


def kubeconfig_server(paths: str) -> str:
    """The server of a kubeconfig's current context; `Invalid` naming `kubeconfig` when there is none."""
    found = _kubeconfig_entry(paths, None)
    server = str(found[0][1].get("server") or "") if found else ""
    if not server.startswith(("http://", "https://")):
        raise errors.Invalid.field("kubeconfig", f"{paths}: no current context with an http(s) server")
    return server


def _path(base: Path, value: Any) -> str | None:
    if not value:
        return None
    path = Path(str(value)).expanduser()
    return str(path if path.is_absolute() else base.parent / path)


def _data(value: Any, what: str) -> str | None:
    if not value:
        return None
    try:
        return base64.b64decode(str(value), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as e:
        raise errors.Invalid.field(f"kubeconfig.{what}", "is not base64-encoded PEM") from e


def _credentials_of(cluster: tuple[Path, dict[str, Any]], user: tuple[Path, dict[str, Any]] | None) -> Credentials:
    cluster_file, c = cluster
    user_file, u = user if user is not None else (cluster_file, {})
    for unsupported in ("exec", "auth-provider", "username", "password"):
        if u.get(unsupported):
            raise errors.Invalid.field(
                f"kubeconfig.user.{unsupported}", "is not supported: use a token or a certificate"
            )
    token = u.get("token")
    token_file = _path(user_file, u.get("tokenFile"))
    if not token and token_file:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise errors.Invalid.field("kubeconfig.user.tokenFile", f"cannot read {token_file}: {e}") from e
    return Credentials(
        token=str(token) if token else None,
        ca_file=_path(cluster_file, c.get("certificate-authority")),
        ca_data=_data(c.get("certificate-authority-data"), "certificate-authority-data"),
        cert_file=_path(user_file, u.get("client-certificate")),
        key_file=_path(user_file, u.get("client-key")),
        cert_data=_data(u.get("client-certificate-data"), "client-certificate-data"),
        key_data=_data(u.get("client-key-data"), "client-key-data"),
        insecure_skip_verify=bool(c.get("insecure-skip-tls-verify")),
    )


class RemoteStore:
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
        self.credentials = credentials or Credentials()
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
            credentials = self.credentials
            headers = {"Accept": "application/json"}
            if credentials.token:
                headers["Authorization"] = f"Bearer {credentials.token}"
            https = self.base_url.lower().startswith("https://")
            self._client = httpx2.AsyncClient(
                base_url=self.base_url,
                timeout=httpx2.Timeout(self._timeout),
                limits=httpx2.Limits(max_connections=None, max_keepalive_connections=32),
                headers=headers,
                verify=credentials.ssl_context() if https else True,
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
        path = self._collection(info, namespace)
        for _ in range(_LIST_RESTARTS):
            items: list[dict[str, Any]] = []
            revision: int | None = None
            token = ""
            try:
                while True:
                    body = await self._call("GET", path, params={**params, "continue": token} if token else params)
                    meta = body.get("metadata") or {}
                    revision = int(meta["resourceVersion"]) if revision is None else revision
                    items.extend(body.get("items") or [])
                    token = str(meta.get("continue") or "")
                    if not token:
                        return ObjectList(items, revision)
            except errors.Gone:
                if not token:
                    raise  # the first page's own refusal, not an expired token
        raise errors.Unavailable(f"listing {path}: the continue token kept expiring ({_LIST_RESTARTS} attempts)")

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        key = base.key_of(obj)
        base.resource_version_of(obj)  # the same refusals as every backend, before a round trip
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
            revisions.parse_revision("resourceVersion", resource_version)
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": resource_version}}
        result: dict[str, Any] = await self._call("DELETE", self._item(info, name, namespace or ""), body=body)
        return result

    async def revision(self) -> int:
        return int((await self._call("GET", "/store/revision"))["revision"])

    async def compact(self, revision: int) -> None:
        target = revisions.parse_revision("revision", revision)  # the server refuses one beyond its head
        await self._call("POST", "/store/compact", body={"revision": target})

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


class LineStreamWatch(base.BaseWatch):
    """A watch read as lines of one HTTP response at a time, reopened when the response fails: the reconnect loop, its
    backoff on the store's clock (giving up with `Unavailable` after `_MAX_RECONNECTS` failures in a row) and closing.
    The remote and kube backends' watches differ only in how they open a stream (`_connect`) and read its lines."""

    _path: str
    _failures: int
    _response: httpx2.Response | None
    _lines: Any

    async def _connect(self) -> None:
        raise NotImplementedError

    def _server(self) -> str:
        """The API server, for messages."""
        raise NotImplementedError

    def _closed(self) -> bool:
        raise NotImplementedError

    def _clock(self) -> Clock:
        raise NotImplementedError

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
            raise errors.Unavailable(f"watch {self._path}: the API server at {self._server()} is gone: {e!r}") from e
        await self._clock().sleep(0.05 * 2 ** (self._failures - 1))

    async def _disconnect(self) -> None:
        response, self._response, self._lines = self._response, None, None
        if response is not None:
            await response.aclose()

    def _check_open(self) -> None:
        if self._closed():
            raise errors.Unavailable("store is closed")


class _RemoteWatch(LineStreamWatch):
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
        since = base.watch_since(self._since)
        self._path, params = store._watch_path(kind, namespace)
        self._params = {**params, **_selector_params(selector, fields)}
        self._last = await store.revision() if since is None else since
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
            "GET",
            self._path,
            params=params,
            headers=_WATCH_ACCEPT,
            timeout=httpx2.Timeout(store._timeout, read=None),
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

    def _server(self) -> str:
        return self._store.base_url

    def _closed(self) -> bool:
        return self._store._closed

    def _clock(self) -> Clock:
        return self._store._clock


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
