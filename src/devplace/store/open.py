"""Open a store from a URL: `memory`, `sqlite:///path/to.db`, `http://host:port` (remote API server)."""

from __future__ import annotations

from devplace import errors
from devplace.clocks import Clock
from devplace.store.base import Store

__all__ = ["open_store"]


def open_store(url: str, *, clock: Clock | None = None) -> Store:
    if url in ("memory", "memory://"):
        from devplace.store.memory import MemoryStore

        return MemoryStore(clock=clock)
    if url.startswith("sqlite://"):
        from devplace.store.sqlite import SqliteStore

        return SqliteStore(_sqlite_path(url), clock=clock)
    if url.startswith(("http://", "https://")):
        from devplace.store.remote import RemoteStore

        return RemoteStore(url, clock=clock)
    raise errors.Invalid.field("store", f"unsupported store URL {url!r} (memory, sqlite:///PATH, http://HOST:PORT)")


def _sqlite_path(url: str) -> str:
    """`sqlite:///./x.db` and `sqlite:///x.db` are relative; `sqlite:////abs/x.db` is absolute (SQLAlchemy's rule)."""
    rest = url.removeprefix("sqlite://")
    if not rest.startswith("/") or rest == "/":
        raise errors.Invalid.field("store", f"{url!r}: expected sqlite:///PATH")
    path = rest[1:]
    if not path:
        raise errors.Invalid.field("store", f"{url!r}: the database path is empty")
    return path
