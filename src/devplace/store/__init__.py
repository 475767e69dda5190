"""The object store: one protocol, several backends, one concurrency rule (compare-and-swap on resourceVersion).

On top of the protocol: `cas` (the one read-decide-write loop) and `Informer` (list, watch, relist; typed, indexed).
Backends are opened by URL (`open_store`); their classes load on first use, so importing the store stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from devplace.store.base import Event, EventType, Key, ObjectList, Store, WatchStream
from devplace.store.cas import DELETE, Written, cas
from devplace.store.informers import Change, Informer
from devplace.store.memory import MemoryStore
from devplace.store.open import open_store

if TYPE_CHECKING:
    from devplace.store.etcd import EtcdStore
    from devplace.store.kube import KubeStore
    from devplace.store.remote import RemoteStore
    from devplace.store.sqlite import SqliteStore

__all__ = [
    "DELETE",
    "Change",
    "EtcdStore",
    "Event",
    "EventType",
    "Informer",
    "Key",
    "KubeStore",
    "MemoryStore",
    "ObjectList",
    "RemoteStore",
    "SqliteStore",
    "Store",
    "WatchStream",
    "Written",
    "cas",
    "open_store",
]


def __getattr__(name: str) -> Any:
    if name == "SqliteStore":
        from devplace.store.sqlite import SqliteStore

        return SqliteStore
    if name == "EtcdStore":
        from devplace.store.etcd import EtcdStore

        return EtcdStore
    if name == "KubeStore":
        from devplace.store.kube import KubeStore

        return KubeStore
    if name == "RemoteStore":
        from devplace.store.remote import RemoteStore

        return RemoteStore
    raise AttributeError(f"module 'devplace.store' has no attribute {name!r}")
