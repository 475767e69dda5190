"""Lists as Kubernetes serves them: `limit` and `continue` paging, `resourceVersion` and `resourceVersionMatch`.

The resource API parses a list request's query into `ListOptions` here, has the store cut the page
(`Store.list_page`: the objects after a key, as their stored JSON) and answers it with `list_metadata`'s metadata.
The store lists in key order (namespace, then name), so a page ends at a key and the next one starts after it.

Paging. `limit=N` returns at most N items and, when more remain, `metadata.continue` (an opaque token: base64 of the
first page's revision and the last key the page examined) and, for a list without a label or field selector,
`metadata.remainingItemCount` (Kubernetes leaves it out when selectors make the count unknown). The server pages
every list by count and by bytes: a request without `limit`, or with a larger one, gets at most `MAX_LIST_ITEMS`
items, and a page ends before the object that would take its objects' JSON past `MAX_LIST_BYTES` (it holds at least
one object; 1.5 MiB at most each), with a `continue` token when more remain. So no response grows with the store, and
a list of big objects costs the event loop one page at a time, whoever asks (Kubernetes clients follow `continue`;
so does the remote store backend; `limit=500` alone would let 500 objects of 1.5 MiB through). A page whose label or
field selector skipped more than `MAX_LIST_BYTES` of objects the store had to decode may end early, even with no
items, and carry a `continue` token, as a Kubernetes page may. The page is sent as the store keeps its objects' JSON,
a slice of the response at a time (`server.representations`).

Consistency. Kubernetes serves every page from etcd's snapshot at the first page's revision. devplace's stores keep
no snapshots, so each page (read in one go) is cut from the current state, after the last key served: an object
changed while a client pages shows its newer state if it sorts after the page boundary, and an object created before
the boundary meanwhile is not in the pages. Every page's `metadata.resourceVersion` is the first page's revision, so a
client that lists then watches from that revision (an informer, `kubectl get -w`) is replayed every change made while
it paged, and ends up with the current state (it may see an object's newer state in a page and then again, as
MODIFIED, in the watch). A watch start (Kubernetes' ADDED events, `every_object`) reads the store the same way, a
page at a time, and watches from its first page's revision. A token whose revision the store has compacted is refused
with 410 `Expired`, as Kubernetes does, since a watch from it would be too; a token that does not decode is 400
naming `continue`.

`resourceVersion` on a list: unset, "" and "0" read the current state; `N` with `resourceVersionMatch` unset or
`NotOlderThan` reads the current state if the store has reached N, else `ResourceVersionTooLarge` (504, Kubernetes'
answer when its cache has not caught up); `Exact` can only be served at the store's current revision (no snapshots:
an older one is 410 `Expired`, which makes a client relist). `continue` with a resourceVersion, a match without a
resourceVersion, and `Exact` with "0" are refused (422) as Kubernetes refuses them.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from devplace import errors
from devplace.api import parse_revision
from devplace.store import EncodedPage, Store

MAX_LIST_ITEMS = 5000
"""The most items one list response carries (module docstring); read at each request, so tests may lower it."""

MAX_LIST_BYTES = 4 * 1024 * 1024
"""The most bytes of objects' JSON one list response carries past its first object (module docstring); read at each
request, so tests may lower it. Also what a watch start reads of the store at a time."""

Match = Literal["", "NotOlderThan", "Exact"]
_MATCHES: tuple[Match, ...] = ("", "NotOlderThan", "Exact")
_TOKEN_VERSION = 1


@dataclass(frozen=True)
class Continue:
    """Where a paged list goes on: the first page's revision and the last key served (namespace, name)."""

    revision: int
    namespace: str
    name: str


@dataclass(frozen=True)
class ListOptions:
    limit: int | None = None
    continue_from: Continue | None = None
    resource_version: int | None = None  # None: the current state
    match: Match = ""


def encode_continue(revision: int, namespace: str, name: str) -> str:
    payload = {"v": _TOKEN_VERSION, "rv": revision, "ns": namespace, "name": name}
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_continue(token: str) -> Continue:
    """The position a `continue` token names; `Malformed` (400) naming `continue` when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        payload = json.loads(raw)
    except (binascii.Error, ValueError, RecursionError) as e:
        raise errors.Malformed.field("continue", "invalid continue token: not one this server issued") from e
    if not isinstance(payload, Mapping) or payload.get("v") != _TOKEN_VERSION:
        raise errors.Malformed.field("continue", "invalid continue token: not one this server issued")
    ns, name, rv = payload.get("ns"), payload.get("name"), payload.get("rv")
    if not isinstance(ns, str) or not isinstance(name, str) or not name:
        raise errors.Malformed.field("continue", "invalid continue token: it names no position")
    try:
        revision = parse_revision("continue", rv)
    except errors.Invalid as e:
        raise errors.Malformed.field("continue", f"invalid continue token: {e.fields[0].reason}") from e
    return Continue(revision, ns, name)


def _limit(raw: str | None) -> int | None:
    if raw is None or raw == "":
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise errors.Invalid.field("limit", f"{raw[:40]!r} is not a non-negative whole number")
    value = int(raw)
    return value or None  # limit=0: no limit asked for, as Kubernetes reads it (the server's own still applies)


def list_options(query: Mapping[str, str]) -> ListOptions:
    """A list request's paging and consistency options, checked as Kubernetes checks them (module docstring)."""
    limit = _limit(query.get("limit"))
    if limit is None or limit > MAX_LIST_ITEMS:
        limit = MAX_LIST_ITEMS
    token = query.get("continue") or None
    raw_rv = query.get("resourceVersion") or ""
    raw_match = query.get("resourceVersionMatch") or ""
    if raw_match not in _MATCHES:
        allowed = ", ".join(m for m in _MATCHES if m)
        raise errors.Invalid.field("resourceVersionMatch", f"unsupported value {raw_match[:40]!r} (one of {allowed})")
    match: Match = raw_match  # checked just above
    if token is not None and raw_rv:
        raise errors.Invalid.field("resourceVersion", "specifying resource version is not allowed when using continue")
    if match and not raw_rv:
        raise errors.Invalid.field("resourceVersionMatch", "is forbidden unless resourceVersion is provided")
    if token is not None and match:
        raise errors.Invalid.field("resourceVersionMatch", "is forbidden when continue is provided")
    rv = parse_revision("resourceVersion", raw_rv) if raw_rv else None
    if match == "Exact" and rv == 0:
        raise errors.Invalid.field("resourceVersionMatch", 'Exact is forbidden for resourceVersion "0"')
    return ListOptions(limit, decode_continue(token) if token is not None else None, rv, match)


def check_revision(options: ListOptions, current: int) -> None:
    """Refuse a list the store cannot serve at its `current` revision (module docstring); pure."""
    wanted = options.resource_version
    if not wanted:
        return
    if wanted > current:
        raise errors.ResourceVersionTooLarge.at(wanted, current)
    if options.match == "Exact" and wanted != current:
        raise errors.Gone(
            f"cannot list at resourceVersion {wanted} exactly: the store keeps no snapshots and is at {current}; "
            "list without a resourceVersion"
        )


def after(options: ListOptions) -> tuple[str, str] | None:
    """The key a page starts after: its `continue` token's, or none for a first page."""
    start = options.continue_from
    return None if start is None else (start.namespace, start.name)


def list_metadata(page: EncodedPage, options: ListOptions, *, selected: bool) -> dict[str, Any]:
    """A page's list metadata: resourceVersion (the first page's), and `continue` when more remain, with
    `remainingItemCount` unless a label or field selector (`selected`) makes the count unknown."""
    revision = page.revision if options.continue_from is None else options.continue_from.revision
    metadata: dict[str, Any] = {"resourceVersion": str(revision)}
    if page.remaining and page.last is not None:
        metadata["continue"] = encode_continue(revision, *page.last)
        if not selected:
            metadata["remainingItemCount"] = page.remaining
    return metadata


async def every_object(
    store: Store, kind: str, namespace: str | None, selector: str | None, fields: str | None, first: EncodedPage
) -> AsyncGenerator[bytes, None]:
    """The JSON of every object `first` and the pages after it hold: a watch start's, read a page at a time (each
    at the store's state when it is read, as a client paging would see them)."""
    page = first
    while True:
        for item in page.items:
            yield item.body
        if not page.remaining or page.last is None:
            return
        page = await store.list_page(
            kind, namespace, selector, fields=fields, after=page.last, limit=MAX_LIST_ITEMS, max_bytes=MAX_LIST_BYTES
        )
