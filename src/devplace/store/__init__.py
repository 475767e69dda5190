"""The object store: one protocol, several backends, one concurrency rule (compare-and-swap on resourceVersion)."""

from devplace.store.base import Event, EventType, Key, ObjectList, Store
from devplace.store.memory import MemoryStore
from devplace.store.mutations import mutate
from devplace.store.open import open_store

__all__ = ["Event", "EventType", "Key", "MemoryStore", "ObjectList", "Store", "mutate", "open_store"]
