"""The shells around `server.authz`: a middleware that authenticates and authorizes each request, and a store wrapper
that checks each write a node identity's request makes.

`AccessGuard` (ASGI middleware, in front of the body reader): authenticates the request (`server.authn.Auth`):
bad credentials are 401 `Unauthorized`, none at all are 401 except on /healthz, /livez, /readyz, /version and the
dashboard's files (/ui). Then it asks `authz.authorize` with the request's `authz.action_of`; a refusal is 403
`Forbidden`, a `Status` whose message names the rule. It lists Configurations (to know which ConfigMaps and Secrets
they name) only when a node identity reads one of those. An allowed request runs with its principal in a context
variable and its user in `scope["devplace.user"]` (the watch limit counts by it).

`GuardedStore` wraps the store the routes use. For a request of a node identity it asks `authz.admit` on every
operation: the object read for a Pod get, the object to create, the stored object and its replacement for an update,
the stored object for a delete; with, when `authz.needs_configuration` says so (a node creating an Instance or
changing its capacity), the Configuration the Instance names, read from the store as it is then. An update is
checked against the stored object only when that is the revision the
update replaces (else the store would refuse it with `Conflict` anyway, and so does the wrapper, without asking);
a delete is sent with the revision checked as its precondition. So what `admit` saw is exactly what is replaced:
a write that slips in between makes the compare-and-swap fail, never pass unchecked. Requests of admins, and calls
outside any request, pass straight through.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from devplace import errors
from devplace.server import _authz as authz
from devplace.server import _statuses as http_errors
from devplace.server._authn import Auth
from devplace.server._authz import Identity, Role
from devplace.store import DelegatingStore, Store, key_of, resource_version_of

USER_KEY = "devplace.user"
"""The ASGI scope key the guard sets to the authenticated user's name."""

log = logging.getLogger(__name__)
Refuse = Callable[[errors.DevplaceError, Scope], ASGIApp]


@dataclass(frozen=True)
class Principal:
    identity: Identity
    role: Role


_PRINCIPAL: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("devplace_principal", default=None)


def _unauthorized(message: str) -> ASGIApp:
    return JSONResponse(http_errors.status_body(errors.Unauthenticated(message)), status_code=401)


class AccessGuard:
    """ASGI middleware: authentication and request authorization (module docstring)."""

    def __init__(self, app: ASGIApp, auth: Auth, store: Store, refuse: Refuse) -> None:
        self.app = app
        self.auth = auth
        self.store = store
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        action = authz.action_of(scope["method"], scope["path"], scope.get("query_string", b"").decode("latin-1"))
        try:
            identity = self.auth.authenticate(scope.get("headers") or [], scope.get("client"))
        except errors.Unauthenticated as e:
            await _unauthorized(f"Unauthorized: {e}")(scope, receive, send)
            return
        if identity is None:
            if action.area == "public":
                await self.app(scope, receive, send)
                return
            await _unauthorized("Unauthorized: send a bearer token or a client certificate")(scope, receive, send)
            return
        role = authz.role_of(identity)
        referenced: frozenset[authz.Source] = frozenset()
        try:
            if authz.needs_sources(role, action):
                referenced = await referenced_sources(self.store)
            decision = authz.authorize(role, action, referenced)
        except errors.DevplaceError as e:
            await self.refuse(e, scope)(scope, receive, send)
            return
        if isinstance(decision, authz.Denied):
            message = authz.forbidden_message(identity, action.verb, action.describe(), decision)
            await self.refuse(errors.Forbidden(message), scope)(scope, receive, send)
            return
        token = _PRINCIPAL.set(Principal(identity, role))
        try:
            await self.app({**scope, USER_KEY: identity.user}, receive, send)
        finally:
            _PRINCIPAL.reset(token)


async def referenced_sources(store: Store) -> frozenset[authz.Source]:
    """Every ConfigMap and Secret some Configuration's discoveryProperties name, by the agent's own rule."""
    from devplace.agent import references

    found: set[authz.Source] = set()
    for obj in (await store.list("Configuration")).items:
        try:
            found |= references(obj)
        except errors.Invalid:
            continue
    return frozenset(found)


def _check(
    op: authz.Op,
    kind: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    configuration: Mapping[str, Any] | None = None,
) -> None:
    principal = _PRINCIPAL.get()
    if principal is None or principal.role.name == "admin":
        return
    decision = authz.admit(principal.role, op, kind, before, after, configuration=configuration)
    if isinstance(decision, authz.Denied):
        obj = after if after is not None else before
        meta = (obj or {}).get("metadata") or {}
        name = f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
        message = authz.forbidden_message(principal.identity, op, f"{kind} {name}", decision)
        log.info("refused: %s", message)
        raise errors.Forbidden(message)


def principal() -> Principal | None:
    """Who the request being served comes from (None: authentication is off, or outside a request)."""
    return _PRINCIPAL.get()


def _guarded() -> bool:
    principal = _PRINCIPAL.get()
    return principal is not None and principal.role.name != "admin"


class GuardedStore(DelegatingStore):
    """A `Store` that asks `authz.admit` for every operation of a non-admin request (module docstring)."""

    async def _configuration(
        self, op: authz.Op, kind: str, before: Mapping[str, Any] | None, after: Mapping[str, Any]
    ) -> Mapping[str, Any] | None:
        """The Configuration an Instance names, when `admit` needs it for this write (None: none, or not needed)."""
        principal = _PRINCIPAL.get()
        if principal is None or not authz.needs_configuration(principal.role, op, kind, before, after):
            return None
        spec = after.get("spec")
        name = spec.get("configurationName") if isinstance(spec, Mapping) else None
        if not isinstance(name, str) or not name:
            return None
        try:
            return await self.inner.get("Configuration", name, key_of(after).namespace)
        except errors.NotFound:
            return None

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        if _guarded():
            kind = key_of(obj).kind
            _check("create", kind, None, obj, await self._configuration("create", kind, None, obj))
        return await self.inner.create(obj)

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        obj = await self.inner.get(kind, name, namespace)
        if _guarded():
            _check("get", kind, obj, None)
        return obj

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        if _guarded():
            key = key_of(obj)
            expected = resource_version_of(obj)
            current = await self.inner.get(key.kind, key.name, key.namespace)
            stored = int(str(current["metadata"]["resourceVersion"]))
            if stored != expected:
                raise errors.Conflict(
                    f"Operation cannot be fulfilled on {key}: the object has been modified; please apply your changes "
                    f"to the latest version and try again (resourceVersion {expected} is stale, current is {stored})"
                )
            _check("update", key.kind, current, obj, await self._configuration("update", key.kind, current, obj))
        return await self.inner.update(obj)

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        if _guarded():
            current = await self.inner.get(kind, name, namespace)
            stored = str(current["metadata"]["resourceVersion"])
            if resource_version is not None and resource_version != stored:
                raise errors.Conflict(
                    f"{kind} {namespace + '/' if namespace else ''}{name}: precondition failed: resourceVersion "
                    f"{resource_version} is stale (current is {stored})"
                )
            _check("delete", kind, current, None)
            resource_version = stored  # what was checked is what is deleted
        return await self.inner.delete(kind, name, namespace, resource_version=resource_version)
