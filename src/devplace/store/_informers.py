"""Informers: typed, indexed, always-current caches of one kind, filled by list -> watch -> relist on `Gone`, and
shared: one list and one watch per (kind, namespace, selectors) per process, however many parts read it.

Every control loop (agent, simulated kubelet, controller, scheduler) needs the same thing: the objects of a few kinds,
parsed once, looked up by key and by index, and a callback when one changes. Two layers give it:

- a `Feed` lists and watches one (kind, namespace, label selector, field selector) and holds the raw objects, their
  revisions and the tombstones of deletions: the freshness rules below live here, once;
- an `Informer` is one consumer's view of a feed: its own parse (typed values), its own indexes and handlers.

An `InformerSet` holds the feeds of one store object (`InformerSet.of(store)`): every `Informer` built over that store
joins the feed of its key, so in one process (one `Fleet`, or a daemon running the controller and the scheduler) each
kind is listed and watched once and its raw objects are held once. A *wide* set (`wide=True`, what `Fleet` uses, since
every part of a simulated cluster lives in one process) keeps one feed per kind and applies each view's namespace and
selectors itself, so even the per-node field-selected Pod informers share one watch; a narrow set (the default, right
for a node agent alone in its process) lets the store filter, so an agent's Pod informer with `spec.nodeName=<node>`
never receives another node's Pods.

Freshness: an entry is replaced only by a newer revision. Store revisions are global and monotonic, so "newer" is well
defined across watch events, relists and the results of the owners' own writes (`record`, which every view of the
feed then sees), whichever arrives first; a deletion leaves a tombstone (bounded) so a late, older write result cannot
resurrect a deleted object. A listing at a revision below one the feed has seen means the store was reset (a server
restarted on a fresh memory store answers the watch with `Gone`, the feed relists): its revisions say nothing against
the old ones, so that listing replaces the cache outright.

Routes: a view may take only part of a feed (`route=Route(fn, keys)`): `fn(raw object)` names the route keys an
object goes by (an Instance: the nodes it lists or whose slots it holds), and the view takes the objects that name one
of its `keys`. The feed computes each route function once per change and keeps, per route key, the views and the
objects, so a change reaches only the views it concerns (and the one it left, as a deletion): a thousand node agents
over one Instance feed cost one route and one or two views per change, not a thousand. `peek` reads an object the
route leaves out, parsed on demand and not kept.

Parsing: `parse(obj, previous)` turns a wire dict into a view's value (`previous` is the entry it replaces, for
parsers that reuse unchanged parts; views with the same parse function share one result per change, so a parse must
depend on the object alone, and on `previous` only to reuse equal parts). An object that does not parse
(`errors.Invalid`, `KeyError`, `TypeError`, `ValueError`) is absent from that view and logged once per distinct
reason: never trusted, never fatal. Views with the default parse share the feed's dicts; nobody mutates them.

Change handlers run synchronously on the event loop after the view has changed, in subscription order, with a
`Change(key, old, new)`; a handler that raises is logged and the others still run (a bug in one consumer must not
stop the cache). Handlers must not await: they mark work for the owner's loops.

Failure semantics (`run`): a view's `run` keeps its feed running (the first starts the feed's one list/watch task, the
last to stop cancels it) and never returns; run it under a `Supervisor` loop, which restarts it if a bug escapes. In
the feed, `Gone` relists at once; any other store error is logged and the feed relists after a pause (real time: it
waits on I/O). `synced` is set once the first listing is in the view and stays set across relists; a view made over a
feed that is already synced starts with its objects, synced.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from devplace import errors
from devplace.store._base import Filters, Store, parse_filters

log = logging.getLogger(__name__)

T = TypeVar("T")
ObjKey = tuple[str, str]
"""(namespace, name); namespace is "" for cluster-scoped kinds."""

Parse = Callable[[dict[str, Any], Any], T]
Handler = Callable[["Change[T]"], None]
IndexFn = Callable[[T], Iterable[Hashable]]
RouteFn = Callable[[Mapping[str, Any]], Iterable[Hashable]]
FeedKey = tuple[str, str | None, str | None, str | None]
"""(kind, namespace, label selector, field selector) of one list/watch."""

_TOMBSTONES = 50_000
_UNPARSABLE = (errors.Invalid, KeyError, TypeError, ValueError)
_NOWHERE: frozenset[Hashable] = frozenset()
_VIEWS_BY_ROUTES = 1024
"""Route sets a router remembers the views of (`_Router.views_for`); past that it starts over."""


def identity(obj: dict[str, Any], previous: Any) -> dict[str, Any]:
    """The default parse: keep the wire dict."""
    return obj


def revision_of(obj: Mapping[str, Any]) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def obj_key_of(obj: Mapping[str, Any]) -> ObjKey:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


@dataclass(frozen=True)
class Route:
    """The part of a feed a view takes: the objects for which `fn` (of the raw object; it must not raise) names one
    of `keys` (module docstring). Views routed by one function share its results: pass the same function."""

    fn: RouteFn
    keys: frozenset[Hashable]


class _Router:
    """One route function's bookkeeping in a feed: each object's route keys, and per key its views and objects."""

    def __init__(self, fn: RouteFn, objects: Mapping[ObjKey, Mapping[str, Any]]) -> None:
        self.fn = fn
        self.routes: dict[ObjKey, frozenset[Hashable]] = {}
        self.objects: dict[Hashable, set[ObjKey]] = {}
        self.views: dict[Hashable, list[Informer[Any]]] = {}
        self._views_by_routes: dict[frozenset[Hashable], tuple[Informer[Any], ...]] = {}
        """`views_for`'s answers, kept until a view attaches or detaches (most changes keep an object's routes)."""
        for key, obj in objects.items():
            self.move(key, self.route(obj))

    def route(self, obj: Mapping[str, Any]) -> frozenset[Hashable]:
        try:
            return frozenset(self.fn(obj))
        except Exception:
            log.exception("a route function failed on %s/%s", *obj_key_of(obj))
            return _NOWHERE

    def move(self, key: ObjKey, new: frozenset[Hashable]) -> frozenset[Hashable]:
        """Record `key`'s new route keys; returns its old ones."""
        old = self.routes.get(key, _NOWHERE)
        if old == new:
            return old
        for route in old - new:
            bucket = self.objects.get(route)
            if bucket is not None:
                bucket.discard(key)
                if not bucket:
                    del self.objects[route]
        for route in new - old:
            self.objects.setdefault(route, set()).add(key)
        if new:
            self.routes[key] = new
        else:
            self.routes.pop(key, None)
        return old

    def views_for(self, routes: frozenset[Hashable]) -> tuple[Informer[Any], ...]:
        found = self._views_by_routes.get(routes)
        if found is None:
            out: dict[int, Informer[Any]] = {}
            for route in routes:
                for view in self.views.get(route, ()):
                    out.setdefault(id(view), view)
            found = tuple(out.values())
            if len(self._views_by_routes) >= _VIEWS_BY_ROUTES:
                self._views_by_routes.clear()
            self._views_by_routes[routes] = found
        return found

    def attach(self, view: Informer[Any], routes: Iterable[Hashable]) -> list[ObjKey]:
        """`view` takes what `routes` name from now on; returns the keys of the objects routed to it now, sorted."""
        self._views_by_routes.clear()
        out: set[ObjKey] = set()
        for route in routes:
            self.views.setdefault(route, []).append(view)
            out |= self.objects.get(route, set())
        return sorted(out)

    def detach(self, view: Informer[Any], routes: Iterable[Hashable]) -> bool:
        """`view` takes nothing more; returns whether any view is left."""
        self._views_by_routes.clear()
        for route in routes:
            listed = self.views.get(route, [])
            if view in listed:
                listed.remove(view)
            if not listed:
                self.views.pop(route, None)
        return bool(self.views)


_FIELD_ROUTES: dict[str, RouteFn] = {}


def _pinned_route(filters: Filters) -> Route | None:
    """In a wide feed, a view whose field selector pins a field (`spec.nodeName=node-a`) is routed by that field's
    value: a thousand per-node views cost one lookup per change, not a thousand filter checks (the view's filters
    still decide)."""
    pinned = next((r for r in filters.fields.requirements if r.equal), None) if filters.fields is not None else None
    if pinned is None:
        return None
    fn = _FIELD_ROUTES.get(pinned.field)
    if fn is None:
        reader = pinned

        def fn(obj: Mapping[str, Any]) -> tuple[str]:
            return (reader.value_of(obj),)

        _FIELD_ROUTES[pinned.field] = fn
    return Route(fn, frozenset({pinned.value}))


@dataclass(frozen=True)
class Change(Generic[T]):
    """One change of an informer's cache: `old` None for an addition, `new` None for a deletion."""

    key: ObjKey
    old: T | None
    new: T | None


class InformerSet:
    """The feeds of one store object in this process (module docstring). `of(store)` finds or makes it."""

    _sets: ClassVar[weakref.WeakKeyDictionary[Any, InformerSet]] = weakref.WeakKeyDictionary()

    def __init__(self, store: Store, *, wide: bool = False, shared: bool = True) -> None:
        self.store = store
        self.wide = wide
        """One feed per kind, each view filtering for itself (set before the informers are made)."""
        self.shared = shared
        """False: every view gets a feed of its own, as if each part ran alone in its process (what a test that
        records which part asks for what needs); `wide` is then ignored."""
        self.feeds: dict[FeedKey, Feed] = {}
        self.lists: dict[str, int] = {}
        """Lists made, by kind (for tests and benches: what sharing saves)."""
        self.watches: dict[str, int] = {}
        """Watches opened, by kind."""

    @classmethod
    def of(cls, store: Store, *, wide: bool | None = None, shared: bool | None = None) -> InformerSet:
        """The set of `store` (made on first use); `wide` or `shared` given changes it for the feeds made from now
        on."""
        found = cls._sets.get(store)
        if found is None:
            found = cls._sets[store] = InformerSet(store)
        if wide is not None:
            found.wide = wide
        if shared is not None:
            found.shared = shared
        return found

    def feed(
        self,
        kind: str,
        namespace: str | None = None,
        selector: str | None = None,
        fields: str | None = None,
        *,
        retry_pause: tuple[float, float] = (0.05, 2.0),
    ) -> Feed:
        if not self.shared:
            return Feed(self, (kind, namespace, selector or None, fields or None), retry_pause)
        key: FeedKey = (kind, None, None, None) if self.wide else (kind, namespace, selector or None, fields or None)
        found = self.feeds.get(key)
        if found is None:
            found = self.feeds[key] = Feed(self, key, retry_pause)
        return found


class Feed:
    """One list/watch: the raw objects, their revisions and tombstones, fanned out to its views (module docstring)."""

    def __init__(self, owner: InformerSet, key: FeedKey, retry_pause: tuple[float, float]) -> None:
        self.owner = owner
        self.store = owner.store
        self.kind, self.namespace, self.selector, self.fields = key
        self._retry_pause = retry_pause
        self.objects: dict[ObjKey, dict[str, Any]] = {}
        self._revisions: dict[ObjKey, int] = {}
        self._tombstones: dict[ObjKey, int] = {}
        self.views: list[Informer[Any]] = []
        """Every view of the feed, routed or not."""
        self._plain: list[Informer[Any]] = []
        self._routers: dict[RouteFn, _Router] = {}
        self.synced = False
        self.revision = 0
        """The newest store revision this feed reflects (a listing's, or the last watch event's)."""
        self._task: asyncio.Task[None] | None = None
        self._runners = 0

    def resource_version(self, key: ObjKey) -> int | None:
        return self._revisions.get(key)

    # -- updates, fanned out -----------------------------------------------------------------------------------

    def _fresh(self, key: ObjKey, rv: int) -> bool:
        return rv > self._revisions.get(key, -1) and rv > self._tombstones.get(key, -1)

    def record(self, obj: Mapping[str, Any], deleted: bool, origin: Informer[Any] | None, parsed: Any) -> bool:
        key = obj_key_of(obj)
        rv = revision_of(obj)
        if not self._fresh(key, rv):
            return False
        if deleted:
            self._delete(key, rv)
        else:
            self._put(key, dict(obj), rv, origin, parsed)
        return True

    def forget(self, key: ObjKey) -> None:
        if key in self.objects or key in self._revisions:
            self._delete(key, self._revisions.get(key, -1))

    def _put(
        self, key: ObjKey, obj: dict[str, Any], rv: int, origin: Informer[Any] | None = None, parsed: Any = None
    ) -> None:
        self._revisions[key] = rv
        self.objects[key] = obj
        shared: dict[Parse[Any], Any] = {}  # one parse per parse function for this change
        for view in list(self._plain):
            view._take(key, obj, rv, parsed if view is origin else None, shared)
        for router in list(self._routers.values()):
            new = router.route(obj)
            old = router.move(key, new)
            for view in router.views_for(new if old == new else old | new):
                if view._route is not None and view._route.keys & new:
                    view._take(key, obj, rv, parsed if view is origin else None, shared)
                else:
                    view._drop(key)

    def _delete(self, key: ObjKey, rv: int) -> None:
        self._revisions.pop(key, None)
        self._tombstones[key] = max(rv, self._tombstones.get(key, -1))
        if len(self._tombstones) > _TOMBSTONES:
            for old_key in sorted(self._tombstones, key=self._tombstones.__getitem__)[: _TOMBSTONES // 2]:
                del self._tombstones[old_key]
        self.objects.pop(key, None)
        for view in list(self._plain):
            view._drop(key)
        for router in list(self._routers.values()):
            for view in router.views_for(router.move(key, _NOWHERE)):
                view._drop(key)

    # -- views ---------------------------------------------------------------------------------------------------

    def add_view(self, view: Informer[Any]) -> None:
        """A view joins (or joins again): it becomes what the feed holds for it (changes notified)."""
        if view._joined:
            return
        view._joined = True
        self.views.append(view)
        route = view._route
        if route is None:
            self._plain.append(view)
            keys: Iterable[ObjKey] = list(self.objects)
        else:
            router = self._routers.get(route.fn)
            if router is None:
                router = self._routers[route.fn] = _Router(route.fn, self.objects)
            keys = router.attach(view, route.keys)
        wanted = set(keys)
        for key in [k for k in view._items if k not in wanted]:
            view._drop(key)  # gone, or routed elsewhere, while the view was away
        for key in keys:
            obj = self.objects.get(key)
            if obj is not None:
                view._take(key, obj, self._revisions.get(key, 0), None)

    def remove_view(self, view: Informer[Any]) -> None:
        if not view._joined:
            return
        view._joined = False
        self.views.remove(view)
        route = view._route
        if route is None:
            self._plain.remove(view)
            return
        router = self._routers[route.fn]
        if not router.detach(view, route.keys):
            del self._routers[route.fn]

    def replace(self, items: Iterable[Mapping[str, Any]], revision: int) -> None:
        """A relist: the feed becomes `items` as of `revision`, keeping only entries newer than the listing (own
        writes that landed after it); a listing from a store that was reset replaces it all."""
        if revision < self.revision:  # the store went back in time: nothing cached compares with its revisions
            self._tombstones.clear()
            self._revisions = dict.fromkeys(self._revisions, -1)
            self.revision = revision
        seen: set[ObjKey] = set()
        for obj in items:
            key = obj_key_of(obj)
            seen.add(key)
            rv = revision_of(obj)
            self._tombstones.pop(key, None)
            if self._revisions.get(key, -1) >= rv:
                for view in self.views:
                    view._retry_invalid(key, self.objects.get(key), rv)
                continue  # unchanged, or the cache holds a newer write of ours
            self._put(key, dict(obj), rv)
        for key in [k for k in set(self.objects) | set(self._revisions) if k not in seen]:
            if self._revisions.get(key, -1) > revision:
                continue  # written after the listing: the watch will say more
            self._delete(key, revision)
        self.revision = max(self.revision, revision)
        if not self.synced:
            self.synced = True
            for view in self.views:
                view.synced.set()

    # -- the loop ------------------------------------------------------------------------------------------------

    async def list_once(self) -> int:
        """List into the feed (and so into every view); returns the listing's revision."""
        self.owner.lists[self.kind] = self.owner.lists.get(self.kind, 0) + 1
        listing = await self.store.list(self.kind, self.namespace, self.selector, fields=self.fields)
        self.replace(listing.items, listing.revision)
        return listing.revision

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def run_for_view(self) -> None:
        """Keep the feed's one list/watch task running while any view runs; the last view to stop cancels it."""
        self._runners += 1
        try:
            if self._task is None or self._task.done():
                starter = asyncio.current_task()  # the feed's task is named after the first view's (its part's)
                name = f"{starter.get_name() if starter is not None else ''}: feed {self.kind}"
                self._task = asyncio.get_running_loop().create_task(self._run(), name=name)
            await asyncio.shield(self._task)
        finally:
            self._runners -= 1
            if self._runners == 0 and self._task is not None:
                self._task.cancel()
                self._task = None

    async def _run(self) -> None:
        """List, then watch; relist on `Gone` at once, on other store errors after a growing pause. Never returns."""
        pause = self._retry_pause[0]
        revision: int | None = None
        while True:
            try:
                if revision is None:
                    revision = await self.list_once()
                self.owner.watches[self.kind] = self.owner.watches.get(self.kind, 0) + 1
                async with self.store.watch(
                    self.kind, self.namespace, since=revision, selector=self.selector, fields=self.fields
                ) as events:
                    async for event in events:
                        revision = event.revision
                        self.revision = event.revision
                        self.record(event.object, event.type == "DELETED", None, None)
                        pause = self._retry_pause[0]
                    revision = None  # a watch that ends without an error: list again
            except errors.Gone:
                revision = None
            except errors.DevplaceError as e:
                log.warning("%s feed: %s; relisting in %.2fs", self.kind, e, pause)
                revision = None
                await asyncio.sleep(pause)
                pause = min(pause * 2, self._retry_pause[1])


class Informer(Generic[T]):
    """One consumer's typed, indexed view of a shared feed (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        kind: str,
        parse: Parse[T] = identity,  # type: ignore[assignment]  # T is dict[str, Any] when parse is omitted
        *,
        namespace: str | None = None,
        selector: str | None = None,
        fields: str | None = None,
        indexes: Mapping[str, IndexFn[T]] | None = None,
        retry_pause: tuple[float, float] = (0.05, 2.0),
        name: str | None = None,
        route: Route | None = None,
    ) -> None:
        self.store = store
        self.kind = kind
        self.namespace = namespace
        self.selector = selector
        self.fields = fields
        self.name = name or kind
        self._parse = parse
        self._items: dict[ObjKey, T] = {}
        self._invalid: dict[ObjKey, str] = {}
        self._index_fns: dict[str, IndexFn[T]] = dict(indexes or {})
        self._indexes: dict[str, dict[Hashable, set[ObjKey]]] = {name: {} for name in self._index_fns}
        self._entries: dict[ObjKey, dict[str, tuple[Hashable, ...]]] = {}
        self._sorted: dict[tuple[str, Hashable], list[ObjKey]] = {}  # index buckets in key order, built on demand
        self._handlers: list[Handler[T]] = []
        self.synced = asyncio.Event()
        self._feed = InformerSet.of(store).feed(kind, namespace, selector, fields, retry_pause=retry_pause)
        wide = (self._feed.namespace, self._feed.selector, self._feed.fields) != (namespace, selector, fields or None)
        self._filters: Filters | None = parse_filters(None, namespace, selector, fields) if wide else None
        if route is None and self._filters is not None:
            route = _pinned_route(self._filters)
        self._route = route
        self._joined = False
        self._feed.add_view(self)
        if self._feed.synced:
            self.synced.set()

    @property
    def revision(self) -> int:
        """The newest store revision this cache reflects (its feed's)."""
        return self._feed.revision

    def close(self) -> None:
        """Leave the feed (a view made for a while: the agent's per-object sources)."""
        self._feed.remove_view(self)

    # -- reads -------------------------------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> T | None:
        return self._items.get((namespace, name))

    def peek(self, namespace: str, name: str) -> T | None:
        """`get`, or for a routed view an object of the feed its route leaves out, parsed now and not kept (None
        when the feed has no such object, or it does not parse or pass the view's filters)."""
        key = (namespace, name)
        found = self._items.get(key)
        if found is not None or self._route is None:
            return found
        obj = self._feed.objects.get(key)
        if obj is None or (self._filters is not None and not self._filters.matches(obj)):
            return None
        try:
            return self._parse(obj, None)
        except _UNPARSABLE:
            return None

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> Iterator[ObjKey]:
        return iter(list(self._items))

    def values(self) -> list[T]:
        return list(self._items.values())

    def items(self) -> list[tuple[ObjKey, T]]:
        return list(self._items.items())

    def by(self, index: str, value: Hashable) -> list[T]:
        """The entries whose index function yields `value`, sorted by key."""
        return [self._items[k] for k in self._bucket(index, value)]

    def keys_by(self, index: str, value: Hashable) -> list[ObjKey]:
        return list(self._bucket(index, value))

    def _bucket(self, index: str, value: Hashable) -> list[ObjKey]:
        """A bucket's keys in order, sorted once per change of the bucket (not once per read)."""
        found = self._sorted.get((index, value))
        if found is None:
            found = sorted(self._indexes[index].get(value, ()))
            self._sorted[(index, value)] = found
        return found

    def resource_version(self, namespace: str, name: str) -> int | None:
        key = (namespace, name)
        return self._feed.resource_version(key) if key in self._items or key in self._invalid else None

    # -- subscriptions -----------------------------------------------------------------------------------------

    def subscribe(self, handler: Handler[T]) -> Callable[[], None]:
        """Call `handler` after every change; returns a function that unsubscribes it."""
        self._handlers.append(handler)

        def unsubscribe() -> None:
            if handler in self._handlers:
                self._handlers.remove(handler)

        return unsubscribe

    def _notify(self, change: Change[T]) -> None:
        for handler in list(self._handlers):
            try:
                handler(change)
            except Exception:
                log.exception("%s informer: a change handler failed on %s/%s", self.name, *change.key)

    # -- updates -----------------------------------------------------------------------------------------------

    def record(self, obj: Mapping[str, Any], *, deleted: bool = False, parsed: T | None = None) -> bool:
        """Take in the result of the owner's own write (or a fresh read): applied when newer than what is cached,
        for every view of the feed.

        `parsed`, when given, is cached as is in this view (the owner built it; nothing is parsed again). Returns
        whether the cache changed. A deleted object is recorded with `deleted=True` and its deletion's revision.
        """
        return self._feed.record(obj, deleted, self, parsed)

    def forget(self, namespace: str, name: str) -> None:
        """Drop an object a read showed to be gone (no revision known: the tombstone is the cached one's)."""
        self._feed.forget((namespace, name))

    def apply_event(self, type_: str, obj: Mapping[str, Any]) -> None:
        """One watch event (also used by tests and by owners that read an object themselves)."""
        self.record(obj, deleted=type_ == "DELETED")

    def replace(self, items: Iterable[Mapping[str, Any]], revision: int) -> None:
        """A relist of the feed (see `Feed.replace`)."""
        self._feed.replace(items, revision)

    def _take(
        self, key: ObjKey, obj: dict[str, Any], rv: int, parsed: T | None, shared: dict[Parse[Any], Any] | None = None
    ) -> None:
        """The feed has a newer `obj` for `key`: parse it into this view (or drop it when it left the filter).
        `shared`: the parses already made of this change, by parse function (module docstring)."""
        if self._filters is not None and not self._filters.matches(obj):
            self._drop(key)
            return
        old = self._items.get(key)
        if parsed is None and shared is not None:
            parsed = shared.get(self._parse)
        if parsed is None:
            try:
                parsed = self._parse(obj, old)
                if shared is not None:
                    shared[self._parse] = parsed
            except _UNPARSABLE as e:
                reason = getattr(e, "message", None) or str(e)
                if self._invalid.get(key) != reason:
                    self._invalid[key] = reason
                    log.warning("ignoring %s %s/%s: %s", self.kind, key[0], key[1], reason)
                if old is not None:
                    self._remove(key)
                    self._notify(Change(key, old, None))
                return
        self._invalid.pop(key, None)
        self._items[key] = parsed
        self._reindex(key, parsed)
        self._notify(Change(key, old, parsed))

    def _retry_invalid(self, key: ObjKey, obj: dict[str, Any] | None, rv: int) -> None:
        """A relist saw `key` unchanged: an entry this view could not parse is tried again (its parse may depend on
        more than the object, e.g. a Configuration that was missing)."""
        if key in self._invalid and obj is not None:
            self._take(key, obj, rv, None)

    def _drop(self, key: ObjKey) -> None:
        self._invalid.pop(key, None)
        old = self._items.get(key)
        if old is not None:
            self._remove(key)
            self._notify(Change(key, old, None))

    def _remove(self, key: ObjKey) -> None:
        del self._items[key]
        for index, values in self._entries.pop(key, {}).items():
            buckets = self._indexes[index]
            for value in values:
                self._sorted.pop((index, value), None)
                bucket = buckets.get(value)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del buckets[value]

    def _reindex(self, key: ObjKey, value: T) -> None:
        if not self._index_fns:
            return
        old = self._entries.get(key, {})
        new: dict[str, tuple[Hashable, ...]] = {}
        for index, fn in self._index_fns.items():
            values = tuple(fn(value))
            new[index] = values
            if old.get(index) == values:
                continue
            buckets = self._indexes[index]
            for stale in old.get(index, ()):
                self._sorted.pop((index, stale), None)
                bucket = buckets.get(stale)
                if bucket is not None:
                    bucket.discard(key)
                    if not bucket:
                        del buckets[stale]
            for fresh in values:
                if key not in buckets.setdefault(fresh, set()):
                    buckets[fresh].add(key)
                    self._sorted.pop((index, fresh), None)
        self._entries[key] = new

    # -- the loop ------------------------------------------------------------------------------------------------

    async def list_once(self) -> int:
        """Bring the view up to date: a listing of the feed, unless its watch is running on a synced feed (then the
        view is current already); sets `synced`. Returns the feed's revision."""
        if self._feed.running and self._feed.synced:
            self.synced.set()
            return self._feed.revision
        revision = await self._feed.list_once()
        self.synced.set()
        return revision

    async def run(self) -> None:
        """Keep the feed current (shared with every other view of it). Never returns. When it is cancelled (its
        owner stops) the view leaves the feed, so a stopped part's handlers hear nothing more and nothing holds it;
        run again (a supervisor's restart), it joins again and catches up with what changed meanwhile."""
        self._join()
        try:
            await self._feed.run_for_view()
        finally:
            self.close()

    def _join(self) -> None:
        """Join the feed again after `close`: the view becomes what the feed holds (changes notified)."""
        self._feed.add_view(self)

    async def wait_synced(self) -> None:
        await self.synced.wait()
