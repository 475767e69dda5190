"""The object store: one protocol, several backends, one concurrency rule (compare-and-swap on resourceVersion).

- `base`: the `Store` protocol and the helpers every backend shares (`DelegatingStore`, the base of wrappers);
- `cas`: the one read-decide-write loop; `applies`: apply a manifest through it; `bindings`: `bind_pod`, a Pod bound
  through the `pods/binding` subresource (POSTed to an API server, else `api.bound_pod` by CAS);
- `draslices`: ResourceSlice writes: `probe_support` (does the store serve slices, which optional fields it keeps)
  and `write_pool` (one pool's `api.plan_pool` applied by CAS), shared by the agent and the controller;
- `events`: `EventRecorder`: Events about objects, emitted without blocking, aggregated, bounded by TTL and count;
- `leases`: `LeaderElector`: leader election through a coordination.k8s.io Lease (client-go's rules; `decide_lease`
  is the pure rule), and `FencedStore`, which refuses a part's writes unless its elector leads;
- `informers`: `Informer`: a typed, indexed view; `InformerSet`: one list and one watch per kind and selectors per
  process, shared by every view over the same store;
- `patches`: `JsonPatchStore`: a JSON patch whose `test` operations are the compare (the fields a decision read),
  applied by the API server's compare-and-swap (`remote`, `kube`), for objects many writers change at once;
- `memory`, `sqlite`, `etcd`: the backends that hold the data (`etcdserverpb`: etcd's generated v3 stubs);
- `remote`, `kube`: clients of devplace's API server and of a Kubernetes API server, on one REST client core
  (`restclients`, on HTTP/1.1 `exchanges` of its own: a tenth of httpx2's CPU per request) and one kubeconfig
  reader (`kubeconfigs`);
- `open`: `open_store(url)`; the backends' classes load on first use, so importing the store stays cheap;
- `backups`: `backup_sqlite` / `restore_sqlite`, a SQLite store file copied while it is written, restored atomically;
- `dumps`: `export_objects` / `import_objects`, every object moved between backends as JSON lines or YAML.

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from devplace.store._applies import Admission, Applied, apply_object
from devplace.store._base import (
    STORE_CLIENT_HEADER,
    DelegatingStore,
    EncodedObject,
    EncodedPage,
    Event,
    EventType,
    Key,
    ObjectList,
    Store,
    WatchStream,
    key_fields,
    key_of,
    parse_filters,
    resource_version_of,
    rfc3339,
    stamp_created,
    stamp_updated,
)
from devplace.store._bindings import BindingStore, bind_pod
from devplace.store._cas import DELETE, Decide, Decided, Delete, Written, cas
from devplace.store._draslices import probe_support, write_pool
from devplace.store._events import EventRecorder
from devplace.store._informers import Change, Informer, InformerSet, ObjKey, Route
from devplace.store._leases import FencedStore, LeaderElector, LeaseAction, ObservedLease, decide_lease, micro_time
from devplace.store._memory import MemoryStore
from devplace.store._open import open_store
from devplace.store._patches import JsonPatchStore, takes_patches

if TYPE_CHECKING:
    from devplace.store._backups import FileSummary, backup_sqlite, restore_sqlite, sqlite_file
    from devplace.store._dumps import export_objects, format_dump, import_objects, parse_dump
    from devplace.store._etcd import EtcdStore
    from devplace.store._kube import KubeStore
    from devplace.store._kubeconfigs import current_server
    from devplace.store._remote import RemoteStore
    from devplace.store._sqlite import SqliteStore

__all__ = [
    "DELETE",
    "STORE_CLIENT_HEADER",
    "Admission",
    "Applied",
    "BindingStore",
    "Change",
    "Decide",
    "Decided",
    "DelegatingStore",
    "Delete",
    "EncodedObject",
    "EncodedPage",
    "EtcdStore",
    "Event",
    "EventRecorder",
    "EventType",
    "FencedStore",
    "FileSummary",
    "Informer",
    "InformerSet",
    "JsonPatchStore",
    "Key",
    "KubeStore",
    "LeaderElector",
    "LeaseAction",
    "MemoryStore",
    "ObjKey",
    "ObjectList",
    "ObservedLease",
    "RemoteStore",
    "Route",
    "SqliteStore",
    "Store",
    "WatchStream",
    "Written",
    "apply_object",
    "backup_sqlite",
    "bind_pod",
    "cas",
    "current_server",
    "decide_lease",
    "export_objects",
    "format_dump",
    "import_objects",
    "key_fields",
    "key_of",
    "micro_time",
    "open_store",
    "parse_dump",
    "parse_filters",
    "probe_support",
    "resource_version_of",
    "restore_sqlite",
    "rfc3339",
    "sqlite_file",
    "stamp_created",
    "stamp_updated",
    "takes_patches",
    "write_pool",
]

_LAZY = {
    "FileSummary": "devplace.store._backups",
    "backup_sqlite": "devplace.store._backups",
    "restore_sqlite": "devplace.store._backups",
    "sqlite_file": "devplace.store._backups",
    "export_objects": "devplace.store._dumps",
    "format_dump": "devplace.store._dumps",
    "import_objects": "devplace.store._dumps",
    "parse_dump": "devplace.store._dumps",
    "current_server": "devplace.store._kubeconfigs",
    "EtcdStore": "devplace.store._etcd",
    "KubeStore": "devplace.store._kube",
    "RemoteStore": "devplace.store._remote",
    "SqliteStore": "devplace.store._sqlite",
}


def __getattr__(name: str) -> Any:
    """The backends (and the kubeconfig reader, which needs the HTTP client) load on first use, so importing the store
    stays cheap."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
