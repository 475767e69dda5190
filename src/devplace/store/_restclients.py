"""The one Kubernetes REST client core under the `remote` and `kube` store backends.

Both backends speak the Kubernetes resource API over HTTP, `remote` to devplace's own API server, `kube` to a
Kubernetes one, so everything the protocol decides lives here once; the backends keep only what differs (their URL
layout, devplace's `/store` extras, resource discovery, status writes).

- Credentials -> HTTP client (`Credentials`, `RestClient`): TLS trusts the given CA (file or PEM data; else the
  system's roots) and presents the client certificate (file or PEM data; PEM data goes through a private temporary
  directory, gone once loaded). A bearer token is sent on every request; when it came from a file (a kubeconfig's
  `tokenFile`, the pod's service account) a 401 re-reads the file and retries once with a rotated token, as
  client-go does. A kubeconfig's exec plugin (`ExecPlugin`) is run for a token on first use and again on a 401.
  Username and password are HTTP basic auth. TLS material that cannot be loaded is `Invalid` naming `credentials`,
  before any request. The client is created on first use, in the event loop that uses it.
- Calls (`RestClient._call`): JSON in (`base.encode_json`), JSON out; a server that does not answer is
  `Unavailable`; an answer that is not JSON is `Unavailable`.
- Errors (`error_from_status`): a `Status` body is mapped back to the devplace error of its HTTP code and reason
  (404 NotFound, 409 AlreadyExists/Refused/Conflict, 410 Gone, 422/400/405 Invalid with the field causes, 413
  TooLarge, 504 with a `ResourceVersionTooLarge` cause, 401 Unauthenticated, 403 Forbidden, 429 TooManyRequests;
  anything else is `Unavailable`), in one place, so both backends raise what every backend raises.
- Paths (`Resource`): `/apis/<group>/<version>/[namespaces/<ns>/]<plural>[/<name>]` (`/api/v1/...` for core kinds);
  the name is quoted, so no name reaches another path or a query; an object asked for in a scope its kind does not
  have is `NotFound` before a round trip.
- Lists (`RestClient._list_pages`): follow `continue` tokens to the last page; the revision is the first page's
  `resourceVersion` (a later page may show newer objects, which a watch from that revision replays). A token that
  expires while paging (410) starts the list again, `_LIST_RESTARTS` times at most (then `Unavailable`); a 410 on the
  first page is the list's own refusal and is raised as `Gone`.
- Watches (`LineStreamWatch`): one HTTP response of JSON lines at a time. Entering registers the watch and opens the
  stream (a refusal raises at `async with`). Events at or below the revision a stream was opened from, or at or
  below the last one delivered, are replays and are skipped; a BOOKMARK moves the position without being delivered.
  When a stream ends or fails the watch reopens from its position, so a consumer sees every event once, in order, or
  `Gone`. Back-off runs on the store's clock: after a failure (`Unavailable` after `_MAX_RECONNECTS` in a row), and
  after streams that keep ending with nothing (never giving up: the server answers, it has nothing to say). `close`
  shuts every open stream (its reader gets `Unavailable`) and then the client.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import tempfile
import urllib.parse
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Generic, TypeVar, cast

from devplace import errors
from devplace.api import DEFAULT_NAMESPACE, KindInfo, lookup, parse_revision
from devplace.clocks import Clock, SystemClock
from devplace.store import _base as base
from devplace.store._base import Event, EventType, ObjectList
from devplace.store._exchanges import ExchangeError, Exchanges, Reply, Stream

JSON = "application/json"
JSON_PATCH = "application/json-patch+json"
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1alpha1", "client.authentication.k8s.io/v1beta1")
_MAX_RECONNECTS = 5
_MAX_QUIET_PAUSE = 5.0
_LIST_RESTARTS = 3
_WATCH_TYPES: frozenset[str] = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})


# -- credentials ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExecPlugin:
    """A kubeconfig's `user.exec`: a command that prints an `ExecCredential` whose `status.token` is the token."""

    api_version: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Credentials:
    """How a client proves who it is and checks the server (module docstring). PEM data or file paths."""

    token: str | None = None
    token_file: str | None = None  # re-read on a 401: the token may have been rotated
    ca_file: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: str | None = None
    key_data: str | None = None
    insecure_skip_verify: bool = False
    username: str | None = None
    password: str | None = None
    exec_plugin: ExecPlugin | None = None

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
            if self.presents_certificate:
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

    def auth(self) -> Authenticator | None:
        """What authenticates each request: the token (re-read from its file on a 401), else the exec plugin's
        token, else basic auth; None when there is nothing to send."""
        if self.token or self.token_file:
            return _TokenAuth(self.token, self.token_file)
        if self.exec_plugin is not None:
            return _ExecAuth(self.exec_plugin)
        if self.username and self.password:
            return _BasicAuth(self.username, self.password)
        return None


class Authenticator:
    """The `Authorization` header of each request, and what to retry with once when the server answers 401."""

    async def header(self) -> tuple[str, bool]:
        """The header's value, and whether it was obtained just now (a fresh one is not retried on a 401)."""
        raise NotImplementedError

    async def after_401(self, sent: str, fresh: bool) -> str | None:
        """Another value to retry once with, or None: the 401 stands."""
        return None


class _BasicAuth(Authenticator):
    def __init__(self, username: str, password: str) -> None:
        pair = base64.b64encode(f"{username}:{password}".encode()).decode("ascii")
        self._value = f"Basic {pair}"

    async def header(self) -> tuple[str, bool]:
        return self._value, False


class _TokenAuth(Authenticator):
    """A bearer token; one read from a file is read again when the server answers 401, and the request retried once
    when the file now holds another token (a service-account token the kubelet rotated)."""

    def __init__(self, token: str | None, token_file: str | None) -> None:
        self._token = token
        self._token_file = token_file

    def _read(self) -> str:
        assert self._token_file is not None
        try:
            return Path(self._token_file).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise errors.Unauthenticated(f"cannot read the token file {self._token_file}: {e}") from e

    async def header(self) -> tuple[str, bool]:
        if self._token is None:
            self._token = self._read()
        return f"Bearer {self._token}", False

    async def after_401(self, sent: str, fresh: bool) -> str | None:
        if self._token_file is None:
            return None
        try:
            token = self._read()
        except errors.Unauthenticated:
            return None  # the 401 stands
        if f"Bearer {token}" == sent:
            return None
        self._token = token
        return f"Bearer {token}"


class _ExecAuth(Authenticator):
    """The token an exec plugin prints, asked for on first use and again when the server answers 401."""

    def __init__(self, plugin: ExecPlugin) -> None:
        self._plugin = plugin
        self._bearer: str | None = None

    async def header(self) -> tuple[str, bool]:
        if self._bearer is None:
            self._bearer = await self._run()
            return self._bearer, True
        return self._bearer, False

    async def after_401(self, sent: str, fresh: bool) -> str | None:
        if fresh:
            return None
        self._bearer = await self._run()
        return self._bearer

    async def _run(self) -> str:
        plugin = self._plugin
        what = f"the kubeconfig's exec plugin {plugin.command!r}"
        try:
            process = await asyncio.create_subprocess_exec(
                plugin.command,
                *plugin.args,
                env={**os.environ, **dict(plugin.env)},
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await process.communicate()
        except OSError as e:
            raise errors.Unauthenticated(f"{what} did not start: {e}") from e
        if process.returncode != 0:
            stderr = err.decode("utf-8", "replace")[:200]
            raise errors.Unauthenticated(f"{what} exited with {process.returncode}: {stderr}")
        try:
            token = json.loads(out)["status"]["token"]
        except (ValueError, KeyError, TypeError) as e:
            raise errors.Unauthenticated(f"{what} printed no ExecCredential with a status.token") from e
        if not isinstance(token, str) or not token:
            raise errors.Unauthenticated(f"{what} printed no ExecCredential with a status.token")
        return f"Bearer {token}"


# -- answers --------------------------------------------------------------------------------------------------------


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


def json_or_none(response: Reply) -> Any:
    """The body of an error answer as JSON, None when it is not (a proxy's HTML page)."""
    try:
        return response.json()
    except ValueError:
        return None


def revision_of(obj: Mapping[str, Any]) -> int:
    """An object's `metadata.resourceVersion` as a revision, -1 when it has none."""
    try:
        return int(str((obj.get("metadata") or {}).get("resourceVersion")))
    except (TypeError, ValueError):
        return -1


def list_revision(meta: Mapping[str, Any]) -> int:
    """A list's revision: its `metadata.resourceVersion`; `Unavailable` when the server sent none."""
    try:
        return int(meta["resourceVersion"])
    except (KeyError, TypeError, ValueError) as e:
        raise errors.Unavailable(f"the API server answered a list without a resourceVersion: {dict(meta)!r}") from e


def watch_event(line: str) -> tuple[str, dict[str, Any], int]:
    """(type, object, revision) of one watch line, BOOKMARK included; an ERROR event raises the error its Status
    stands for; anything else the server should not send is `Unavailable`."""
    try:
        payload = base.decode_json(line)
        type_ = payload["type"]
        obj = payload["object"]
    except (ValueError, KeyError, TypeError) as e:
        raise errors.Unavailable(f"the API server sent a malformed watch event: {line[:200]!r}") from e
    if type_ == "ERROR":
        status = obj if isinstance(obj, Mapping) else {}
        raise error_from_status(int(status.get("code") or 500), status)
    if type_ not in _WATCH_TYPES:
        raise errors.Unavailable(f"the API server sent an unknown watch event type {type_!r}")
    revision = revision_of(obj) if type(obj) is dict or isinstance(obj, Mapping) else -1  # decoded: a dict
    if revision < 0:
        raise errors.Unavailable(f"the API server sent a watch event without a revision: {line[:200]!r}")
    return str(type_), obj, revision


# -- requests -------------------------------------------------------------------------------------------------------


def selector_params(selector: str | None, fields: str | None) -> dict[str, str]:
    """The query parameters of a label selector and a field selector (parsed by the caller first)."""
    params = {}
    if selector:
        params["labelSelector"] = selector
    if fields:
        params["fieldSelector"] = fields
    return params


def delete_options(resource_version: str | None) -> dict[str, Any] | None:
    """The body of a DELETE: `DeleteOptions` with the resourceVersion precondition (checked first), or none."""
    if resource_version is None:
        return None
    parse_revision("resourceVersion", resource_version)
    return {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"resourceVersion": resource_version}}


def scope_holds(namespaced: bool, namespace: str | None) -> bool:
    """Whether a list or watch in `namespace` ("": cluster-scoped, None: everywhere) can hold objects of a kind
    that is (or is not) namespaced."""
    return namespace is None or (namespace != "") == namespaced


def kind_info(kind: str) -> KindInfo:
    """The registry's kind, `Invalid` for a name that is not one exactly (a plural, a short name)."""
    info = lookup(kind)
    if info.kind != kind:
        raise errors.Invalid.field("kind", f"{kind!r} is not a kind (did you mean {info.kind!r}?)")
    return info


@dataclass(frozen=True)
class Resource:
    """Where a kind lives on the API server: `/apis/<group>/<version>/[namespaces/<ns>/]<plural>` (`/api/v1/...`
    for core kinds)."""

    kind: str
    api_version: str
    plural: str
    namespaced: bool
    has_status: bool = False

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


# -- the client -----------------------------------------------------------------------------------------------------


class RestClient:
    """A client of one Kubernetes-style API server at `server` (module docstring): the base of the `remote` and
    `kube` stores. `_what` names the server in messages."""

    _what: ClassVar[str] = "the API server"

    def __init__(self, server: str, credentials: Credentials, *, clock: Clock | None, timeout: float) -> None:
        self.server = server
        self.credentials = credentials
        self._clock = clock or SystemClock()
        self._timeout = timeout
        self._client: Exchanges | None = None
        self._auth: Authenticator | None = None
        self._watches: set[LineStreamWatch[Any]] = set()
        self._closed = False

    async def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None, *, fields: str | None = None
    ) -> ObjectList:
        """`base.Store.list`: each backend knows its paths."""
        raise NotImplementedError

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
        """`base.Store.list_page`, cut from the whole list (`base.page_of`): both backends are clients of a server
        whose own lists are already paged."""
        base.PageCut(after, limit, max_bytes)  # refuses bad bounds before a round trip
        return base.page_of(await self.list(kind, namespace, selector, fields=fields), after, limit, max_bytes)

    def _http(self) -> Exchanges:
        if self._closed:
            raise errors.Unavailable("store is closed")
        if self._client is None:
            self._client = self._new_client()
            self._auth = self.credentials.auth()
        return self._client

    def _new_client(self) -> Exchanges:
        """The HTTP client for `credentials`; `Invalid` naming `credentials` when its TLS material cannot load."""
        https = self.server.lower().startswith("https://")
        return Exchanges(
            self.server,
            ssl_context=self.credentials.ssl_context() if https else None,
            headers={"Accept": JSON},
            timeout=self._timeout,
        )

    async def bind(self, body: Mapping[str, Any]) -> None:
        """POST a v1 Binding to its Pod's `binding` subresource (`store.bind_pod`)."""
        meta = body.get("metadata") or {}
        namespace = str(meta.get("namespace") or DEFAULT_NAMESPACE)
        pods = Resource("Pod", "v1", "pods", True)
        await self._call("POST", pods.item(str(meta.get("name") or ""), namespace) + "/binding", body=dict(body))

    async def _authorized(self, headers: dict[str, str]) -> tuple[str, bool] | None:
        """Put the `Authorization` header into `headers`; what was sent (for `_retry_401`)."""
        if self._auth is None:
            return None
        value, fresh = await self._auth.header()
        headers["Authorization"] = value
        return value, fresh

    async def _retry_401(self, sent: tuple[str, bool] | None, headers: dict[str, str]) -> bool:
        """After a 401: whether to send once more (with the header `headers` now holds)."""
        if sent is None or self._auth is None:
            return False
        retry = await self._auth.after_401(*sent)
        if retry is None:
            return False
        headers["Authorization"] = retry
        return True

    async def _exchange(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = JSON,
    ) -> Reply:
        """One request through the client and the credentials; `Unavailable` when the server does not answer."""
        client = self._http()
        content = None if body is None else base.encode_json(body)
        headers = {"Content-Type": content_type} if content is not None else {}
        try:
            sent = await self._authorized(headers)
            reply = await client.request(method, path, content=content, params=params, headers=headers)
            if reply.status_code == 401 and await self._retry_401(sent, headers):
                reply = await client.request(method, path, content=content, params=params, headers=headers)
        except ExchangeError as e:
            raise errors.Unavailable(f"{self._what} at {self.server} did not answer: {e}") from e
        return reply

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = JSON,
    ) -> Any:
        response = await self._exchange(method, path, body=body, params=params, content_type=content_type)
        if response.status_code >= 400:
            raise error_from_status(response.status_code, json_or_none(response), response.text[:200])
        try:
            return base.decode_json(response.content)
        except ValueError as e:
            raise errors.Unavailable(f"{self._what} answered {method} {path} with no JSON") from e

    async def _list_pages(self, path: str, params: Mapping[str, str], *, page_size: int | None = None) -> ObjectList:
        """Every page of the list at `path` (module docstring); `page_size` None lets the server choose."""
        first = {**params, "limit": str(page_size)} if page_size else dict(params)
        for _ in range(_LIST_RESTARTS):
            items: list[dict[str, Any]] = []
            revision: int | None = None
            token = ""
            try:
                while True:
                    page = await self._call("GET", path, params={**first, "continue": token} if token else first)
                    meta = page.get("metadata") or {}
                    revision = list_revision(meta) if revision is None else revision
                    items.extend(page.get("items") or [])
                    token = str(meta.get("continue") or "")
                    if not token:
                        return ObjectList(items, revision)
            except errors.Gone:
                if not token:
                    raise  # the first page's own refusal, not an expired token
        raise errors.Unavailable(f"listing {path}: the continue token kept expiring ({_LIST_RESTARTS} attempts)")

    async def close(self) -> None:
        self._closed = True
        for watch in list(self._watches):
            await watch._disconnect()
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


# -- watches --------------------------------------------------------------------------------------------------------

C = TypeVar("C", bound=RestClient)


class LineStreamWatch(base.BaseWatch, Generic[C]):
    """A watch read as JSON lines of one HTTP response at a time, reopened from its position when the response ends
    or fails (module docstring). A backend's subclass enters: it checks the arguments, sets `_path`, `_params`,
    `_revision` and (for a `since=0` replay) `_listed`, then calls `_open(start)`. `_ACCEPT` is the media type
    asked for."""

    _ACCEPT: ClassVar[str] = JSON

    def __init__(
        self,
        store: C,
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
        self._floor = -1  # events at or below this revision are replays: skipped
        self._listed: deque[Event] = deque()  # handed out before the stream's events
        self._response: Stream | None = None
        self._lines: Any = None  # the open response's line iterator
        self._failures = 0  # failed attempts in a row
        self._quiet = 0  # streams in a row that ended cleanly without moving the position

    async def _open(self, start: int) -> None:
        """Register the watch and open its first stream from `start`; on a refusal nothing stays registered."""
        store = self._store
        self._position = start
        store._watches.add(self)
        try:
            await self._connect()
        except ExchangeError as e:
            store._watches.discard(self)
            raise errors.Unavailable(
                f"watch {self._path}: the API server at {store.server} did not answer: {e!r}"
            ) from e
        except BaseException:
            store._watches.discard(self)
            raise
        self._entered = True

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
                # The stream ended (a server timeout, a restart): resume from the position. A server (or a proxy)
                # that keeps ending streams at once must not turn this into a busy loop: back off.
                await self._disconnect()
                self._check_open()
                if self._quiet > 1:
                    await self._store._clock.sleep(min(0.05 * 2 ** (self._quiet - 2), _MAX_QUIET_PAUSE))
                continue
            except ExchangeError as e:
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
            type_, obj, revision = watch_event(line)
            if type_ == "BOOKMARK":
                if revision > self._position:
                    self._position = revision
                    self._quiet = 0
                continue
            if revision <= self._floor:
                continue  # delivered before a reconnect
            self._floor = revision
            self._position = max(self._position, revision)
            self._quiet = 0
            return Event(cast(EventType, type_), obj, revision)  # watch_event lets only event types through

    async def _connect(self) -> None:
        """Open the stream from the position; a refusal raises its devplace error."""
        store = self._store
        client = store._http()
        params = {**self._params, "resourceVersion": str(self._position)}
        headers = {"Accept": self._ACCEPT}
        sent = await store._authorized(headers)
        response = await client.stream("GET", self._path, params=params, headers=headers)
        if response.status_code == 401 and await store._retry_401(sent, headers):
            await response.aclose()
            response = await client.stream("GET", self._path, params=params, headers=headers)
        if response.status_code >= 400:
            answer = await response.aread()
            raise error_from_status(answer.status_code, json_or_none(answer), answer.text[:200])
        self._response = response
        self._lines = response.aiter_lines()
        self._floor = self._position
        self._failures = 0
        self._quiet += 1

    async def _reconnect(self) -> None:
        while True:
            self._check_open()
            try:
                await self._connect()
                return
            except ExchangeError as e:
                self._check_open()
                await self._failed(e)

    async def _failed(self, e: ExchangeError) -> None:
        self._failures += 1
        if self._failures > _MAX_RECONNECTS:
            server = self._store.server
            raise errors.Unavailable(f"watch {self._path}: the API server at {server} is gone: {e!r}") from e
        await self._store._clock.sleep(0.05 * 2 ** (self._failures - 1))

    async def _disconnect(self) -> None:
        response, self._response, self._lines = self._response, None, None
        if response is not None:
            await response.aclose()

    def _check_open(self) -> None:
        if self._store._closed:
            raise errors.Unavailable("store is closed")
