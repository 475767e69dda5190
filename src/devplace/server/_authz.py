"""Who may do what on the API server: roles from identities, and the rules every request and every write passes.

Pure: plain data in, a decision out; no HTTP, no store, no clock. The shells are `server.guards` (the middleware that
authenticates a request and asks `authorize`, and the store wrapper that asks `admit` for each operation a node
identity's request makes) and `server.authn` (where identities come from).

Roles, one rule, first match wins (`role_of`):
1. user `system:node:<name>` (Kubernetes' spelling, as in group `system:nodes`) or `node:<name>` -> node `<name>`;
2. group `admin` or `system:masters` -> admin;
3. group `reader` -> reader;
4. anything else: no role (discovery, /healthz and /version only).
So a tokens-file line `t0k3n,alice,1,"admin"` makes alice an admin, and a client certificate with CN
`system:node:node-a` (O `system:nodes`) is node-a's agent. A node name wins over groups: a node identity never gets
more than its node's share.

`authorize(role, action, referenced)` decides a request before its body is read, from `action_of(method, path,
query)`. `admit(role, op, kind, before, after)` decides one store operation of a node identity, with the object as
stored before it and as it would be stored after it (an update's `before` is exactly the object the compare-and-swap
replaces, so the decision holds for what is written). Every refusal is a `Denied` naming its rule:

| rule                          | who    | refuses                                                                    |
|-------------------------------|--------|----------------------------------------------------------------------------|
| no-role                       | any    | everything but discovery, /healthz, /version and the self reviews (`kubectl |
|                               |        | auth can-i`, `whoami`) to an identity without a role                       |
| reader-read-only              | reader | any verb but get, list and watch (also on /v2); /store/compact             |
| store-admin-only              | node   | /store/compact and /store/watch (/store/revision is open to every role)    |
| node-no-fleet                 | node   | the /v2 fleet API                                                          |
| node-kinds                    | node   | kinds an agent or kubelet does not use, and verbs they do not use on others|
| node-no-dry-run               | node   | dry-run writes (agents never send them; a dry run would skip `admit`)      |
| node-own-node                 | node   | creating, writing or deleting another node's Node                          |
| node-own-pods                 | node   | Pods not bound to it (list/watch must select `spec.nodeName=<node>`)       |
| node-pod-status               | node   | a Pod write that changes more than `status`                                |
| node-referenced-sources       | node   | ConfigMaps and Secrets that no Configuration's discoveryProperties name    |
| node-configuration-conditions | node   | a Configuration write that changes more than its own status.conditions     |
| node-instance-create          | node   | creating an Instance that lists another node or has a held slot            |
| node-instance-capacity        | node   | an Instance's size other than its Configuration's capacity: creating one   |
|                               |        | of another capacity, changing capacity to anything else, dropping a free   |
|                               |        | slot below capacity                                                        |
| node-instance-nodes           | node   | `spec.nodes` changes other than adding or removing itself                  |
| node-instance-slots           | node   | a slot change where a holder (before or after) is another node             |
| node-instance-claim           | node   | claiming a slot of an Instance that does not list it before and after the  |
|                               |        | write (joining is a write of its own; the claim follows it)                |
| node-instance-fields          | node   | changing other Instance fields (capacity, free slots and brokerProperties  |
|                               |        | only while it is listed: its agent follows the Configuration)              |
| node-instance-delete          | node   | deleting an Instance another node still lists                              |
| node-own-slices               | node   | writing a ResourceSlice whose spec.nodeName, before or after, is another's |
| node-own-claims               | node   | listing ResourceClaims, or reading one not allocated for it (its           |
|                               |        | allocation's nodeSelector names another node)                              |

What a node identity may do is what `devplace.agent` and the simulated kubelet do, and no more: read Configurations,
Instances, Nodes and ResourceSlices; read its Pods (`spec.nodeName` is itself) and the ConfigMaps and Secrets a
Configuration's discoveryProperties name (by name: list and watch with `metadata.name=<name>` in a namespace); write its
own Node; write its Pods' `status`; write its own DiscoveryFailed / ResourceNameConflict entries (`node: <itself>`) of a
Configuration's status.conditions; create Instances listing only itself with free slots; join and leave Instances
(`spec.nodes`), claim slots of Instances it is listed on and release slots it holds, mark an Instance nobody sees
offline (the offline-since annotation), resize an Instance it is listed on to its Configuration's capacity (free slots
follow the capacity) and write its brokerProperties; delete Instances no other node lists; create, update and delete
ResourceSlices whose `spec.nodeName` is itself (its local pool; a probe slice). This follows Kubernetes' NodeRestriction
admission: a node writes only its own share.

An Instance's size is its Configuration's: `admit` is given the Configuration the Instance names (`configuration`,
read by `server.guards` only when `needs_configuration` says so: a node creating an Instance, or changing its
capacity) and a node's create or capacity change must carry exactly that capacity, so a node can follow a
Configuration's change (the agent's capacity sync) but never resize a shared Instance to anything else. The slots
follow the capacity by the Instance model's own rule (`api.usage_problems`: every slot below capacity exists, a free
one at or beyond it does not), and a node may not drop a free slot below capacity. The Configuration is read apart
from the compare-and-swap that writes the Instance: a node that races an admin's change of the capacity may write
the old or the new value, never a third.

What the server cannot check is whether a node sees a shared device: discovery runs on the node (a camera on its
network, a USB device on its bus) and no Configuration field says which nodes may see what, so a node may join any
Instance (`spec.nodes`), as its agent does when its discovery reports the device. A claim needs the node listed
before and after the write (`node-instance-claim`, as the agent's Allocate does), so a join is always its own write,
seen by every watcher before any claim. A node identity that lies about what it sees gains this: it may list itself
on a shared Instance and then hold its free slots (the other nodes' pods wait for a slot), and it gets the Instance's
brokerProperties in AllocateResponses (which node identities read anyway). It cannot take a held slot, resize the
Instance, remove another node, or delete it while another node lists it; an admin sees it in `spec.nodes`.

Server-managed metadata (resourceVersion, generation, managedFields, uid, creationTimestamp) is ignored when
comparing an update's before and after: the server writes it, not the caller.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qs

from devplace import errors
from devplace.api import lookup_plural, named_node, slot_index

Verb = Literal["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
Area = Literal["public", "discovery", "resource", "store", "fleet", "review", "other"]
Op = Literal["get", "create", "update", "delete"]
Source = tuple[str, str, str]
"""(kind, namespace, name) of a ConfigMap or Secret a Configuration reads."""

READS: frozenset[str] = frozenset({"get", "list", "watch"})
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version", "/ui"})
_PUBLIC_PREFIXES = ("/livez/", "/readyz/", "/ui/")  # single health checks (`server.health`); the dashboard's files
# (`server.ui`: static, no data; the page asks for a token and every request it makes for data carries it)
ADMIN_GROUPS = frozenset({"admin", "system:masters"})
READER_GROUPS = frozenset({"reader"})
NODE_PREFIXES = ("system:node:", "node:")
OFFLINE_SINCE = "devplace.io/offline-since"
"""`agent.instances.OFFLINE_SINCE`, spelled here so the API server does not load the agent (a test checks both)."""
SOURCE_KINDS = frozenset({"ConfigMap", "Secret"})
SERVER_METADATA = frozenset({"resourceVersion", "generation", "managedFields", "uid", "creationTimestamp", "selfLink"})
_DISCOVERY_ROOTS = frozenset({"openapi", "openapi.json", "docs", "redoc"})
REVIEW_PATHS = frozenset(
    {
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        "/apis/authentication.k8s.io/v1beta1/selfsubjectreviews",
    }
)
"""What an identity may ask about itself (`kubectl auth can-i`, `kubectl auth whoami`; `server.reviews`): every
authenticated identity may, as Kubernetes' `system:basic-user` role lets it."""


@dataclass(frozen=True)
class Identity:
    """Who a request comes from: a user, its uid and groups (from a token, or a client certificate's CN and O)."""

    user: str
    groups: tuple[str, ...] = ()
    uid: str = ""


@dataclass(frozen=True)
class Role:
    """`admin`, `reader`, `node` (then `node` names it) or `none`."""

    name: Literal["admin", "reader", "node", "none"]
    node: str = ""

    def __str__(self) -> str:
        return f"node:{self.node}" if self.name == "node" else self.name


def role_of(identity: Identity) -> Role:
    """The one rule of the module docstring."""
    for prefix in NODE_PREFIXES:
        if identity.user.startswith(prefix) and len(identity.user) > len(prefix):
            return Role("node", identity.user[len(prefix) :])
    groups = set(identity.groups)
    if groups & ADMIN_GROUPS:
        return Role("admin")
    if groups & READER_GROUPS:
        return Role("reader")
    return Role("none")


@dataclass(frozen=True)
class Action:
    """What a request asks: a verb on a path, and for the resource API the kind, namespace, name and subresource.

    `plural` is kept when the kind is unknown (`kind` None). `fields` is a list or watch's field selector."""

    verb: Verb
    area: Area
    path: str
    kind: str | None = None
    plural: str = ""
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    fields: str = ""
    dry_run: bool = False

    @property
    def writes(self) -> bool:
        return self.verb not in READS

    def describe(self) -> str:
        what = self.kind or self.plural or self.path
        if self.name:
            where = f"{self.namespace}/{self.name}" if self.namespace else self.name
            what = f"{what} {where}"
        elif self.namespace:
            what = f"{what} in namespace {self.namespace}"
        if self.subresource:
            what = f"{what} ({self.subresource})"
        return what


@dataclass(frozen=True)
class Allowed:
    pass


@dataclass(frozen=True)
class Denied:
    """A refusal: `rule` is the rule's name (module docstring), `reason` says what broke it."""

    rule: str
    reason: str


ALLOWED = Allowed()
Decision = Allowed | Denied


def forbidden_message(identity: Identity, verb: str, what: str, denied: Denied) -> str:
    """The `message` of the 403 `Status`, in Kubernetes' shape, naming the rule that refused."""
    return f'{what} is forbidden: User "{identity.user}" cannot {verb} it: rule {denied.rule}: {denied.reason}'


# -- requests ---------------------------------------------------------------------------------------------------------


_WRITE_VERBS: dict[str, Verb] = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _flag(values: list[str] | None) -> bool:
    return values is not None and values[-1].strip().lower() in ("1", "true", "yes")


def action_of(method: str, path: str, query: str = "") -> Action:
    """The action of a request, from its method, (decoded) path and raw query string."""
    params = parse_qs(query, keep_blank_values=True)
    method = method.upper()
    segments = [s for s in path.split("/") if s]
    fields = (params.get("fieldSelector") or [""])[-1]
    dry = bool(params.get("dryRun"))
    reading = method in ("GET", "HEAD", "OPTIONS")
    write_verb = _WRITE_VERBS.get(method, "update")  # another method is refused (405) after authorization
    if path in PUBLIC_PATHS or path.startswith(_PUBLIC_PREFIXES):
        return Action("get" if reading else write_verb, "public", path)
    if path.rstrip("/") in REVIEW_PATHS:
        return Action("get" if reading else write_verb, "review", path)
    if not segments or segments[0] in _DISCOVERY_ROOTS:
        return Action("get" if reading else write_verb, "discovery", path)
    head = segments[0]
    if head == "v2":
        return Action("get" if reading else write_verb, "fleet", path)
    if head == "store":
        operation = segments[1] if len(segments) > 1 else ""
        verb: Verb = ("watch" if operation == "watch" else "get") if reading else write_verb
        return Action(verb, "store", path, name=operation, fields=fields)
    if head == "sim":  # `devplace up`'s simulation control (`demo.ups`): reading it is `get nodes`, a step `update
        # nodes`; as subresource `sim`, so a node identity reads it as it reads Nodes but runs no step (steps touch all)
        return Action("get" if reading else "update", "resource", path, "Node", "nodes", subresource="sim")
    if head not in ("api", "apis"):
        return Action("get" if reading else write_verb, "other", path)
    rest = segments[2:] if head == "api" else segments[3:]
    if not rest:  # /api, /api/v1, /apis, /apis/group, /apis/group/version
        return Action("get" if reading else write_verb, "discovery", path)
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = "/".join(rest[2:]) or None
    try:
        kind: str | None = lookup_plural(plural).kind
    except errors.NotFound:
        kind = None
    if reading:
        verb = "get" if name else ("watch" if _flag(params.get("watch")) else "list")
    elif write_verb == "delete" and name is None:
        verb = "deletecollection"
    else:
        verb = write_verb
    return Action(verb, "resource", path, kind, plural, namespace, name, subresource, fields, dry)


def needs_sources(role: Role, action: Action) -> bool:
    """Whether `authorize` needs the set of referenced ConfigMaps and Secrets for this request."""
    return role.name == "node" and action.area == "resource" and action.kind in SOURCE_KINDS and not action.writes


def authorize(role: Role, action: Action, referenced: frozenset[Source] = frozenset()) -> Decision:
    """Whether `role` may make the request `action` (module docstring). `referenced` is what Configurations read,
    needed only when `needs_sources` says so. An `Allowed` write of a node identity is further checked, operation by
    operation, by `admit`."""
    if action.area in ("public", "review"):  # reviews: about the identity itself, to every authenticated one
        return ALLOWED
    if role.name == "none":
        if action.area == "discovery" and not action.writes:
            return ALLOWED
        return Denied("no-role", "the identity has no role (roles come from groups admin, reader, or a node name)")
    if action.area == "discovery" and not action.writes:
        return ALLOWED
    if role.name == "admin":
        return ALLOWED
    if role.name == "reader":
        if action.writes:
            return Denied("reader-read-only", f"a reader may get, list and watch, not {action.verb}")
        return ALLOWED
    return _authorize_node(role.node, action, referenced)


def _authorize_node(node: str, action: Action, referenced: frozenset[Source]) -> Decision:
    if action.area == "fleet":
        return Denied("node-no-fleet", "node identities have no access to the fleet API")
    if action.area == "store":
        if action.name == "revision" and not action.writes:
            return ALLOWED
        return Denied("store-admin-only", f"/store/{action.name} is for admins only")
    if action.area != "resource" or action.kind is None:
        return Denied("node-kinds", f"a node does not use {action.path}")
    kind = action.kind
    if action.writes and action.dry_run:
        return Denied("node-no-dry-run", "node identities do not send dry-run writes")
    if not action.writes:
        return _node_read(node, action, referenced)
    if kind == "Node":
        if action.name is not None and action.name != node:
            return Denied("node-own-node", f"node {node} may write only its own Node, not {action.name}")
        if action.verb == "deletecollection" or action.subresource not in (None, "status"):
            return Denied("node-kinds", f"a node does not {action.verb} {action.describe()}")
        return ALLOWED
    if kind == "Instance":
        if action.verb == "deletecollection" or action.subresource is not None:
            return Denied("node-kinds", f"a node does not {action.verb} {action.describe()}")
        return ALLOWED
    if kind == "ResourceSlice":
        if action.verb == "deletecollection" or action.subresource is not None:
            return Denied("node-kinds", f"a node does not {action.verb} {action.describe()}")
        return ALLOWED  # the object decides: `admit` (node-own-slices)
    if kind == "Configuration":
        if action.verb in ("update", "patch") and action.subresource in (None, "status"):
            return ALLOWED
        return Denied(
            "node-configuration-conditions", f"a node only writes conditions of a Configuration, not {action.verb}"
        )
    if kind == "Pod":
        if action.verb in ("update", "patch") and action.subresource in (None, "status"):
            return ALLOWED
        return Denied("node-pod-status", f"a node only writes the status of its Pods, not {action.verb}")
    return Denied("node-kinds", f"a node does not write {kind}s")


def _selected(fields: str, field: str) -> str | None:
    """The value a field selector requires `field` to equal (`field=v` or `field==v`), or None."""
    for term in fields.split(","):
        key, sep, value = term.partition("==") if "==" in term else term.partition("=")
        if sep and not key.endswith("!") and key.strip() == field:
            return value.strip()
    return None


def _node_read(node: str, action: Action, referenced: frozenset[Source]) -> Decision:
    kind = action.kind
    if kind in ("Configuration", "Instance", "Node", "ResourceSlice"):
        return ALLOWED
    if kind == "ResourceClaim":
        if action.verb == "get":
            return ALLOWED  # the object decides: `admit(..., "get", ...)` (node-own-claims)
        return Denied("node-own-claims", "a node reads ResourceClaims one at a time, by namespace and name")
    if kind == "Pod":
        if action.verb == "get":
            return ALLOWED  # the object decides: `admit(..., "get", ...)`
        if _selected(action.fields, "spec.nodeName") == node:
            return ALLOWED
        return Denied("node-own-pods", f"a node lists and watches only its Pods: select spec.nodeName={node}")
    if kind in SOURCE_KINDS:
        name = action.name if action.verb == "get" else _selected(action.fields, "metadata.name")
        if action.namespace is None or not name:
            return Denied(
                "node-referenced-sources",
                f"a node reads {kind}s one at a time, by namespace and name (metadata.name=<name>)",
            )
        if (kind, action.namespace, name) not in referenced:
            return Denied(
                "node-referenced-sources",
                f"no Configuration's discoveryProperties name {kind} {action.namespace}/{name}",
            )
        return ALLOWED
    return Denied("node-kinds", f"a node does not read {kind or action.plural}")


# -- objects ----------------------------------------------------------------------------------------------------------


def needs_configuration(
    role: Role, op: Op, kind: str, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None
) -> bool:
    """Whether `admit` needs the Configuration of the Instance written (its capacity): a node creating an Instance
    or changing one's capacity. Every other write (claims, joins) is decided without reading it."""
    if role.name != "node" or kind != "Instance":
        return False
    return op == "create" or (
        op == "update" and _spec(before or {}).get("capacity") != _spec(after or {}).get("capacity")
    )


def admit(
    role: Role,
    op: Op,
    kind: str,
    before: Mapping[str, Any] | None,
    after: Mapping[str, Any] | None,
    *,
    configuration: Mapping[str, Any] | None = None,
) -> Decision:
    """Whether `role` may do `op` on an object of `kind` that is `before` (None for a create) and becomes `after`
    (None for a get or delete). Admins may do anything; readers and identities without a role only read; node
    identities follow the node rules (module docstring). `configuration` is the stored Configuration an Instance
    names (None: there is none), read when `needs_configuration` says so."""
    if role.name == "admin":
        return ALLOWED
    if role.name != "node":
        if op == "get":
            return ALLOWED
        rule = "reader-read-only" if role.name == "reader" else "no-role"
        return Denied(rule, f"a {role.name} identity does not {op} objects")
    node = role.node
    if op == "get":
        if kind == "Pod" and before is not None and _node_name(before) != node:
            return Denied("node-own-pods", f"the Pod is bound to {_node_name(before) or 'no node'}, not {node}")
        if kind == "ResourceClaim" and before is not None and not _claim_for(before, node):
            return Denied("node-own-claims", f"the ResourceClaim is not allocated for node {node}")
        return ALLOWED
    if kind == "Node":
        name = _name(after if after is not None else before)
        if name != node:
            return Denied("node-own-node", f"node {node} may write only its own Node, not {name}")
        return ALLOWED
    if kind == "Instance":
        if op == "create":
            return _instance_create(node, after or {}, configuration)
        if op == "delete":
            return _instance_delete(node, before or {})
        return _instance_update(node, before or {}, after or {}, configuration)
    if kind == "ResourceSlice":
        return _slice_write(node, before, after)
    if kind == "Configuration" and op == "update":
        return _configuration_update(node, before or {}, after or {})
    if kind == "Pod" and op == "update":
        return _pod_update(node, before or {}, after or {})
    return Denied("node-kinds", f"a node does not {op} {kind}s")


def _claim_for(claim: Mapping[str, Any], node: str) -> bool:
    """Whether a node may read `claim` to prepare it (Kubernetes' node authorizer: claims of the pods bound to it):
    the claim is allocated and its allocation's nodeSelector names the node, or it has none (a network-attached
    device any node may use)."""
    status = claim.get("status")
    allocation = status.get("allocation") if isinstance(status, Mapping) else None
    if not isinstance(allocation, Mapping):
        return False
    selector = allocation.get("nodeSelector")
    if not selector:
        return True
    return node in _strings(selector)


def _strings(value: Any) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, Mapping):
        return set().union(*(_strings(v) for v in value.values())) if value else set()
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value)) if value else set()
    return set()


def _slice_write(node: str, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> Decision:
    """NodeRestriction for ResourceSlices: a node writes only slices whose `spec.nodeName` is itself, before and
    after (so never a slice with a nodeSelector or allNodes: the controller publishes those)."""
    for obj in (before, after):
        if obj is not None and _node_name(obj) != node:
            owner = _node_name(obj) or "no node (a nodeSelector, allNodes or per-device slice)"
            return Denied("node-own-slices", f"node {node} may write only its own ResourceSlices, not one of {owner}")
    return ALLOWED


def _name(obj: Mapping[str, Any] | None) -> str:
    meta = (obj or {}).get("metadata")
    return str(meta.get("name") or "") if isinstance(meta, Mapping) else ""


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _node_name(pod: Mapping[str, Any]) -> str:
    return str(_spec(pod).get("nodeName") or "")


def _nodes(obj: Mapping[str, Any]) -> list[Any]:
    nodes = _spec(obj).get("nodes")
    return list(nodes) if isinstance(nodes, list) else []


def _usage(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    usage = _spec(obj).get("deviceUsage")
    return usage if isinstance(usage, Mapping) else {}


def _without(
    obj: Mapping[str, Any],
    *,
    spec: frozenset[str] = frozenset(),
    annotations: frozenset[str] = frozenset(),
    top: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """`obj` without server-managed metadata, the given spec fields, annotations and top-level fields."""
    out = {k: v for k, v in obj.items() if k not in top}
    meta = out.get("metadata")
    if isinstance(meta, Mapping):
        kept = {k: v for k, v in meta.items() if k not in SERVER_METADATA}
        notes = kept.get("annotations")
        if isinstance(notes, Mapping):
            notes = {k: v for k, v in notes.items() if k not in annotations}
            if notes:
                kept["annotations"] = notes
            else:
                kept.pop("annotations")
        out["metadata"] = kept
    if spec and isinstance(out.get("spec"), Mapping):
        out["spec"] = {k: v for k, v in out["spec"].items() if k not in spec}
    return out


def _instance_create(node: str, after: Mapping[str, Any], configuration: Mapping[str, Any] | None) -> Decision:
    nodes = _nodes(after)
    if nodes != [node]:
        return Denied("node-instance-create", f"a new Instance must list exactly {node} in spec.nodes, not {nodes}")
    held = sorted(slot for slot, holder in _usage(after).items() if holder != "")
    if held:
        return Denied("node-instance-create", f"a new Instance's slots must all be free ({', '.join(held)} are not)")
    return _configured_capacity(after, configuration) or ALLOWED


def _configured_capacity(instance: Mapping[str, Any], configuration: Mapping[str, Any] | None) -> Denied | None:
    """Refused unless `instance`'s capacity is its Configuration's (module docstring)."""
    meta = instance.get("metadata")
    namespace = str(meta.get("namespace") or "") if isinstance(meta, Mapping) else ""
    name = f"{namespace}/{_spec(instance).get('configurationName')}"
    capacity = _spec(instance).get("capacity")
    if configuration is None:
        return Denied("node-instance-capacity", f"spec.capacity follows its Configuration, and {name} does not exist")
    wanted = _spec(configuration).get("capacity", 1)
    if capacity != wanted:
        return Denied(
            "node-instance-capacity",
            f"spec.capacity is its Configuration's capacity ({wanted}), not {capacity} (Configuration {name})",
        )
    return None


def _instance_delete(node: str, before: Mapping[str, Any]) -> Decision:
    others = sorted(str(n) for n in _nodes(before) if n != node)
    if others:
        return Denied("node-instance-delete", f"the Instance is still listed by {', '.join(others)}")
    return ALLOWED


_INSTANCE_VOLATILE = frozenset({"nodes", "deviceUsage", "capacity", "brokerProperties"})


def _instance_update(
    node: str, before: Mapping[str, Any], after: Mapping[str, Any], configuration: Mapping[str, Any] | None
) -> Decision:
    old_nodes, new_nodes = _nodes(before), _nodes(after)
    if [n for n in old_nodes if n != node] != [n for n in new_nodes if n != node] or new_nodes.count(node) > 1:
        return Denied(
            "node-instance-nodes",
            f"spec.nodes may change only by adding or removing {node} ({old_nodes} -> {new_nodes})",
        )
    listed = node in old_nodes and node in new_nodes
    old_spec, new_spec = _spec(before), _spec(after)
    for field in ("capacity", "brokerProperties"):
        if old_spec.get(field) != new_spec.get(field) and not listed:
            return Denied("node-instance-fields", f"spec.{field} may change only while {node} is listed in spec.nodes")
    if old_spec.get("capacity") != new_spec.get("capacity"):
        refused = _configured_capacity(after, configuration)
        if refused is not None:
            return refused
    capacity = new_spec.get("capacity")
    instance = _name(after)
    old_usage, new_usage = _usage(before), _usage(after)
    for slot in sorted(set(old_usage) | set(new_usage)):
        old, new = old_usage.get(slot), new_usage.get(slot)
        if old == new:
            continue
        was, becomes = named_node(old), named_node(new)
        for holder in (was, becomes):
            if holder is not None and holder != node:
                return Denied("node-instance-slots", f"slot {slot} is held by {holder} ({old!r} -> {new!r})")
        if becomes == node and was != node and not listed:
            why = "does not list it yet" if node not in old_nodes else "leaves it in the same write"
            return Denied(
                "node-instance-claim",
                f"{node} claims slot {slot} of an Instance {node} {why}: a node joins (spec.nodes) in a write of "
                "its own, then claims",
            )
        if was is None and becomes is None:  # a free slot added or removed: a resize
            if not listed:
                return Denied(
                    "node-instance-slots", f"free slot {slot} may be added or removed only while {node} is listed"
                )
            index = slot_index(instance, str(slot))
            below = index is not None and isinstance(capacity, int) and index < capacity
            if new is None and below:
                return Denied(
                    "node-instance-capacity",
                    f"free slot {slot} is below capacity {capacity}: it goes only when the capacity drops below it",
                )
    fixed_before = _without(before, spec=_INSTANCE_VOLATILE, annotations=frozenset({OFFLINE_SINCE}))
    fixed_after = _without(after, spec=_INSTANCE_VOLATILE, annotations=frozenset({OFFLINE_SINCE}))
    if fixed_before != fixed_after:
        changed = _changed_fields(fixed_before, fixed_after)
        return Denied("node-instance-fields", f"a node may not change {', '.join(changed)}")
    return ALLOWED


def _conditions(obj: Mapping[str, Any]) -> list[Any]:
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return list(conditions) if isinstance(conditions, list) else []


def _owner(condition: Any) -> Any:
    return condition.get("node") if isinstance(condition, Mapping) else None


def _configuration_update(node: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> Decision:
    old, new = _conditions(before), _conditions(after)
    if [c for c in old if _owner(c) != node] != [c for c in new if _owner(c) != node]:
        return Denied("node-configuration-conditions", "only conditions whose node is itself may change")
    if _without(before, top=frozenset({"status"})) != _without(after, top=frozenset({"status"})):
        changed = _changed_fields(
            _without(before, top=frozenset({"status"})), _without(after, top=frozenset({"status"}))
        )
        return Denied("node-configuration-conditions", f"a node may not change {', '.join(changed)}")
    old_status = {k: v for k, v in (before.get("status") or {}).items() if k != "conditions"}
    new_status = {k: v for k, v in (after.get("status") or {}).items() if k != "conditions"}
    if old_status != new_status:
        return Denied("node-configuration-conditions", "only status.conditions may change")
    return ALLOWED


def _pod_update(node: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> Decision:
    bound = _node_name(before)
    if bound != node:
        return Denied("node-own-pods", f"the Pod is bound to {bound or 'no node'}, not {node}")
    if _without(before, top=frozenset({"status"})) != _without(after, top=frozenset({"status"})):
        changed = _changed_fields(
            _without(before, top=frozenset({"status"})), _without(after, top=frozenset({"status"}))
        )
        return Denied("node-pod-status", f"a node may change only a Pod's status, not {', '.join(changed)}")
    return ALLOWED


def _changed_fields(before: Mapping[str, Any], after: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted paths (two levels deep at most) where `before` and `after` differ, for messages."""
    out = []
    for key in sorted(set(before) | set(after), key=str):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        path = f"{prefix}{key}"
        if isinstance(old, Mapping) and isinstance(new, Mapping) and not prefix:
            out.extend(_changed_fields(old, new, f"{path}."))
        else:
            out.append(path)
    return out or ["the object"]
