"""etcd Store: many machines share one etcd cluster (the engine under Kubernetes) through its v3 gRPC API.

Client: our own stubs of etcd's API (`devplace.store.etcdserverpb`, generated from a proto we wrote, like the device
plugin's) on grpc.aio, which devplace already runs. The async clients on PyPI each missed something this backend needs:
`aetcd` 1.0 connects without TLS to a single host and cannot page a range at a revision; `etcd3aio` 0.3 opens one gRPC
stream per watch; the rest are synchronous or unmaintained. Behind this adapter nothing else depends on the choice.

Open with `open_store("etcd://HOST:2379[,HOST:2379...][/PREFIX][?OPTIONS]")`; `parse_url` documents the options
(TLS files, user and password). Several endpoints are members of one cluster: calls go to any that answers.

Layout: an object lives at `<prefix>/<group>/<plural>/<namespace>/<name>`, core kinds at `<prefix>/<plural>/...`,
cluster-scoped objects without the namespace segment: the Kubernetes API server's layout, prefix `/registry` by
default (group and plural from `api.registry`; a kind it does not know lives under `<prefix>/-/<Kind>/`). Names and
namespaces may not contain "/". The value is the object's compact JSON without `metadata.resourceVersion`, which is
the key's `mod_revision`, as in Kubernetes. (`revision_base` is subtracted from every etcd revision the store shows:
0, the default, shows them as they are; tests give each store a fresh prefix and the etcd revision it starts at, so a
fresh store starts at revision 0 as the contract says. Revisions are etcd's, global to the cluster: a store sharing
its etcd with other writers sees gaps, which the contract allows.)

Writes: each is one etcd transaction guarded by a comparison, whose failure branch reads the key so a refusal knows
at once whether it is a `Conflict` or a `NotFound`: create on `version == 0` (else `AlreadyExists`), update and a
delete with a precondition on `mod_revision` == the caller's resourceVersion. An update keeps the stored uid,
creationTimestamp and generation, so it needs the stored value: the store remembers the last `_KNOWN_LIMIT` values
it read or wrote, by key and mod_revision (the value of a key at a revision never changes, so a remembered value is
never wrong, only possibly outdated), and a read-decide-write cycle costs one read and one transaction; an update
of a value it does not know reads it first. Objects are at most `max_object_bytes` of JSON, counted as the other
backends count them (with the resourceVersion); etcd must accept a request that large (`--max-request-bytes`).

List: one consistent snapshot however large: ranges of `page_size` keys, every page read at the first page's
revision (a compaction in between restarts the list). Items come in namespace, then name order. A page (`list_page`)
reads the keys first, then only the values it takes, all at one revision (`EtcdStore.list_page`).

Watch: one gRPC Watch stream per store carries every open watch (etcd multiplexes them by watch_id). Each is a
key-prefix watch of its kind (and namespace, when given), so events of other kinds never reach this process; label
and field selectors are applied here, as in the other backends. Deletions carry the last stored object (prev_kv).
Entering reads the store at `since`: etcd refuses a compacted or a future revision, and the watch raises `Gone`.
(`compact(R)` compacts etcd at R, after which etcd still reads at R but not below: so a watch from `since` < R is
`Gone`, as the contract says. This store never compacts by itself: run etcd with `--auto-compaction-retention`, as
Kubernetes clusters do, or call `compact`.) A watcher that does not read keeps at most `_PENDING_LIMIT` events (and
the one batch that arrives when its queue is empty): then its etcd watch is cancelled and started again from where
it stopped when it reads again (`Gone` if that was compacted meanwhile). When the stream breaks
(a member went away), it is opened again, on any endpoint, and every watch resumes from its next revision; after
`reconnect_timeout` seconds without success the watches end with `Unavailable`. `close()` ends them with it too.
"""

from __future__ import annotations

import asyncio
import builtins
import ipaddress
import socket
import time
import urllib.parse
import uuid
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import grpc
import grpc.aio
import orjson

from devplace import errors
from devplace.api import MAX_REVISION, lookup, parse_revision
from devplace.clocks import Clock, SystemClock
from devplace.store import _base as base
from devplace.store._base import Event, EventType, Filters, Key, ObjectList
from devplace.store.etcdserverpb import rpc_pb2 as pb
from devplace.store.etcdserverpb import rpc_pb2_grpc as pb_grpc

DEFAULT_PORT = 2379
_PAGE_SIZE = 500  # keys per range request of a list
_KNOWN_LIMIT = 4096  # stored values remembered for updates
_PENDING_LIMIT = 4096  # events queued for a watcher that does not read; past it, it restarts its etcd watch
_LIST_ATTEMPTS = 3  # a list restarted by compactions between its pages this many times gives up
_FIRST_VALUES = 4  # values a list page reads in its first request, before it knows how large they are

_UNAVAILABLE_CODES = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
}
_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"
_RESOURCE_VERSION_FIELD = len(',"resourceVersion":""')  # the bytes a stored value lacks, but the revision's digits
_QUERY_OPTIONS = ("cacert", "cert", "key", "server_name", "user", "password", "password_file", "timeout")


@dataclass(frozen=True)
class EtcdOptions:
    """Where and how to reach an etcd cluster (see `parse_url`). File options are paths."""

    endpoints: tuple[tuple[str, int], ...]
    prefix: str = "/registry"
    tls: bool = False
    cacert: str | None = None
    cert: str | None = None
    key: str | None = None
    server_name: str | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    timeout: float = 10.0


def parse_url(url: str) -> EtcdOptions:
    """`etcd://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...][/PREFIX][?OPTION=VALUE&...]`; `etcds://` for TLS.

    PORT defaults to 2379 and PREFIX to /registry; IPv6 addresses go in brackets. Options: `cacert` (the CA bundle
    that signed the servers' certificates; implies TLS), `cert` and `key` (a client certificate, as etcd's
    `--client-cert-auth` expects; both or neither), `server_name` (the name to verify in the servers' certificates,
    by default the first host), `user` and `password` or `password_file` (etcd's role-based authentication; a file
    keeps the password out of process listings), `timeout` (seconds per call, default 10). Refuses anything else
    with `Invalid` naming the field `store`.
    """

    def invalid(reason: str) -> errors.Invalid:
        return errors.Invalid.field("store", f"{_redacted(url)}: {reason}")

    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("etcd", "etcds"):
        raise invalid("expected etcd://HOST:PORT[,HOST:PORT...] or etcds://...")
    rest, _, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    user: str | None = None
    password: str | None = None
    if "@" in netloc:
        userinfo, _, netloc = netloc.rpartition("@")
        name, colon, secret = userinfo.partition(":")
        user = urllib.parse.unquote(name)
        password = urllib.parse.unquote(secret) if colon else None
    endpoints = tuple(_endpoint(part, invalid) for part in netloc.split(","))
    prefix = "/" + path.strip("/") if slash and path.strip("/") else "/registry"
    try:
        params = urllib.parse.parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as e:
        raise invalid(f"the query does not parse: {e}") from e
    unknown = sorted(set(params) - set(_QUERY_OPTIONS))
    if unknown:
        raise invalid(f"unknown option {unknown[0]!r} (known: {', '.join(_QUERY_OPTIONS)})")
    repeated = sorted(name for name, values in params.items() if len(values) > 1)
    if repeated:
        raise invalid(f"option {repeated[0]!r} is given more than once")
    option = {name: values[0] for name, values in params.items()}
    for name in ("cacert", "cert", "key", "server_name", "user", "password_file"):
        if name in option and not option[name]:
            raise invalid(f"option {name!r} is empty")
    if "user" in option:
        if user is not None:
            raise invalid("the user is given twice (before @ and as an option)")
        user = option["user"]
    if "password" in option or "password_file" in option:
        if password is not None or ("password" in option and "password_file" in option):
            raise invalid("the password is given twice")
        password = option.get("password")
        if "password_file" in option:
            password = _read_text(option["password_file"], "password_file", invalid).rstrip("\r\n")
    if (user is None) != (password is None):
        raise invalid("user and password go together")
    if user == "":
        raise invalid("the user name is empty")
    if ("cert" in option) != ("key" in option):
        raise invalid("cert and key go together")
    timeout = 10.0
    if "timeout" in option:
        try:
            timeout = float(option["timeout"])
        except ValueError as e:
            raise invalid(f"timeout {option['timeout']!r} is not a number of seconds") from e
        if not timeout > 0 or timeout == float("inf"):
            raise invalid("timeout must be a positive number of seconds")
    tls = scheme == "etcds" or any(name in option for name in ("cacert", "cert", "server_name"))
    return EtcdOptions(
        endpoints=endpoints,
        prefix=prefix,
        tls=tls,
        cacert=option.get("cacert"),
        cert=option.get("cert"),
        key=option.get("key"),
        server_name=option.get("server_name"),
        user=user,
        password=password,
        timeout=timeout,
    )


def _redacted(url: str) -> str:
    """`url` without its password, to quote in errors."""
    scheme, sep, rest = url.partition("://")
    rest, qmark, query = rest.partition("?")
    netloc, slash, path = rest.partition("/")
    userinfo, at, hosts = netloc.rpartition("@")
    if at and ":" in userinfo:
        netloc = userinfo.partition(":")[0] + ":***@" + hosts
    query = "&".join("password=***" if part.startswith("password=") else part for part in query.split("&"))
    return f"{scheme}{sep}{netloc}{slash}{path}{qmark}{query}"


def _endpoint(text: str, invalid: Any) -> tuple[str, int]:
    if not text:
        raise invalid("an endpoint is empty (expected HOST[:PORT])")
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise invalid(f"endpoint {text!r}: expected [IPV6]:PORT")
        port_text = rest[1:] if rest else ""
        try:
            ipaddress.IPv6Address(host)
        except ValueError as e:
            raise invalid(f"endpoint {text!r}: {host!r} is not an IPv6 address") from e
    else:
        host, colon, port_text = text.partition(":")
        if not host or ":" in port_text:
            raise invalid(f"endpoint {text!r}: expected HOST[:PORT] (IPv6 addresses in brackets)")
        if colon and not port_text:
            raise invalid(f"endpoint {text!r}: the port is empty")
    if not port_text:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise invalid(f"endpoint {text!r}: port {port_text!r} is not a number from 1 to 65535")
    return host, int(port_text)


def _read_text(path: str, option: str, invalid: Any) -> str:
    try:
        return Path(path).read_text()
    except OSError as e:
        raise invalid(f"{option} {path}: {e.strerror or e}") from e


def _read_bytes(path: str | None, option: str) -> bytes | None:
    if path is None:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise errors.Invalid.field("store", f"{option} {path}: {e.strerror or e}") from e


def _prefix_end(prefix: bytes) -> bytes:
    """The end of the key range of everything starting with `prefix` (etcd's convention: the prefix plus one)."""
    return prefix[:-1] + bytes([prefix[-1] + 1])  # our prefixes end in "/", never in 0xff


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


class _Keys:
    """Store keys to etcd keys and back (see the module docstring for the layout)."""

    def __init__(self, prefix: str) -> None:
        self.root = prefix.rstrip("/").encode() + b"/"
        self._kinds: dict[str, bytes] = {}

    def kind(self, kind: str) -> bytes:
        found = self._kinds.get(kind)
        if found is None:
            found = self._kinds[kind] = self.root + self._kind_path(kind).encode() + b"/"
        return found

    @staticmethod
    def _kind_path(kind: str) -> str:
        try:
            info = lookup(kind)
        except errors.Invalid:
            info = None
        if info is None or info.kind != kind:  # the registry also answers to plurals and lowercase kinds
            return f"-/{kind}"
        group = info.preferred_api_version.rpartition("/")[0]
        return f"{group}/{info.plural}" if group else info.plural

    def of(self, kind: str, namespace: str, name: str) -> bytes:
        if namespace:
            return self.kind(kind) + namespace.encode() + b"/" + name.encode()
        return self.kind(kind) + name.encode()

    def span(self, kind: str | None, namespace: str | None) -> tuple[bytes, bytes]:
        """The key range holding the objects of `kind` (None: every kind) in `namespace` (None or "": all)."""
        if kind is None:
            start = self.root
        elif namespace:
            start = self.kind(kind) + namespace.encode() + b"/"
        else:
            start = self.kind(kind)  # cluster-scoped objects (namespace "") sit beside the namespaces' folders
        return start, _prefix_end(start)


def _addressable(key: Key) -> bool:
    """Can `key` be stored? A "/" in a name or namespace would address another object."""
    return "/" not in key.name and "/" not in key.namespace


class _Connection:
    """One gRPC channel to the cluster (made on first use, inside the event loop), its stubs and its auth token."""

    def __init__(self, options: EtcdOptions) -> None:
        self.options = options
        self.where = "etcd " + ",".join(f"{host}:{port}" for host, port in options.endpoints)
        self._credentials: grpc.ChannelCredentials | None = None
        if options.tls:
            self._credentials = grpc.ssl_channel_credentials(
                root_certificates=_read_bytes(options.cacert, "cacert"),
                private_key=_read_bytes(options.key, "key"),
                certificate_chain=_read_bytes(options.cert, "cert"),
            )
        self._channel: grpc.aio.Channel | None = None
        self._kv: pb_grpc.KVAsyncStub | None = None
        self._watch: pb_grpc.WatchAsyncStub | None = None
        self.token: str | None = None
        self._open_lock = asyncio.Lock()
        self._ready = False  # connected, and authenticated when a user is set
        self._auth_lock = asyncio.Lock()
        self.metadata: tuple[tuple[str, str], ...] = ()

    async def _open(self) -> None:
        target = await self._target()
        opts: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", -1),  # a page or a watch batch may hold several 1.5 MiB objects
            ("grpc.keepalive_time_ms", 30_000),  # notice a dead member under an idle watch stream
            ("grpc.keepalive_timeout_ms", 10_000),
        ]
        if len(self.options.endpoints) > 1:
            opts.append(("grpc.lb_policy_name", "round_robin"))
        if self._credentials is not None:
            name = self.options.server_name
            if name is None and len(self.options.endpoints) > 1:
                name = self.options.endpoints[0][0]  # several addresses: verify the first host's name
            if name is not None:
                opts.append(("grpc.ssl_target_name_override", name))
            self._channel = grpc.aio.secure_channel(target, self._credentials, options=opts)
        else:
            self._channel = grpc.aio.insecure_channel(target, options=opts)
        self._kv = pb_grpc.KVStub(self._channel)
        self._watch = pb_grpc.WatchStub(self._channel)

    async def _target(self) -> str:
        """A gRPC target for the endpoints: one host as it is; several as one list of addresses, names resolved
        now (a gRPC target lists addresses of one family: IPv4 when there are any)."""
        endpoints = self.options.endpoints
        if len(endpoints) == 1:
            host, port = endpoints[0]
            return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        addresses: list[tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]] = []
        loop = asyncio.get_running_loop()
        for host, port in endpoints:
            ip = _ip(host)
            if ip is not None:
                addresses.append((ip, port))
                continue
            try:
                infos = await loop.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
            except OSError as e:
                raise errors.Unavailable(f"{self.where}: cannot resolve {host}: {e}") from e
            addresses.extend((ipaddress.ip_address(info[4][0]), port) for info in infos)
        v4 = [f"{ip}:{port}" for ip, port in addresses if ip.version == 4]
        if v4:
            return "ipv4:" + ",".join(dict.fromkeys(v4))
        return "ipv6:" + ",".join(dict.fromkeys(f"[{ip}]:{port}" for ip, port in addresses))

    async def kv(self) -> pb_grpc.KVAsyncStub:
        if not self._ready:
            async with self._open_lock:  # the first calls may come from many tasks at once: one channel, one token
                if self._channel is None:
                    await self._open()
                if not self._ready:
                    await self.renew(None)
                    self._ready = True
        assert self._kv is not None
        return self._kv

    async def watch_stub(self) -> pb_grpc.WatchAsyncStub:
        await self.kv()
        assert self._watch is not None
        return self._watch

    async def renew(self, stale: str | None) -> None:
        """Trade the user and password for a token (again when `stale` is the token etcd refused)."""
        if self.options.user is None or self._channel is None:
            return
        async with self._auth_lock:
            if self.token is not None and self.token != stale:
                return  # another task renewed it meanwhile
            request = pb.AuthenticateRequest(name=self.options.user, password=self.options.password or "")
            try:
                reply = await pb_grpc.AuthStub(self._channel).Authenticate(request, timeout=self.options.timeout)
            except grpc.aio.AioRpcError as e:
                raise errors.Unavailable(
                    f"{self.where}: authentication as {self.options.user!r} failed: {e.details()}"
                ) from e
            self.token = reply.token
            self.metadata = (("token", reply.token),)

    async def call(self, method: str, request: Any) -> Any:
        """A unary KV call with the token, renewing it once if etcd says it expired; gRPC errors are raised as is."""
        stub = await self.kv()
        token = self.token
        try:
            return await getattr(stub, method)(request, timeout=self.options.timeout, metadata=self.metadata)
        except grpc.aio.AioRpcError as e:
            if e.code() != grpc.StatusCode.UNAUTHENTICATED or self.options.user is None:
                raise
        await self.renew(token)
        return await getattr(stub, method)(request, timeout=self.options.timeout, metadata=self.metadata)

    async def close(self) -> None:
        if self._channel is not None:
            await self._channel.close(None)

    def failure(self, e: grpc.aio.AioRpcError, what: str) -> errors.DevplaceError:
        """The devplace error for a failed call that is not an expected refusal."""
        details = e.details() or e.code().name
        if "request is too large" in details or "larger than max" in details:
            return errors.TooLarge(f"{what}: etcd refused the request as too large ({details})")
        if e.code() in _UNAVAILABLE_CODES:
            return errors.Unavailable(f"{self.where}: {what}: {details}")
        return errors.Unavailable(f"{self.where} refused {what}: {details}")


class EtcdStore:
    def __init__(
        self,
        options: EtcdOptions | str,
        *,
        clock: Clock | None = None,
        revision_base: int = 0,
        page_size: int = _PAGE_SIZE,
        reconnect_timeout: float = 30.0,
        max_object_bytes: int = base.MAX_OBJECT_BYTES,
    ) -> None:
        """A store on the etcd cluster `options` names (an `EtcdOptions` or an etcd:// URL, see `parse_url`).

        Connects on first use. `revision_base` is subtracted from etcd's revisions (see the module docstring);
        `page_size` is the number of keys a list reads per request; `max_object_bytes` bounds one object's JSON
        (with its resourceVersion, as the other backends count it; etcd's own request limit, `--max-request-bytes`,
        1.5 MiB by default, must leave room for the transaction around it: 2 MiB does).
        """
        if isinstance(options, str):
            options = parse_url(options)
        if page_size < 1:
            raise errors.Invalid.field("page_size", "must be at least 1")
        if revision_base < 0:
            raise errors.Invalid.field("revision_base", "must not be negative")
        if max_object_bytes < 1:
            raise errors.Invalid.field("max_object_bytes", "must be at least 1")
        self.options = options
        self._conn = _Connection(options)
        self._keys = _Keys(options.prefix)
        self._clock = clock or SystemClock()
        self._base = revision_base
        self._page_size = page_size
        self._max_object_bytes = max_object_bytes
        self._seen = 0  # the newest etcd revision a reply has shown: the next write's is likely the one after
        self._known: dict[bytes, tuple[int, bytes]] = {}  # key -> (mod_revision, value) it had then
        self._mux = _WatchMux(self._conn, reconnect_timeout)
        self._closed = False

    # -- helpers --------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise errors.Unavailable(f"{self._conn.where}: the store is closed")

    async def _call(self, method: str, request: Any, what: str) -> Any:
        self._check_open()
        try:
            reply = await self._conn.call(method, request)
        except grpc.aio.AioRpcError as e:
            if self._closed:
                raise errors.Unavailable(f"{self._conn.where}: the store is closed") from e
            raise self._conn.failure(e, what) from e
        self._seen = max(self._seen, reply.header.revision)
        return reply

    def _check_size(self, key: Key, body: bytes, after: int) -> None:
        """The size rule on the object as returned: its stored JSON plus its resourceVersion, taken to be the next
        revision after `after` (etcd assigns it when it applies the write)."""
        revision = max(after, self._seen) + 1 - self._base
        base.check_object_size(key, len(body) + _RESOURCE_VERSION_FIELD + len(str(revision)), self._max_object_bytes)

    def _remember(self, key: bytes, revision: int, value: bytes) -> None:
        known = self._known
        known.pop(key, None)
        known[key] = (revision, value)
        if len(known) > _KNOWN_LIMIT:
            del known[next(iter(known))]

    def _decode(self, kv: pb.KeyValue, revision: int | None = None) -> dict[str, Any]:
        """The object a KeyValue holds, with its resourceVersion (`revision`, by default the key's mod_revision)."""
        obj = _loads(kv.value)
        if obj is None:
            raise errors.Unavailable(f"{self._conn.where}: key {kv.key!r} does not hold a devplace object")
        obj["metadata"]["resourceVersion"] = str((kv.mod_revision if revision is None else revision) - self._base)
        return obj

    def _result(self, body: bytes, revision: int) -> dict[str, Any]:
        obj: dict[str, Any] = orjson.loads(body)
        obj["metadata"]["resourceVersion"] = str(revision - self._base)
        return obj

    # -- writes ---------------------------------------------------------------------------------------------

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._check_open()
        key = base.key_of(obj)
        if not _addressable(key):
            field_ = "metadata.name" if "/" in key.name else "metadata.namespace"
            raise errors.Invalid.field(field_, "must not contain '/'")
        stored = base.stamp_created(obj, 0, self._clock.now(), str(uuid.uuid4()))
        body = _encode(stored)
        self._check_size(key, body, 0)
        etcd_key = self._keys.of(key.kind, key.namespace, key.name)
        request = pb.TxnRequest(
            compare=[pb.Compare(key=etcd_key, target=pb.Compare.VERSION, result=pb.Compare.EQUAL, version=0)],
            success=[pb.RequestOp(request_put=pb.PutRequest(key=etcd_key, value=body))],
        )
        reply = await self._call("Txn", request, f"create {key}")
        if not reply.succeeded:
            raise errors.AlreadyExists(f"{key} already exists")
        revision = reply.header.revision
        self._remember(etcd_key, revision, body)
        return self._result(body, revision)

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        self._check_open()
        key = base.key_of(obj)
        expected = base.resource_version_of(obj)
        if not _addressable(key):
            raise errors.NotFound(f"{key} not found")
        etcd_key = self._keys.of(key.kind, key.namespace, key.name)
        mod_revision = expected + self._base
        known = self._known.get(etcd_key)
        if known is None or known[0] != mod_revision:
            reply = await self._call("Range", pb.RangeRequest(key=etcd_key), f"read {key}")
            current = reply.kvs[0] if reply.kvs else None
            base.check_revision(key, None if current is None else current.mod_revision - self._base, expected)
            assert current is not None
            known = (current.mod_revision, current.value)
        old = _loads(known[1])
        if old is None:
            raise errors.Unavailable(f"{self._conn.where}: key {etcd_key!r} does not hold a devplace object")
        body = _encode(base.stamp_updated(old, obj, 0))
        self._check_size(key, body, mod_revision)
        request = pb.TxnRequest(
            compare=[_same_mod_revision(etcd_key, mod_revision)],
            success=[pb.RequestOp(request_put=pb.PutRequest(key=etcd_key, value=body))],
            failure=[pb.RequestOp(request_range=pb.RangeRequest(key=etcd_key))],
        )
        reply = await self._call("Txn", request, f"update {key}")
        if not reply.succeeded:
            self._refused(key, reply, expected)
        revision = reply.header.revision
        self._remember(etcd_key, revision, body)
        return self._result(body, revision)

    def _refused(self, key: Key, reply: pb.TxnResponse, expected: int | str | None) -> None:
        """Raise what a guarded write's failure branch (a read of the key) says: `NotFound` or `Conflict`."""
        kvs = reply.responses[0].response_range.kvs
        current = kvs[0].mod_revision - self._base if kvs else None
        if isinstance(expected, int):
            base.check_revision(key, current, expected)
        else:
            base.check_delete_revision(key, current, expected)
        raise errors.Conflict(f"{key}: the object has been modified; re-read and try again")  # not reached

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        self._check_open()
        precondition = None
        if resource_version is not None:  # refused before anything is read or changed
            precondition = parse_revision("resourceVersion", resource_version)
        key = Key(kind, namespace or "", name)
        if not _addressable(key):
            raise errors.NotFound(f"{key} not found")
        etcd_key = self._keys.of(key.kind, key.namespace, key.name)
        self._known.pop(etcd_key, None)
        removal = pb.DeleteRangeRequest(key=etcd_key, prev_kv=True)
        if precondition is None:
            reply = await self._call("DeleteRange", removal, f"delete {key}")
            if not reply.deleted:
                raise errors.NotFound(f"{key} not found")
            return self._decode(reply.prev_kvs[0], reply.header.revision)
        if precondition + self._base > MAX_REVISION:  # no etcd revision: NotFound or Conflict, as read
            read = await self._call("Range", pb.RangeRequest(key=etcd_key), f"read {key}")
            base.check_delete_revision(
                key, read.kvs[0].mod_revision - self._base if read.kvs else None, resource_version
            )
        request = pb.TxnRequest(
            compare=[_same_mod_revision(etcd_key, precondition + self._base)],
            success=[pb.RequestOp(request_delete_range=removal)],
            failure=[pb.RequestOp(request_range=pb.RangeRequest(key=etcd_key))],
        )
        txn = await self._call("Txn", request, f"delete {key}")
        if not txn.succeeded:
            self._refused(key, txn, resource_version)
        gone = txn.responses[0].response_delete_range.prev_kvs
        return self._decode(gone[0], txn.header.revision)

    async def compact(self, revision: int) -> None:
        self._check_open()
        target = parse_revision("revision", revision)
        if target + self._base < 1:
            return  # etcd's history starts at revision 1: nothing before it
        if target + self._base <= MAX_REVISION:
            try:
                await self._conn.call("Compact", pb.CompactionRequest(revision=target + self._base))
                return
            except grpc.aio.AioRpcError as e:
                details = e.details() or ""
                if _COMPACTED in details:
                    return  # compacted there or beyond already
                if _FUTURE not in details:
                    raise self._conn.failure(e, f"compact at {revision}") from e
        base.check_compact_target(target, await self.revision())  # beyond the head: Invalid
        raise errors.Unavailable(f"{self._conn.where}: etcd refused to compact at {target} for no known reason")

    async def load(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create `obj` as it is, only its resourceVersion new (`devplace store import`; `SqliteStore.load`)."""
        self._check_open()
        key = base.key_of(obj)
        if not _addressable(key):
            raise errors.Invalid.field("metadata.name", "must not contain '/'")
        stored = {**obj, "metadata": {**(obj.get("metadata") or {}), "resourceVersion": ""}}
        body = _encode(stored)
        self._check_size(key, body, 0)
        etcd_key = self._keys.of(key.kind, key.namespace, key.name)
        request = pb.TxnRequest(
            compare=[pb.Compare(key=etcd_key, target=pb.Compare.VERSION, result=pb.Compare.EQUAL, version=0)],
            success=[pb.RequestOp(request_put=pb.PutRequest(key=etcd_key, value=body))],
        )
        reply = await self._call("Txn", request, f"load {key}")
        if not reply.succeeded:
            raise errors.AlreadyExists(f"{key} already exists")
        self._remember(etcd_key, reply.header.revision, body)
        return self._result(body, reply.header.revision)

    async def dump(self) -> tuple[int, builtins.list[dict[str, Any]]]:
        """Every devplace object under the prefix, in (kind, namespace, name) order, and the revision, in one
        snapshot (keys that do not hold a devplace object are skipped, as `list` skips them)."""
        self._check_open()
        revision, kvs = await self._snapshot(*self._keys.span(None, None))
        found = []
        for kv in kvs:
            obj = _loads(kv.value)
            if obj is not None:
                obj["metadata"]["resourceVersion"] = str(kv.mod_revision - self._base)
                found.append(obj)
        found.sort(key=lambda obj: (obj.get("kind", ""), *_namespace_and_name(obj)))
        return revision - self._base, found

    # -- reads ----------------------------------------------------------------------------------------------

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        self._check_open()
        key = Key(kind, namespace or "", name)
        if not _addressable(key):
            raise errors.NotFound(f"{key} not found")
        etcd_key = self._keys.of(key.kind, key.namespace, key.name)
        reply = await self._call("Range", pb.RangeRequest(key=etcd_key), f"read {key}")
        if not reply.kvs:
            raise errors.NotFound(f"{key} not found")
        kv = reply.kvs[0]
        self._remember(etcd_key, kv.mod_revision, kv.value)
        return self._decode(kv)

    async def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None, *, fields: str | None = None
    ) -> ObjectList:
        self._check_open()
        filters = base.parse_filters(kind, namespace, selector, fields)
        if namespace is None and filters.fields is not None:
            namespace = filters.fields.exact("metadata.namespace")  # narrows the range; the filter still applies
        name = None if filters.fields is None else filters.fields.exact("metadata.name")
        if name is not None and namespace is not None:
            if "/" in name or "/" in namespace:
                return ObjectList([], await self.revision())
            exact = self._keys.of(kind, namespace, name)
            start, end = exact, exact + b"\0"
        else:
            start, end = self._keys.span(kind, namespace)
        for attempt in range(_LIST_ATTEMPTS):
            try:
                revision, kvs = await self._snapshot(start, end)
                break
            except errors.Gone:
                if attempt == _LIST_ATTEMPTS - 1:
                    raise errors.Unavailable(
                        f"{self._conn.where}: list {kind}: history was compacted under every attempt to read it"
                    ) from None
        items = []
        for kv in kvs:
            obj = _loads(kv.value)
            if obj is None:
                continue
            obj["metadata"]["resourceVersion"] = str(kv.mod_revision - self._base)
            if filters.matches(obj):
                items.append(obj)
        if namespace is None:  # key order puts "a-b/x" before "a/x"; the contract's order is (namespace, name)
            items.sort(key=_namespace_and_name)
        return ObjectList(items, revision - self._base)

    async def list_page(
        self,
        kind: str,
        namespace: str | None = None,
        selector: str | None = None,
        *,
        fields: str | None = None,
        after: tuple[str, str] | None = None,
        limit: int,
        max_bytes: int,
    ) -> base.EncodedPage:
        """`base.Store.list_page` at one etcd revision: the keys after `after` (keys only), put in list order, then
        the values of those the page takes, a namespace's run at a time (in etcd's key order "a-b/x" comes before
        "a/x"), a few per request at first, then as many as the byte bound leaves room for. Each value is decoded to
        carry its resourceVersion (and to match the selectors) and encoded again. A namespace's page reads the keys
        after `after` only; a list across namespaces reads every key of the kind, to order them."""
        self._check_open()
        base.PageCut(after, limit, max_bytes)  # refuses bad bounds before any read
        filters = base.parse_filters(kind, namespace, selector, fields)
        if namespace is None and filters.fields is not None:
            namespace = filters.fields.exact("metadata.namespace")  # narrows the range; the filter still applies
        name = None if filters.fields is None else filters.fields.exact("metadata.name")
        if name is not None and namespace is not None:
            if "/" in name or "/" in namespace:
                return base.EncodedPage([], await self.revision(), after, 0)
            exact = self._keys.of(kind, namespace, name)
            start, end = exact, exact + b"\0"
        else:
            start, end = self._keys.span(kind, namespace)
            if namespace and after is not None and after[0] == namespace:
                start = max(start, self._keys.of(kind, *after) + b"\0")  # etcd's order is the list's here
        for attempt in range(_LIST_ATTEMPTS):
            try:
                return await self._page(kind, namespace, (start, end), base.PageCut(after, limit, max_bytes), filters)
            except errors.Gone:
                if attempt == _LIST_ATTEMPTS - 1:
                    raise errors.Unavailable(
                        f"{self._conn.where}: list {kind}: history was compacted under every attempt to read it"
                    ) from None
        raise AssertionError("unreachable")

    async def _page(
        self,
        kind: str,
        namespace: str | None,
        span: tuple[bytes, bytes],
        cut: base.PageCut,
        filters: Filters,
    ) -> base.EncodedPage:
        prefix = self._keys.kind(kind)
        after = cut.last
        revision, keys = await self._snapshot(*span, keys_only=True)
        candidates = sorted(
            (ns, name, kv.key)
            for kv in keys
            for ns, _, name in [kv.key[len(prefix) :].decode(errors="replace").rpartition("/")]
            if (namespace is None or ns == namespace) and (after is None or (ns, name) > after)
        )
        selecting = filters.labels is not None or filters.fields is not None
        index, batch, read, values = 0, _FIRST_VALUES, 0, 0
        while index < len(candidates) and not cut.done():
            run_end = index  # this namespace's candidates: one contiguous range of etcd keys
            while run_end < len(candidates) and candidates[run_end][0] == candidates[index][0]:
                run_end += 1
            first, last = candidates[index][2], candidates[run_end - 1][2]
            count = max(1, min(batch, run_end - index, self._page_size))
            request = pb.RangeRequest(key=first, range_end=last + b"\0", limit=count, revision=revision)
            reply = await self._range(request, f"list {kind}")
            if not reply.kvs or reply.kvs[0].key != first:
                raise errors.Unavailable(f"{self._conn.where}: list {kind}: etcd lost a key at revision {revision}")
            for kv in reply.kvs:  # the range may hold other namespaces' keys ("a0/x" among ""'s): passed over
                if index == run_end or cut.done() or kv.key != candidates[index][2]:
                    continue
                ns, name, _ = candidates[index]
                read, values = read + len(kv.value), values + 1
                obj = _loads(kv.value)
                if obj is not None:
                    obj["metadata"]["resourceVersion"] = str(kv.mod_revision - self._base)
                if obj is None or (selecting and not filters.matches(obj)):
                    cut.skip(ns, name, len(kv.value))
                    index += 1
                    continue
                body = base.encode_json(obj)
                if not cut.fits(len(body)):
                    return cut.page(revision - self._base, len(candidates) - index)
                cut.take(ns, name, body)
                index += 1
            batch = cut.room * values // read + 1 if read else _FIRST_VALUES  # as many as the bound leaves room for
        return cut.page(revision - self._base, len(candidates) - index)

    async def _range(self, request: pb.RangeRequest, what: str) -> pb.RangeResponse:
        """A Range at a revision: `Gone` when etcd has compacted it."""
        try:
            reply: pb.RangeResponse = await self._conn.call("Range", request)
        except grpc.aio.AioRpcError as e:
            if _COMPACTED in (e.details() or ""):
                raise errors.Gone(f"compacted during {what}") from e
            raise self._conn.failure(e, what) from e
        return reply

    async def _snapshot(
        self, start: bytes, end: bytes, *, keys_only: bool = False
    ) -> tuple[int, builtins.list[pb.KeyValue]]:
        """Every key-value (or key) in [start, end) at one revision, read in pages; `Gone` if compacted between
        pages."""
        kvs: builtins.list[pb.KeyValue] = []
        revision = 0
        while True:
            request = pb.RangeRequest(
                key=start, range_end=end, limit=self._page_size, revision=revision, keys_only=keys_only
            )
            reply = await self._range(request, "a list")
            if not revision:
                revision = reply.header.revision
            kvs.extend(reply.kvs)
            if not reply.more or not reply.kvs:
                return revision, kvs
            start = reply.kvs[-1].key + b"\0"

    async def revision(self) -> int:
        self._check_open()
        return await self._head() - self._base

    async def _head(self) -> int:
        reply = await self._call("Range", pb.RangeRequest(key=self._keys.root), "read the revision")
        head: int = reply.header.revision
        return head

    async def _check_history(self, since: int) -> None:
        """`Gone` unless the history after `since` is all there: read at `since` (etcd refuses compacted and future
        revisions)."""
        target = since + self._base
        if target <= MAX_REVISION:
            request = pb.RangeRequest(key=self._keys.root, revision=max(target, 1))
            try:
                await self._call_raw(request)
                return
            except grpc.aio.AioRpcError as e:
                details = e.details() or ""
                if _COMPACTED in details:
                    raise errors.Gone(f"revision {since} has been compacted; relist and watch again") from e
                if _FUTURE not in details:
                    raise self._conn.failure(e, f"watch from {since}") from e
        raise base.future_revision(since, await self.revision())

    async def _call_raw(self, request: pb.RangeRequest) -> pb.RangeResponse:
        """A Range whose gRPC error the caller reads (after `close`: `Unavailable`)."""
        self._check_open()
        reply: pb.RangeResponse = await self._conn.call("Range", request)
        return reply

    # -- watch ----------------------------------------------------------------------------------------------

    def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        *,
        since: int | None = None,
        selector: str | None = None,
        fields: str | None = None,
    ) -> _EtcdWatch:
        return _EtcdWatch(self, kind, namespace, since, selector, fields)

    # -- lifecycle ------------------------------------------------------------------------------------------

    async def close(self) -> None:
        """End every open watch with `Unavailable` and close the connection."""
        if self._closed:
            return
        self._closed = True
        await self._mux.close(errors.Unavailable(f"{self._conn.where}: the store is closed"))
        await self._conn.close()


def _loads(value: bytes) -> dict[str, Any] | None:
    """The object a stored value holds, or None when it is not a devplace object (another program's key)."""
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        try:
            obj = base.decode_json(value)
        except ValueError:
            return None
    if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
        return None
    return obj


def _encode(stored: dict[str, Any]) -> bytes:
    """The stored value of a stamped object: its JSON without resourceVersion (the key's mod_revision says it)."""
    del stored["metadata"]["resourceVersion"]  # `stamped` made this metadata dict: ours to change
    return base.encode_json(stored)


def _same_mod_revision(key: bytes, revision: int) -> pb.Compare:
    return pb.Compare(key=key, target=pb.Compare.MOD, result=pb.Compare.EQUAL, mod_revision=revision)


def _namespace_and_name(obj: dict[str, Any]) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


class _WatchMux:
    """The store's one Watch stream, shared by its watchers (etcd tells their events apart by watch_id).

    The reader task reads the stream and hands each response to its watcher; when the stream fails it opens
    another and re-creates every registered watch from its next revision (see the module docstring).
    """

    def __init__(self, conn: _Connection, reconnect_timeout: float) -> None:
        self._conn = conn
        self._reconnect_timeout = reconnect_timeout
        self._by_id: dict[int, _EtcdWatch] = {}
        self._next_id = 1
        self._call: Any = None  # the open grpc.aio stream-stream call
        self._reader: asyncio.Task[None] | None = None
        self._write_lock = asyncio.Lock()
        self._closed = False

    async def start(self, watcher: _EtcdWatch) -> None:
        """Register `watcher` under a new watch_id and create its etcd watch; returns once etcd confirmed it."""
        if self._closed:
            raise errors.Unavailable(f"{self._conn.where}: the store is closed")
        watcher.watch_id = self._next_id
        watcher.sent_on = None
        self._next_id += 1
        watcher.created = asyncio.get_running_loop().create_future()
        self._by_id[watcher.watch_id] = watcher
        if self._reader is None or self._reader.done():
            self._reader = asyncio.get_running_loop().create_task(self._run(), name=f"watch {self._conn.where}")
        elif self._call is not None:
            await self._send_create(self._call, watcher)
        try:
            await asyncio.wait_for(asyncio.shield(watcher.created), self._conn.options.timeout)
        except TimeoutError:
            self.forget(watcher)
            raise errors.Unavailable(f"{self._conn.where}: etcd did not confirm a watch") from None
        except BaseException:
            self.forget(watcher)
            raise

    def forget(self, watcher: _EtcdWatch) -> None:
        """Unregister `watcher` and cancel its etcd watch (in the background: it may be called from a finally)."""
        wid = watcher.watch_id
        if self._by_id.get(wid) is watcher:
            del self._by_id[wid]
            call = self._call
            if call is not None and watcher.sent_on is call:
                request = pb.WatchRequest(cancel_request=pb.WatchCancelRequest(watch_id=wid))
                task = asyncio.get_running_loop().create_task(self._write(call, request))
                task.add_done_callback(_ignore_result)

    async def _write(self, call: Any, request: pb.WatchRequest) -> None:
        async with self._write_lock:
            if call is self._call:
                await call.write(request)

    async def _send_create(self, call: Any, watcher: _EtcdWatch) -> None:
        async with self._write_lock:
            if call is not self._call or watcher.sent_on is call or self._by_id.get(watcher.watch_id) is not watcher:
                return
            watcher.sent_on = call
            await call.write(pb.WatchRequest(create_request=watcher.create_request()))

    async def _run(self) -> None:
        """Read the stream, reopening it when it fails (see the class docstring); ends when no watch is left.

        Whatever else stops it ends every watch, with `Unavailable`, rather than leaving them waiting."""
        try:
            await self._read()
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            failure = e if isinstance(e, errors.DevplaceError) else errors.Unavailable(f"{self._conn.where}: {e!r}")
            self._fail_all(failure)
            if not isinstance(e, Exception):
                raise

    async def _read(self) -> None:
        pause = 0.05
        failing_since: float | None = None
        while not self._closed and self._by_id:
            call: Any = None
            try:
                stub = await self._conn.watch_stub()
                call = stub.Watch(metadata=self._conn.metadata)  # type: ignore[call-arg]  # requests: call.write
                self._call = call
                for watcher in list(self._by_id.values()):
                    await self._send_create(call, watcher)
                while True:
                    reply = await call.read()
                    if not isinstance(reply, pb.WatchResponse):  # grpc.aio.EOF
                        raise errors.Unavailable(f"{self._conn.where}: the watch stream ended")
                    failing_since, pause = None, 0.05
                    self._dispatch(reply)
            except _StaleToken as e:  # the stream's token expired: a new token, a new stream, at once
                await self._conn.renew(e.token)
            except (grpc.aio.AioRpcError, errors.DevplaceError, grpc.aio.UsageError) as e:
                if self._closed:
                    return
                now = time.monotonic()
                failing_since = failing_since or now
                if now - failing_since >= self._reconnect_timeout:
                    detail = e.details() if isinstance(e, grpc.aio.AioRpcError) else str(e)
                    self._fail_all(errors.Unavailable(f"{self._conn.where}: the watch stream failed: {detail}"))
                    return
                await asyncio.sleep(pause)  # real time: waiting for etcd to come back
                pause = min(pause * 2, 2.0)
            finally:
                self._call = None
                if call is not None:
                    call.cancel()
                for watcher in self._by_id.values():
                    watcher.sent_on = None

    def _dispatch(self, reply: pb.WatchResponse) -> None:
        watcher = self._by_id.get(reply.watch_id)
        if watcher is None:
            return  # a cancelled watch's last words
        if reply.created:
            if reply.canceled and "auth token" in reply.cancel_reason and self._conn.token is not None:
                raise _StaleToken(self._conn.token)
            if reply.canceled:
                del self._by_id[reply.watch_id]
                watcher.refused(reply.cancel_reason)
                return
            watcher.confirmed(reply.header.revision)
        if reply.events and not watcher.offer(reply.events):
            self.forget(watcher)  # it overflowed: it starts again when it reads
            return
        if reply.compact_revision:
            del self._by_id[reply.watch_id]
            watcher.compacted(reply.compact_revision)
        elif reply.canceled and not reply.created:
            del self._by_id[reply.watch_id]
            watcher.refused(reply.cancel_reason or "etcd cancelled the watch")

    def _fail_all(self, error: errors.DevplaceError) -> None:
        for watcher in list(self._by_id.values()):
            watcher.fail(error)
        self._by_id.clear()

    async def close(self, error: errors.DevplaceError) -> None:
        self._closed = True
        self._fail_all(error)
        if self._reader is not None:
            self._reader.cancel()
        if self._call is not None:
            self._call.cancel()
            self._call = None


class _StaleToken(Exception):
    """etcd refused a watch for an expired auth token (etcd's simple tokens expire when idle)."""

    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.token = token


def _ignore_result(task: asyncio.Task[None]) -> None:
    if not task.cancelled():
        task.exception()  # a cancel request lost with its stream needs nothing: the stream is gone


class _EtcdWatch(base.BaseWatch):
    """One watch of an `EtcdStore` (see the module docstring): an etcd watch on the store's stream, filtered here.

    `_next` is the etcd revision its etcd watch (re)starts from when the stream is reopened (the one after the last
    event queued); `_delivered` the etcd revision of the last event taken from the queue, where it restarts after
    an overflow.
    """

    def __init__(
        self,
        store: EtcdStore,
        kind: str | None,
        namespace: str | None,
        since: int | None,
        selector: str | None,
        fields: str | None,
    ) -> None:
        super().__init__(kind, namespace, since, selector, fields)
        self._store = store
        self._filters = Filters()
        self._span = (b"", b"")
        self._next = 0
        self._delivered = 0
        self._pending: deque[pb.Event] = deque()
        self._overflowed = False
        self._waiter: asyncio.Future[None] | None = None
        self._error: errors.DevplaceError | None = None
        self._gone: errors.Gone | None = None
        self.watch_id = 0
        self.sent_on: Any = None
        self.created: asyncio.Future[int] | None = None

    async def __aenter__(self) -> _EtcdWatch:
        store = self._store
        store._check_open()
        kind, namespace, selector, fields = self._args
        self._filters = base.parse_filters(kind, namespace, selector, fields)
        if namespace is None and self._filters.fields is not None:
            namespace = self._filters.fields.exact("metadata.namespace")
        self._span = store._keys.span(kind, namespace)
        since = base.watch_since(self._since)
        if since is not None:
            await store._check_history(since)
            self._next = since + store._base + 1
        await store._mux.start(self)
        assert self.created is not None
        confirmed = self.created.result()
        self._revision = since if since is not None else confirmed - store._base
        self._delivered = self._next - 1
        self._entered = True
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._entered = False
        self._store._mux.forget(self)
        self._pending.clear()

    def create_request(self) -> pb.WatchCreateRequest:
        start, end = self._span
        return pb.WatchCreateRequest(
            key=start, range_end=end, start_revision=self._next, prev_kv=True, watch_id=self.watch_id
        )

    # -- called by the stream's reader ------------------------------------------------------------------------

    def confirmed(self, head: int) -> None:
        if not self._next:
            self._next = head + 1  # a watch from "now": what it resumes from if the stream breaks before an event
        if self.created is not None and not self.created.done():
            self.created.set_result(head)

    def offer(self, events: Sequence[pb.Event]) -> bool:
        """Queue `events`; False when that would pass `_PENDING_LIMIT` (then it drops them and restarts later).

        An empty queue takes a batch of any size (etcd sends at most a thousand revisions at once), else a watcher
        restarting far behind would overflow again at once, for ever."""
        if self._pending and len(self._pending) + len(events) > _PENDING_LIMIT:
            self._pending.clear()
            self._overflowed = True
            self._wake()
            return False
        self._pending.extend(events)
        self._next = events[-1].kv.mod_revision + 1
        self._wake()
        return True

    def compacted(self, revision: int) -> None:
        self._gone = errors.Gone(
            f"revision {self._next - 1 - self._store._base} has been compacted (oldest available is "
            f"{revision - self._store._base}); relist and watch again"
        )
        self._wake()

    def refused(self, reason: str) -> None:
        error = errors.Unavailable(f"{self._store._conn.where} refused a watch: {reason}")
        if self.created is not None and not self.created.done():
            self.created.set_exception(error)
        self.fail(error)

    def fail(self, error: errors.DevplaceError) -> None:
        self._error = error
        if self.created is not None and not self.created.done():
            self.created.set_exception(error)
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- read by the consumer -----------------------------------------------------------------------------------

    async def __anext__(self) -> Event:
        self._require_entered()
        store = self._store
        while True:
            if self._error is not None:
                raise self._error
            store._check_open()
            while self._pending:
                event = self._pending.popleft()
                found = self._event(event)
                if found is not None and self._filters.matches(found.object):
                    return found
            if self._gone is not None:
                raise self._gone
            if self._overflowed:
                self._overflowed = False
                self._next = self._delivered + 1
                await store._mux.start(self)
                continue
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    def _event(self, event: pb.Event) -> Event | None:
        store = self._store
        kv = event.kv
        self._delivered = kv.mod_revision
        type_: EventType
        if event.type == pb.Event.DELETE:
            if not event.prev_kv.key:
                self._gone = errors.Gone(
                    f"the object deleted at revision {kv.mod_revision - store._base} is no longer in the history; "
                    "relist and watch again"
                )
                self._pending.clear()
                return None
            obj = _loads(event.prev_kv.value)
            type_ = "DELETED"
        else:
            obj = _loads(kv.value)
            type_ = "ADDED" if kv.version == 1 else "MODIFIED"
        if obj is None:
            return None
        revision = kv.mod_revision - store._base
        obj["metadata"]["resourceVersion"] = str(revision)
        return Event(type_, obj, revision)
