"""The `kube` store backend: devplace's objects as resources of a Kubernetes API server.

Akri users already run a cluster, whose API server (and the etcd under it) is the distributed store they trust. With
`--store kube://` the agent, controller and scheduler keep their objects there: devplace's kinds as custom resources
(the CRDs of `deploy/kubernetes/`), Pods, Nodes, Services, ConfigMaps and Jobs as the cluster's own. No
kube-apiserver can be installed on devplace's build machines, so this backend is tested against `devplace server`,
which speaks the same API (the README says so).

Client library: lightkube (async, typed, on httpx2, which devplace already uses). It loads the configuration and
builds the authenticated connection: in-cluster service account, kubeconfig files and contexts, bearer tokens
(re-read when the kubelet rotates them), exec plugins, client certificates, the cluster's CA. The requests are
plain Kubernetes REST calls with wire dicts, made here: the store needs what lightkube's resource API leaves out
(`DeleteOptions` preconditions and the deleted object, `allowWatchBookmarks`, resuming a watch from its own position
rather than from "now" after a 410), and dicts in, dicts out keeps every object exactly as stored.

URL (`parse_url`): `kube://` finds the configuration as client-go does: the pod's service account when there is one
(`/var/run/secrets/kubernetes.io/serviceaccount` and `KUBERNETES_SERVICE_HOST`), else the first file named by
`KUBECONFIG`, else `~/.kube/config`. `kube:///path/to/kubeconfig` names the file. Options: `context=NAME` (default:
the file's current context), `group=devplace.io` (see below), `timeout=SECONDS` per request (default 30).

Kinds: each kind is one resource, `/apis/<group>/<version>/[namespaces/<ns>/]<plural>` (`/api/v1/...` for core kinds),
from `api.registry`. Configuration and Instance are served in two groups (`devplace.io/v1alpha1`, `akri.sh/v0`); on a
cluster those are two CRDs, and the store reads one: by default `akri.sh/v0`, the CRDs an Akri user's Configurations
live in (this backend is for clusters that replace Akri), or with `group=devplace.io` devplace's own. Every other kind
has one group. Objects are written with their resource's apiVersion whatever the caller's says, so everything the
store writes is where it reads.

Semantics, mapped onto the Kubernetes API:
- create = POST; update = PUT carrying `metadata.resourceVersion` (a stale one is the server's 409 -> `Conflict`);
  delete = DELETE with `DeleteOptions.preconditions.resourceVersion` when given; it answers the object as last
  stored. (On a cluster, deleting a Pod a kubelet runs is graceful: the answer carries a `deletionTimestamp` and the
  DELETED event follows when the kubelet is done.)
- Status: Kubernetes ignores `status` in a create or an update of a kind that has a `/status` subresource. When the
  answer shows that the status was not written, the store writes it through `/status` at once, with the resourceVersion
  just returned (two writes, each a compare-and-swap, so a watcher may see the object between them; `devplace
  server` writes both in one and never needs it).
- list: pages of `_PAGE_SIZE` (`limit`/`continue`); the revision is the first page's `resourceVersion`. A continue
  token that expired (410) restarts the list. Label and field selectors go to the server as `labelSelector` and
  `fieldSelector` (parsed here first, so a bad one is refused as by every backend, before a round trip).
- Errors: a `Status` body becomes the devplace error of its code and reason in one place, `remote.error_from_status`
  (409 AlreadyExists/Conflict, 410 Gone, 422 Invalid with the field causes, ...); no answer is `Unavailable`.
- `revision()`: Kubernetes has no call that reads the global revision; a list answers it as its `resourceVersion`
  (etcd's revision when the list was served). The store lists one Configuration (`limit=1`): a kind every devplace
  part may list. (`devplace server` has `/store/revision` too; the store does not rely on it.)
- `compact()`: a Kubernetes API server compacts etcd itself (every 5 minutes by default); a client cannot. Refused
  with `Invalid`.

Watch: one kind at a time (Kubernetes has no watch across kinds: `kind=None` is `Invalid`). Entering opens the
stream (`watch=true`, `allowWatchBookmarks=true`, JSON as client-go asks for it), so the watch is registered on the
server before `async with` returns. `since=None` starts at the head: a `limit=1` list of the same kind, namespace and
selectors gives its revision. `since=0` cannot be asked of Kubernetes (resourceVersion "0" means "any state"): the
store lists, hands out the listed objects first as ADDED events in revision order, then watches from the list's
revision (a compressed replay: every object's current state, then every change). Only a store still at revision 0
(a fresh `devplace server`; a cluster's revision never is) is watched from "0", whose first events are the objects
the server finds then, if any.
Kubernetes answers a watch from a compacted (or future) resourceVersion with 200 and an `ERROR` event carrying a 410
`Status`: the store raises `Gone` when that event is read, i.e. on the first `anext`, not at entry (an informer
relists either way). BOOKMARK events are not delivered: they advance the stream's position, so a reconnect starts
from the bookmark's revision (past events other kinds or filtered-out objects caused, which the server may compact).
When a stream ends (`timeoutSeconds`, a server restart, a dropped connection) the watch reconnects from its position:
the consumer sees every event once, in order, or `Gone`. Reconnects back off through the injected clock: after a
failure (giving up with `Unavailable` after five in a row: `remote.LineStreamWatch`), and after streams that keep
ending with nothing.
"""

from __future__ import annotations

import os
import urllib.parse
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2
from lightkube.config.client_adapter import AsyncClient as connect
from lightkube.config.client_adapter import ConnectionParams
from lightkube.config.kubeconfig import SERVICE_ACCOUNT, KubeConfig, SingleConfig
from lightkube.config.models import User
from lightkube.core.exceptions import ConfigError

from devplace import errors
from devplace.api import registry, revisions
from devplace.clocks import Clock, SystemClock
from devplace.store import base
from devplace.store.base import Event, EventType, ObjectList
from devplace.store.remote import LineStreamWatch, error_from_status

__all__ = ["KubeOptions", "KubeStore", "load_config", "parse_url"]

DEFAULT_KUBECONFIG = "~/.kube/config"
DEFAULT_GROUPS = ("akri.sh",)  # where Configuration and Instance live unless `group=` says otherwise
FIELD_MANAGER = "devplace"
_PAGE_SIZE = 500
_LIST_ATTEMPTS = 3  # a list whose continue token keeps expiring (410) is restarted this many times
_PROBE_KIND = "Configuration"  # what `revision()` lists (one item) to learn the revision
_WATCH_TIMEOUT_SECONDS = 300  # each watch request ends after this; the watch reconnects from its position
_MAX_QUIET_PAUSE = 5.0
_EVENT_TYPES: frozenset[str] = frozenset({"ADDED", "MODIFIED", "DELETED"})
_JSON = "application/json"
_OPTIONS = ("context", "group", "timeout")


# -- configuration ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KubeOptions:
    """What a `kube://` URL says: the kubeconfig file (None: find one), its context, preferred API groups (empty:
    `DEFAULT_GROUPS`)."""

    kubeconfig: str | None = None
    context: str | None = None
    groups: tuple[str, ...] = ()
    timeout: float = 30.0


def parse_url(url: str) -> KubeOptions:
    """`kube://[/PATH/TO/KUBECONFIG][?context=NAME&group=GROUP[,GROUP]&timeout=SECONDS]` (module docstring).

    Anything else is `Invalid` naming the field `store`."""

    def invalid(reason: str) -> errors.Invalid:
        return errors.Invalid.field("store", f"{url!r}: {reason}")

    scheme, sep, rest = url.partition("://")
    if scheme != "kube" or not sep:
        raise invalid("expected kube:// or kube:///PATH/TO/KUBECONFIG")
    path, _, query = rest.partition("?")
    if path and not path.startswith(("/", "~")):
        raise invalid("the kubeconfig path must be absolute (kube:///PATH) or start with ~")
    try:
        params = urllib.parse.parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as e:
        raise invalid(f"the query does not parse: {e}") from e
    unknown = sorted(set(params) - set(_OPTIONS))
    if unknown:
        raise invalid(f"unknown option {unknown[0]!r} (known: {', '.join(_OPTIONS)})")
    repeated = sorted(name for name, values in params.items() if len(values) > 1)
    if repeated:
        raise invalid(f"option {repeated[0]!r} is given more than once")
    option = {name: values[0] for name, values in params.items()}
    for name, value in option.items():
        if not value:
            raise invalid(f"option {name!r} is empty")
    timeout = 30.0
    if "timeout" in option:
        try:
            timeout = float(option["timeout"])
        except ValueError:
            timeout = -1.0
        if not 0 < timeout < float("inf"):
            raise invalid(f"timeout must be a positive number of seconds, not {option['timeout']!r}")
    groups = tuple(g.strip() for g in option.get("group", "").split(",") if g.strip())
    return KubeOptions(urllib.parse.unquote(path) or None, option.get("context"), groups, timeout)


def load_config(options: KubeOptions, *, service_account: str = SERVICE_ACCOUNT) -> SingleConfig:
    """The cluster and credentials to use (module docstring: service account, KUBECONFIG, ~/.kube/config).

    A context names a kubeconfig's entry, so with one the service account is not considered. Refusals (no
    configuration found, an unknown context, a file that does not parse) are `Invalid` naming `store`."""
    try:
        if options.kubeconfig is None and options.context is None and _in_cluster(service_account):
            config = KubeConfig.from_service_account(service_account).get()
        else:
            path = options.kubeconfig or _kubeconfig_from_env()
            config = KubeConfig.from_file(path).get(options.context)
    except (ConfigError, OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        raise errors.Invalid.field("store", f"kube: no usable Kubernetes configuration: {e}") from e
    if config is None:  # pragma: no cover - `get` without a default raises instead
        raise errors.Invalid.field("store", "kube: the kubeconfig has no current context; give ?context=NAME")
    return config


def _in_cluster(service_account: str) -> bool:
    """client-go's rule: a token file and the API server's address in the environment."""
    has_address = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and bool(os.environ.get("KUBERNETES_SERVICE_PORT"))
    return has_address and (Path(service_account) / "token").is_file()


def _kubeconfig_from_env() -> str:
    """The first existing file named by KUBECONFIG (a path list), else ~/.kube/config."""
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    for candidate in listed:
        if Path(candidate).expanduser().is_file():
            return candidate
    return listed[0] if listed else DEFAULT_KUBECONFIG


# -- resources --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resource:
    """Where a kind lives on the API server."""

    kind: str
    api_version: str
    plural: str
    namespaced: bool
    has_status: bool

    def collection(self, namespace: str | None) -> str:
        root = f"/apis/{self.api_version}" if "/" in self.api_version else f"/api/{self.api_version}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"

    def item(self, name: str, namespace: str) -> str:
        if self.namespaced and not namespace:
            raise errors.NotFound(f"{self.kind} /{name} not found (a namespaced kind needs a namespace)")
        if not self.namespaced and namespace:
            raise errors.NotFound(f"{self.kind} {namespace}/{name} not found ({self.kind} is cluster-scoped)")
        return f"{self.collection(namespace)}/{urllib.parse.quote(name, safe='')}"


def resource_of(kind: str, groups: Sequence[str] = ()) -> Resource:
    """The resource of `kind`: its first group version whose group is in `groups`, else the registry's preferred."""
    info = registry.lookup(kind)
    if info.kind != kind:
        raise errors.Invalid.field("kind", f"{kind!r} is not a kind (did you mean {info.kind!r}?)")
    api_version = next(
        (gv for group in groups for gv in info.group_versions if gv.partition("/")[0] == group),
        info.preferred_api_version,
    )
    return Resource(info.kind, api_version, info.plural, info.namespaced, "status" in info.model.model_fields)


# -- the store --------------------------------------------------------------------------------------------------


class KubeStore:
    """A `Store` over a Kubernetes API server (module docstring)."""

    def __init__(
        self,
        config: SingleConfig,
        *,
        clock: Clock | None = None,
        timeout: float = 30.0,
        groups: Sequence[str] = DEFAULT_GROUPS,
    ) -> None:
        self.config = config if config.user is not None else config._replace(user=User())  # no credentials
        self._clock = clock or SystemClock()
        self._timeout = timeout
        self._groups = tuple(groups) or DEFAULT_GROUPS
        self._resources: dict[str, Resource] = {}
        self._client: httpx2.AsyncClient | None = None
        self._watches: set[_KubeWatch] = set()
        self._closed = False

    @classmethod
    def from_url(cls, url: str, *, clock: Clock | None = None) -> KubeStore:
        options = parse_url(url)
        return cls(load_config(options), clock=clock, timeout=options.timeout, groups=options.groups)

    @property
    def server(self) -> str:
        return str(self.config.cluster.server)

    # -- plumbing -----------------------------------------------------------------------------------------------

    def _http(self) -> httpx2.AsyncClient:
        if self._closed:
            raise errors.Unavailable("store is closed")
        if self._client is None:
            params = ConnectionParams(timeout=httpx2.Timeout(self._timeout))
            try:
                self._client = connect(self.config, params)
            except (ConfigError, OSError, ValueError) as e:  # unreadable CA or client certificate files
                raise errors.Invalid.field("store", f"kube: cannot connect to {self.server}: {e}") from e
        return self._client

    def _resource(self, kind: str) -> Resource:
        found = self._resources.get(kind)
        if found is None:
            found = self._resources[kind] = resource_of(kind, self._groups)
        return found

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
    ) -> Any:
        content = None if body is None else base.encode_json(body)
        headers = {"Accept": _JSON}
        if content is not None:
            headers["Content-Type"] = _JSON
        try:
            response = await self._http().request(method, path, content=content, params=params, headers=headers)
        except httpx2.TransportError as e:
            raise errors.Unavailable(f"the Kubernetes API server at {self.server} did not answer: {e!r}") from e
        if response.status_code >= 400:
            raise error_from_status(response.status_code, _json_or_none(response), response.text[:200])
        try:
            return base.decode_json(response.content)
        except ValueError as e:
            raise errors.Unavailable(f"the Kubernetes API server answered {method} {path} with no JSON") from e

    def _body(self, obj: Mapping[str, Any], resource: Resource) -> dict[str, Any]:
        body = dict(obj)
        body["apiVersion"] = resource.api_version
        return body

    async def _write_status(
        self, resource: Resource, written: dict[str, Any], wanted: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Kubernetes ignored `status` in the write that returned `written`: write it through `/status`."""
        if not resource.has_status or "status" not in wanted or written.get("status") == wanted.get("status"):
            return written
        meta = written["metadata"]
        body = {**written, "status": wanted["status"]}
        path = resource.item(meta["name"], meta.get("namespace") or "") + "/status"
        result: dict[str, Any] = await self._call("PUT", path, body=body, params={"fieldManager": FIELD_MANAGER})
        return result

    # -- Store protocol -------------------------------------------------------------------------------------------

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        key = base.key_of(obj)  # the same refusals as every backend, before a round trip
        resource = self._resource(key.kind)
        namespace = key.namespace or (registry.DEFAULT_NAMESPACE if resource.namespaced else "")
        path = resource.collection(namespace)
        created = await self._call("POST", path, body=self._body(obj, resource), params={"fieldManager": FIELD_MANAGER})
        return await self._write_status(resource, created, obj)

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        resource = self._resource(kind)
        result: dict[str, Any] = await self._call("GET", resource.item(name, namespace or ""))
        return result

    async def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None, *, fields: str | None = None
    ) -> ObjectList:
        resource = self._resource(kind)
        base.parse_filters(kind, namespace, selector, fields)  # the same refusals as every backend
        if (resource.namespaced and namespace == "") or (not resource.namespaced and namespace):
            return ObjectList([], await self.revision())  # that scope cannot hold this kind
        params = _selector_params(selector, fields)
        for attempt in range(_LIST_ATTEMPTS):
            try:
                return await self._list_pages(resource, namespace, params)
            except errors.Gone:  # the continue token expired between two pages: start again
                if attempt == _LIST_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def _list_pages(self, resource: Resource, namespace: str | None, params: dict[str, str]) -> ObjectList:
        path = resource.collection(namespace)
        items: list[dict[str, Any]] = []
        revision: int | None = None
        query = {**params, "limit": str(_PAGE_SIZE)}
        while True:
            page = await self._call("GET", path, params=query)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            if revision is None:
                revision = _list_revision(meta)
            token = meta.get("continue")
            if not token:
                return ObjectList(items, revision)
            query = {**params, "limit": str(_PAGE_SIZE), "continue": str(token)}

    async def _head(self, resource: Resource, namespace: str | None, params: Mapping[str, str]) -> int:
        """The revision a list of `resource` is served at: the cheapest read that tells it (`limit=1`)."""
        page = await self._call("GET", resource.collection(namespace), params={**params, "limit": "1"})
        return _list_revision(page.get("metadata") or {})

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        key = base.key_of(obj)
        base.resource_version_of(obj)  # the same refusals as every backend, before a round trip
        resource = self._resource(key.kind)
        namespace = key.namespace or (registry.DEFAULT_NAMESPACE if resource.namespaced else "")
        path = resource.item(key.name, namespace)
        updated = await self._call("PUT", path, body=self._body(obj, resource), params={"fieldManager": FIELD_MANAGER})
        return await self._write_status(resource, updated, obj)

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        resource = self._resource(kind)
        body = None
        if resource_version is not None:
            revisions.parse_revision("resourceVersion", resource_version)
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": resource_version}}
        result: dict[str, Any] = await self._call("DELETE", resource.item(name, namespace or ""), body=body)
        return result

    async def revision(self) -> int:
        return await self._head(self._resource(_PROBE_KIND), None, {})

    async def compact(self, revision: int) -> None:
        revisions.parse_revision("revision", revision)
        raise errors.Invalid(
            "a Kubernetes API server compacts its history itself (kube-apiserver --etcd-compaction-interval); "
            "the kube store cannot compact"
        )

    async def close(self) -> None:
        self._closed = True
        for watch in list(self._watches):
            await watch._disconnect()
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        *,
        since: int | None = None,
        selector: str | None = None,
        fields: str | None = None,
    ) -> _KubeWatch:
        return _KubeWatch(self, kind, namespace, since, selector, fields)


class _KubeWatch(LineStreamWatch):
    """One watch of a `KubeStore` (module docstring): an HTTP stream opened on entry, reopened from its position
    (the last delivered event's or bookmark's revision) when it ends."""

    def __init__(
        self,
        store: KubeStore,
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
        self._position = -1  # events up to here were delivered (or a bookmark said there are none)
        self._floor = -1  # events at or below this revision are replays of a reconnect: skipped
        self._listed: deque[Event] = deque()  # a since=0 watch's listed objects, handed out first
        self._response: httpx2.Response | None = None
        self._lines: Any = None  # the open response's line iterator
        self._failures = 0  # failed attempts in a row
        self._quiet = 0  # streams in a row that ended cleanly without moving the position

    async def __aenter__(self) -> _KubeWatch:
        store = self._store
        store._http()  # Unavailable when closed
        kind, namespace, selector, fields = self._args
        since = base.watch_since(self._since)
        if kind is None:
            raise errors.Invalid.field("kind", "a Kubernetes API server watches one kind at a time")
        base.parse_filters(kind, namespace, selector, fields)  # the same refusals as every backend
        resource = store._resource(kind)
        if (resource.namespaced and namespace == "") or (not resource.namespaced and namespace):
            raise errors.Invalid.field("namespace", f"{kind} cannot be watched in namespace {namespace!r}")
        filters = _selector_params(selector, fields)
        self._path = resource.collection(namespace)
        self._params = {
            **filters,
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(_WATCH_TIMEOUT_SECONDS),
        }
        if since is None:
            start = await store._head(resource, namespace, filters)
        elif since == 0:
            listing = await store.list(kind, namespace, selector, fields=fields)
            listed = (Event("ADDED", obj, _revision_of(obj)) for obj in listing.items)
            self._listed = deque(sorted(listed, key=lambda e: e.revision))
            start = listing.revision
        else:
            start = since
        self._revision = 0 if since == 0 else start
        self._position = start
        store._watches.add(self)
        try:
            await self._connect()
        except httpx2.TransportError as e:
            store._watches.discard(self)
            raise errors.Unavailable(
                f"watch {self._path}: the API server at {store.server} did not answer: {e!r}"
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
        if self._listed:
            self._check_open()
            return self._listed.popleft()
        while True:
            self._check_open()
            if self._lines is None:
                await self._reconnect()
                continue
            try:
                line: str = await anext(self._lines)
            except StopAsyncIteration:
                # The stream ended (timeoutSeconds, a server restart): resume from the position. A server (or a
                # proxy) that keeps ending streams at once must not turn this into a busy loop: back off.
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
            type_, obj, revision = _parse_event(line)
            if type_ == "BOOKMARK":
                if revision > self._position:
                    self._position = revision
                    self._quiet = 0
                continue
            if revision <= self._floor:
                continue  # delivered before the reconnect
            self._position = max(self._position, revision)
            self._quiet = 0
            return Event(type_, obj, revision)

    async def _connect(self) -> None:
        """Open the stream from the position; a refusal raises its devplace error."""
        store = self._store
        client = store._http()
        params = {**self._params, "resourceVersion": str(self._position)}
        request = client.build_request(
            "GET",
            self._path,
            params=params,
            headers={"Accept": _JSON},
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
        self._floor = self._position
        self._failures = 0
        self._quiet += 1

    def _server(self) -> str:
        return self._store.server

    def _closed(self) -> bool:
        return self._store._closed

    def _clock(self) -> Clock:
        return self._store._clock


def _parse_event(line: str) -> tuple[Any, dict[str, Any], int]:
    """(type, object, revision) of one watch line; an ERROR event raises the error its Status stands for."""
    try:
        payload = base.decode_json(line)
        type_ = payload["type"]
        obj = payload["object"]
    except (ValueError, KeyError, TypeError) as e:
        raise errors.Unavailable(f"the API server sent a malformed watch event: {line[:200]!r}") from e
    if type_ == "ERROR":
        status = obj if isinstance(obj, Mapping) else {}
        raise error_from_status(int(status.get("code") or 500), status)
    if type_ != "BOOKMARK" and type_ not in _EVENT_TYPES:
        raise errors.Unavailable(f"the API server sent an unknown watch event type {type_!r}")
    revision = _revision_of(obj) if isinstance(obj, Mapping) else -1
    if revision < 0:
        raise errors.Unavailable(f"the API server sent a watch event without a revision: {line[:200]!r}")
    event_type: EventType | str = type_
    return event_type, obj, revision


def _revision_of(obj: Mapping[str, Any]) -> int:
    try:
        return int(str((obj.get("metadata") or {}).get("resourceVersion")))
    except (TypeError, ValueError):
        return -1


def _list_revision(meta: Mapping[str, Any]) -> int:
    try:
        return int(meta["resourceVersion"])
    except (KeyError, TypeError, ValueError) as e:
        raise errors.Unavailable(f"the API server answered a list without a resourceVersion: {dict(meta)!r}") from e


def _selector_params(selector: str | None, fields: str | None) -> dict[str, str]:
    params = {}
    if selector:
        params["labelSelector"] = selector
    if fields:
        params["fieldSelector"] = fields
    return params


def _json_or_none(response: httpx2.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
