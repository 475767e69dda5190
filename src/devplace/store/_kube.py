"""The `kube` store backend: devplace's objects as resources of a Kubernetes API server.

Akri users already run a cluster, whose API server (and the etcd under it) is the distributed store they trust. With
`--store kube://` the agent, controller and scheduler keep their objects there: devplace's kinds as custom resources
(the CRDs of `deploy/kubernetes/`), Pods, Nodes, Services, ConfigMaps and Jobs as the cluster's own. No
kube-apiserver can be installed on devplace's build machines, so this backend is tested against `devplace server`,
which speaks the same API (the README says so).

Client: the Kubernetes REST client core shared with the `remote` backend (`store.restclients`: the authenticated
HTTP client, Status-to-error mapping, list paging, the watch's reconnect loop) and the one kubeconfig reader
(`store.kubeconfigs`: in-cluster service account, kubeconfig files and contexts, bearer tokens re-read when the
kubelet rotates them, exec plugins, client certificates, the cluster's CA). The requests are plain Kubernetes REST
calls with wire dicts: the store needs what a typed client's resource API leaves out (`DeleteOptions` preconditions
and the deleted object, `allowWatchBookmarks`, resuming a watch from its own position rather than from "now" after a
410), and dicts in, dicts out keeps every object exactly as stored.

URL (`parse_url`): `kube://` finds the configuration as client-go does: the pod's service account when there is one
(`/var/run/secrets/kubernetes.io/serviceaccount` and `KUBERNETES_SERVICE_HOST`), else the first file named by
`KUBECONFIG`, else `~/.kube/config` (`kubeconfigs.find`). `kube:///path/to/kubeconfig` names the file. Options:
`context=NAME` (default: the file's current context), `group=devplace.io` (see below), `timeout=SECONDS` per request
(default 30). A configuration that cannot be used is `Invalid` naming `store`, with the reader's reason.

Kinds: each kind is one resource, `/apis/<group>/<version>/[namespaces/<ns>/]<plural>` (`/api/v1/...` for core kinds),
from `api.registry`. Configuration and Instance are served in two groups (`devplace.io/v1alpha1`, `akri.sh/v0`); on a
cluster those are two CRDs, and the store reads one: by default `akri.sh/v0`, the CRDs an Akri user's Configurations
live in (this backend is for clusters that replace Akri), or with `group=devplace.io` devplace's own. Every other kind
has one group. Objects are written with their resource's apiVersion whatever the caller's says, so everything the
store writes is where it reads.

Semantics, mapped onto the Kubernetes API:
- create = POST; update = PUT carrying `metadata.resourceVersion` (a stale one is the server's 409 -> `Conflict`);
  delete = DELETE with `DeleteOptions.preconditions.resourceVersion` when given; a custom resource's answer is the
  object as last stored. Most built-in kinds answer a `Status` instead, so the store reads one first, deletes it
  with that resourceVersion as precondition and returns it at the revision read just after. (On a cluster,
  deleting a Pod a kubelet runs is graceful: the answer carries a `deletionTimestamp` and the DELETED event
  follows when the kubelet is done.)
- Status: Kubernetes ignores `status` in a create or an update of a kind that has a `/status` subresource. When the
  answer shows that the status was not written, the store writes it through `/status` at once, with the resourceVersion
  just returned (two writes, each a compare-and-swap, so a watcher may see the object between them; `devplace
  server` writes both in one and never needs it).
- list: pages of `_PAGE_SIZE` (`limit`/`continue`); the revision is the first page's `resourceVersion`. A continue
  token that expired (410) restarts the list (`restclients`). Label and field selectors go to the server as
  `labelSelector` and `fieldSelector` (parsed here first, so a bad one is refused as by every backend, before a
  round trip).
- Errors: a `Status` body becomes the devplace error of its code and reason in one place,
  `restclients.error_from_status` (409 AlreadyExists/Conflict, 410 Gone, 422 Invalid with the field causes, ...);
  no answer is `Unavailable`.
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
failure (giving up with `Unavailable` after five in a row: `restclients.LineStreamWatch`), and after streams that
keep ending with nothing.
"""

from __future__ import annotations

import urllib.parse
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devplace import errors
from devplace.api import DEFAULT_NAMESPACE, parse_field_selector, parse_revision
from devplace.clocks import Clock
from devplace.store import _base as base
from devplace.store import _kubeconfigs as kubeconfigs
from devplace.store._base import Event, ObjectList
from devplace.store._exchanges import Exchanges
from devplace.store._kubeconfigs import SERVICE_ACCOUNT, ServerConfig
from devplace.store._restclients import (
    JSON_PATCH,
    LineStreamWatch,
    Resource,
    RestClient,
    delete_options,
    kind_info,
    list_revision,
    revision_of,
    scope_holds,
    selector_params,
)

DEFAULT_GROUPS = ("akri.sh",)  # where Configuration and Instance live unless `group=` says otherwise
FIELD_MANAGER = "devplace"
_PAGE_SIZE = 500
_PROBE_KIND = "Configuration"  # what `revision()` lists (one item) to learn the revision
_WATCH_TIMEOUT_SECONDS = 300  # each watch request ends after this; the watch reconnects from its position
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


def load_config(options: KubeOptions, *, service_account: str = SERVICE_ACCOUNT) -> ServerConfig:
    """The cluster and credentials to use (`kubeconfigs.find`: service account, the named file, KUBECONFIG,
    ~/.kube/config). Refusals (no configuration found, an unknown context, a file that does not parse, credentials
    that do not read) are `Invalid` naming `store`."""
    try:
        return kubeconfigs.find(options.kubeconfig, options.context, service_account=service_account)
    except errors.Invalid as e:
        raise errors.Invalid.field("store", f"kube: no usable Kubernetes configuration: {e.message}") from e


# -- resources --------------------------------------------------------------------------------------------------


def resource_of(kind: str, groups: Sequence[str] = ()) -> Resource:
    """The resource of `kind`: its first group version whose group is in `groups`, else the registry's preferred."""
    info = kind_info(kind)
    api_version = next(
        (gv for group in groups for gv in info.group_versions if gv.partition("/")[0] == group),
        info.preferred_api_version,
    )
    return Resource(info.kind, api_version, info.plural, info.namespaced, "status" in info.model.model_fields)


# -- the store --------------------------------------------------------------------------------------------------


class KubeStore(RestClient):
    """A `Store` over a Kubernetes API server (module docstring)."""

    _what = "the Kubernetes API server"

    def __init__(
        self,
        config: ServerConfig,
        *,
        clock: Clock | None = None,
        timeout: float = 30.0,
        groups: Sequence[str] = DEFAULT_GROUPS,
    ) -> None:
        super().__init__(config.server, config.credentials, clock=clock, timeout=timeout)
        self.config = config
        self._groups = tuple(groups) or DEFAULT_GROUPS
        self._resources: dict[str, Resource] = {}

    @classmethod
    def from_url(cls, url: str, *, clock: Clock | None = None) -> KubeStore:
        options = parse_url(url)
        return cls(load_config(options), clock=clock, timeout=options.timeout, groups=options.groups)

    # -- plumbing -----------------------------------------------------------------------------------------------

    def _new_client(self) -> Exchanges:
        try:
            return super()._new_client()
        except errors.Invalid as e:  # unreadable CA or client certificate files
            raise errors.Invalid.field("store", f"kube: cannot connect to {self.server}: {e.message}") from e

    def _resource(self, kind: str) -> Resource:
        found = self._resources.get(kind)
        if found is None:
            found = self._resources[kind] = resource_of(kind, self._groups)
        return found

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
        namespace = key.namespace or (DEFAULT_NAMESPACE if resource.namespaced else "")
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
        if not scope_holds(resource.namespaced, namespace):
            return ObjectList([], await self.revision())  # that scope cannot hold this kind
        sent, own_group = group_apart(resource, fields)
        if not own_group:
            return ObjectList([], await self.revision())  # another group's objects: none of them live here
        params = selector_params(selector, sent)
        return await self._list_pages(resource.collection(namespace), params, page_size=_PAGE_SIZE)

    async def _head(self, resource: Resource, namespace: str | None, params: Mapping[str, str]) -> int:
        """The revision a list of `resource` is served at: the cheapest read that tells it (`limit=1`)."""
        page = await self._call("GET", resource.collection(namespace), params={**params, "limit": "1"})
        return list_revision(page.get("metadata") or {})

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        key = base.key_of(obj)
        base.resource_version_of(obj)  # the same refusals as every backend, before a round trip
        resource = self._resource(key.kind)
        namespace = key.namespace or (DEFAULT_NAMESPACE if resource.namespaced else "")
        path = resource.item(key.name, namespace)
        updated = await self._call("PUT", path, body=self._body(obj, resource), params={"fieldManager": FIELD_MANAGER})
        return await self._write_status(resource, updated, obj)

    async def json_patch(
        self,
        kind: str,
        name: str,
        namespace: str,
        ops: Sequence[Mapping[str, Any]],
        *,
        api_version: str | None = None,
    ) -> dict[str, Any]:
        """`store.JsonPatchStore`: the PATCH (Kubernetes applies it by its own compare-and-swap); `api_version` is the
        group version this store serves the kind in, whatever the caller's object said."""
        resource = self._resource(kind)
        namespace = namespace or (DEFAULT_NAMESPACE if resource.namespaced else "")
        path = resource.item(name, namespace)
        body = [dict(op) for op in ops]
        result: dict[str, Any] = await self._call(
            "PATCH", path, body=body, params={"fieldManager": FIELD_MANAGER}, content_type=JSON_PATCH
        )
        return result

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        resource = self._resource(kind)
        path = resource.item(name, namespace or "")
        group = resource.api_version.rpartition("/")[0]
        if "." in group and not group.endswith(".k8s.io"):  # a custom resource: Kubernetes answers the object
            result: dict[str, Any] = await self._call("DELETE", path, body=delete_options(resource_version))
            return result
        # Most built-in kinds answer a `Status`, not the object: read it, delete exactly what was read, and answer it
        # at the revision that followed (the deletion's, unless another write came between).
        current: dict[str, Any] = await self._call("GET", path)
        read = str(current["metadata"]["resourceVersion"])
        if resource_version is not None and resource_version != read:
            base.check_delete_revision(base.Key(kind, namespace, name), read, resource_version)
        answer = await self._call("DELETE", path, body=delete_options(read))
        if isinstance(answer, dict) and answer.get("kind") != "Status":
            return answer
        current["metadata"]["resourceVersion"] = str(await self.revision())
        return current

    async def revision(self) -> int:
        return await self._head(self._resource(_PROBE_KIND), None, {})

    async def compact(self, revision: int) -> None:
        parse_revision("revision", revision)
        raise errors.Invalid(
            "a Kubernetes API server compacts its history itself (kube-apiserver --etcd-compaction-interval); "
            "the kube store cannot compact"
        )

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


def group_apart(resource: Resource, fields: str | None) -> tuple[str | None, bool]:
    """`fields` without its `apiVersion` terms, and whether they hold for `resource`'s objects.

    devplace's API server narrows a list of a kind served in two groups (Configuration, Instance) to one group with
    an `apiVersion` field selector; a Kubernetes API server knows no such field (each group is its own CRD there),
    and every object the kube store reads of a kind is in the one group it reads the kind in. So the terms are
    decided here, all or nothing, and the rest is sent."""
    if not fields:
        return fields, True
    parsed = parse_field_selector(fields)
    own = [r for r in parsed.requirements if r.field == "apiVersion"]
    if not own:
        return fields, True
    rest = ",".join(str(r) for r in parsed.requirements if r.field != "apiVersion")
    return rest or None, all((r.value == resource.api_version) == r.equal for r in own)


class _KubeWatch(LineStreamWatch[KubeStore]):
    """One watch of a `KubeStore` (module docstring): an HTTP stream opened on entry, reopened from its position
    (the last delivered event's or bookmark's revision) when it ends. A watch narrowed to another group than the
    one its kind is read in (`group_apart`) delivers no event."""

    _own_group = True

    async def __anext__(self) -> Event:
        while True:
            event = await super().__anext__()
            if self._own_group:
                return event

    async def __aenter__(self) -> _KubeWatch:
        store = self._store
        store._http()  # Unavailable when closed
        kind, namespace, selector, fields = self._args
        since = base.watch_since(self._since)
        if kind is None:
            raise errors.Invalid.field("kind", "a Kubernetes API server watches one kind at a time")
        base.parse_filters(kind, namespace, selector, fields)  # the same refusals as every backend
        resource = store._resource(kind)
        if not scope_holds(resource.namespaced, namespace):
            raise errors.Invalid.field("namespace", f"{kind} cannot be watched in namespace {namespace!r}")
        sent, self._own_group = group_apart(resource, fields)
        filters = selector_params(selector, sent)
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
            listed = (Event("ADDED", obj, revision_of(obj)) for obj in listing.items)
            self._listed = deque(sorted(listed, key=lambda e: e.revision))
            start = listing.revision
        else:
            start = since
        self._revision = 0 if since == 0 else start
        await self._open(start)
        return self
