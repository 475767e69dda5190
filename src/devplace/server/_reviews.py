"""What an identity may do, asked by the identity itself: `kubectl auth can-i` and `kubectl auth whoami`.

Kubernetes answers these with review kinds that are created, answered and never stored; devplace does the same:

    POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews   SelfSubjectAccessReview  (kubectl auth can-i VERB RES)
    POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews    SelfSubjectRulesReview   (kubectl auth can-i --list)
    POST /apis/authentication.k8s.io/v1/selfsubjectreviews        SelfSubjectReview        (kubectl auth whoami)

The answer is devplace's own authorization (`server.authz`), for the identity the request comes from: the review's
`spec.resourceAttributes` (verb, group, resource, subresource, namespace, name) or `nonResourceAttributes` (path,
verb) become the request `authz.authorize` decides, and `status` says `allowed` (or `denied`) with the rule's reason.
What `authz.admit` decides later from an object itself (a node writing only its own Pods' status) cannot be known
without the object; the review answers what the request may ask, as Kubernetes' does for RBAC. With authentication
off every request may do anything, so every review is allowed. devplace stores RBAC objects (Role, ClusterRole, ...)
without enforcing them, so they change no answer.

Bodies are JSON, YAML, or protobuf: kubectl 1.32 and later send these reviews as `application/vnd.kubernetes.protobuf`
(`server.protobufs` reads the few fields a review has). The answer is JSON, which kubectl accepts. Every
authenticated identity may ask (`authz.REVIEW_PATHS`), as Kubernetes' `system:basic-user` role allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from devplace import errors
from devplace.api import lookup_plural
from devplace.server import _authz as authz
from devplace.server import _guards as guards
from devplace.server import _protobufs as protobufs
from devplace.server._bodies import decode_body
from devplace.store import Store

AUTHORIZATION = "authorization.k8s.io/v1"
AUTHENTICATION = "authentication.k8s.io/v1"

REVIEWS: dict[str, tuple[str, str]] = {
    "selfsubjectaccessreviews": (AUTHORIZATION, "SelfSubjectAccessReview"),
    "selfsubjectrulesreviews": (AUTHORIZATION, "SelfSubjectRulesReview"),
    "selfsubjectreviews": (AUTHENTICATION, "SelfSubjectReview"),
}
"""resource -> (group/version, kind) of each review (discovery lists them: `server.discoveries`)."""

WHOAMI_VERSIONS = (AUTHENTICATION, "authentication.k8s.io/v1beta1")
"""Where SelfSubjectReview is served: v1, and v1beta1 for kubectl 1.27, which asks only for that."""

_NO_AUTH = "devplace serves this API without authentication: every request may do anything"
_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
"""The verbs a review may name (`*`: every one of them)."""
_ATTRIBUTES = ("namespace", "verb", "group", "version", "resource", "subresource", "name")
"""A ResourceAttributes' string fields, in their protobuf field order (1..7)."""


def _protobuf_review(raw: bytes, kind: str) -> dict[str, Any]:
    """The JSON form of a review sent as protobuf: its spec's attributes (the rest of a review is the answer's)."""
    sent = protobufs.envelope(raw)
    if sent.kind != kind:
        raise errors.Malformed(f"the protobuf body is a {sent.kind or 'nameless kind'}, not a {kind}")
    review = protobufs.message_fields(sent.raw)
    if kind != "SelfSubjectAccessReview":  # a rules review's spec is its namespace; a SelfSubjectReview has none
        spec = protobufs.message(review, 2) or {}
        namespace = protobufs.text(spec, 1) if kind == "SelfSubjectRulesReview" else ""
        return {
            "apiVersion": sent.api_version,
            "kind": sent.kind,
            "spec": {"namespace": namespace} if namespace else {},
        }
    spec = protobufs.message(review, 2) or {}
    out: dict[str, Any] = {}
    resource = protobufs.message(spec, 1)
    if resource is not None:
        out["resourceAttributes"] = {
            name: value for i, name in enumerate(_ATTRIBUTES, 1) if (value := protobufs.text(resource, i))
        }
    other = protobufs.message(spec, 2)
    if other is not None:
        out["nonResourceAttributes"] = {"path": protobufs.text(other, 1), "verb": protobufs.text(other, 2)}
    return {"apiVersion": sent.api_version, "kind": sent.kind, "spec": out}


async def _review_body(request: Request, kind: str) -> dict[str, Any]:
    raw = await request.body()
    content_type = request.headers.get("content-type")
    if (content_type or "").split(";", 1)[0].strip().lower() == protobufs.MEDIA_TYPE:
        return _protobuf_review(raw, kind)
    if not raw.strip():
        return {"apiVersion": REVIEWS[_plural(request)][0], "kind": kind}
    return decode_body(raw, content_type)


def _plural(request: Request) -> str:
    return request.url.path.rstrip("/").rsplit("/", 1)[-1]


def _string(spec: Mapping[str, Any], field: str, where: str) -> str:
    value = spec.get(field, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise errors.Invalid.field(f"{where}.{field}", "must be a string")
    return value


def _actions(spec: Mapping[str, Any]) -> list[authz.Action]:
    """The requests a review's spec asks about, as `authz.action_of` would read them (verb `*`: one per verb)."""
    attributes = spec.get("resourceAttributes")
    other = spec.get("nonResourceAttributes")
    if isinstance(attributes, Mapping):
        where = "spec.resourceAttributes"
        verb = _string(attributes, "verb", where)
        plural = _string(attributes, "resource", where)
        namespace = _string(attributes, "namespace", where) or None
        name = _string(attributes, "name", where) or None
        subresource = _string(attributes, "subresource", where) or None
        if verb != "*" and verb not in _VERBS:
            raise errors.Invalid.field(f"{where}.verb", f"{verb!r} is not a verb devplace serves ({', '.join(_VERBS)})")
        try:
            kind: str | None = lookup_plural(plural).kind
        except errors.NotFound:
            kind = None
        path = f"/apis/{_string(attributes, 'group', where) or 'core'}/{plural}"
        verbs: tuple[authz.Verb, ...] = _VERBS if verb == "*" else (verb,)  # type: ignore[assignment]
        return [authz.Action(v, "resource", path, kind, plural, namespace, name, subresource) for v in verbs]
    if isinstance(other, Mapping):
        where = "spec.nonResourceAttributes"
        path = _string(other, "path", where) or "/"
        method = {"get": "GET", "list": "GET", "watch": "GET"}.get(_string(other, "verb", where), "POST")
        return [authz.action_of(method, path)]
    raise errors.Invalid.field("spec", "a review names resourceAttributes or nonResourceAttributes")


async def _decision(store: Store, actions: list[authz.Action]) -> tuple[bool, str]:
    principal = guards.principal()
    if principal is None:
        return True, _NO_AUTH
    for action in actions:
        referenced: frozenset[authz.Source] = frozenset()
        if authz.needs_sources(principal.role, action):
            referenced = await guards.referenced_sources(store)
        decided = authz.authorize(principal.role, action, referenced)
        if isinstance(decided, authz.Denied):
            return False, f"rule {decided.rule}: {decided.reason}"
    return True, f"allowed to {principal.role}"


def _answer(body: Mapping[str, Any], kind: str, api_version: str, status: dict[str, Any]) -> JSONResponse:
    meta = body.get("metadata")
    answer = {
        "kind": kind,
        "apiVersion": api_version,
        "metadata": {"creationTimestamp": None, **(dict(meta) if isinstance(meta, Mapping) else {})},
        "spec": body.get("spec") or {},
        "status": status,
    }
    return JSONResponse(answer, status_code=201)


def _rules(role: authz.Role | None) -> dict[str, Any]:
    """What `kubectl auth can-i --list` shows: rules that summarize a role (a node's are narrower than shown:
    `authz.admit` checks its writes object by object)."""
    everything = {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}
    own = [
        {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews"]},
        {"verbs": ["create"], "apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectrulesreviews"]},
        {"verbs": ["create"], "apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"]},
    ]
    public = {"verbs": ["get"], "nonResourceURLs": sorted(authz.PUBLIC_PATHS)}
    if role is None or role.name == "admin":
        return {"resourceRules": [everything], "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}
    if role.name == "reader":
        reads = {"verbs": ["get", "list", "watch"], "apiGroups": ["*"], "resources": ["*"]}
        return {"resourceRules": [reads, *own], "nonResourceRules": [public]}
    if role.name == "node":
        node_reads = {
            "verbs": ["get", "list", "watch"],
            "apiGroups": ["", "akri.sh", "devplace.io"],
            "resources": ["configurations", "instances", "nodes", "pods"],
        }
        node_writes = {
            "verbs": ["create", "update", "patch", "delete"],
            "apiGroups": ["", "akri.sh", "devplace.io"],
            "resources": ["instances", "nodes", "nodes/status", "pods/status", "configurations/status"],
        }
        return {"resourceRules": [node_reads, node_writes, *own], "nonResourceRules": [public], "incomplete": True}
    return {"resourceRules": own, "nonResourceRules": [public]}


_RESPONSES: dict[int | str, dict[str, Any]] = {
    201: {"description": "the review, answered in its status"},
    400: {"description": "the body does not decode (JSON, YAML or protobuf)"},
    415: {"description": "a body in a media type the server does not read"},
    422: {"description": "the review names no request, or a field of the wrong type"},
}
_BODY = {"requestBody": {"required": False, "content": {"application/json": {"schema": {"type": "object"}}}}}


def router(store: Store) -> APIRouter:
    """The three review routes (module docstring)."""
    api = APIRouter()

    async def access(request: Request) -> Response:
        api_version, kind = REVIEWS["selfsubjectaccessreviews"]
        body = await _review_body(request, kind)
        spec = body.get("spec")
        if not isinstance(spec, Mapping):
            raise errors.Invalid.field("spec", "required: the request to review")
        allowed, reason = await _decision(store, _actions(spec))
        status: dict[str, Any] = {"allowed": allowed, "reason": reason}
        if not allowed:
            status["denied"] = True
        return _answer(body, kind, api_version, status)

    async def rules(request: Request) -> Response:
        api_version, kind = REVIEWS["selfsubjectrulesreviews"]
        body = await _review_body(request, kind)
        principal = guards.principal()
        return _answer(body, kind, api_version, _rules(principal.role if principal else None))

    async def whoami(request: Request) -> Response:
        kind = REVIEWS["selfsubjectreviews"][1]
        await _review_body(request, kind)  # read and checked: a review of another kind is refused
        principal = guards.principal()
        if principal is None:
            user: dict[str, Any] = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}
        else:
            identity = principal.identity
            user = {"username": identity.user, "groups": [*identity.groups, "system:authenticated"]}
            if identity.uid:
                user["uid"] = identity.uid
        asked = request.url.path.split("/apis/", 1)[-1].rsplit("/", 1)[0]
        answer = {"kind": kind, "apiVersion": asked, "metadata": {"creationTimestamp": None}}
        return JSONResponse({**answer, "status": {"userInfo": user}}, status_code=201)

    for plural, handler in (("selfsubjectaccessreviews", access), ("selfsubjectrulesreviews", rules)):
        api.add_api_route(
            f"/apis/{AUTHORIZATION}/{plural}",
            handler,
            methods=["POST"],
            tags=["reviews"],
            summary=f"Answer a {REVIEWS[plural][1]} for the requesting identity (not stored)",
            status_code=201,
            responses=_RESPONSES,
            openapi_extra=_BODY,
        )
    for api_version in WHOAMI_VERSIONS:
        api.add_api_route(
            f"/apis/{api_version}/selfsubjectreviews",
            whoami,
            methods=["POST"],
            tags=["reviews"],
            summary="Who the requesting identity is (SelfSubjectReview; kubectl auth whoami)",
            status_code=201,
            responses=_RESPONSES,
            openapi_extra=_BODY,
        )
    return api
