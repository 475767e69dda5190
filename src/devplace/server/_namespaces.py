"""Namespaces: created, listed, and deleted with everything in them, as kube-apiserver and its namespace controller do.

- A Namespace is created `Active` (`requests.on_create`); `default` exists once anything lists or reads Namespaces
  (`ensure_default`), as Kubernetes creates it at start-up.
- Deleting one first marks it `Terminating` (one compare-and-swap on its `status.phase`, so a watcher and `kubectl
  get ns` see it), then deletes every object of every namespaced kind in it, then the Namespace itself; the answer
  is the Namespace as it was while `Terminating`, as Kubernetes answers. A deletion that fails half-way leaves the
  Namespace `Terminating`; deleting it again finishes the work. `default` cannot be deleted (403, as in Kubernetes).
- Nothing new may be created in a `Terminating` Namespace (403 Forbidden, Kubernetes' message), so the deletion
  cannot miss an object created meanwhile through this API.

Departure from Kubernetes: an object may be created in a namespace that has no Namespace object (devplace has always
taken any namespace, and its own parts write where their Configurations are), where Kubernetes' NamespaceLifecycle
refuses it; `kubectl get ns` lists the Namespaces created (and `default`). The deletion runs inside the DELETE
request, not in a background controller: `kubectl delete ns` waits for it either way.
"""

from __future__ import annotations

import logging
from typing import Any

from devplace import errors
from devplace.api import DEFAULT_NAMESPACE, kinds
from devplace.store import Store, cas

UNDELETABLE = frozenset({DEFAULT_NAMESPACE})
"""Namespaces Kubernetes refuses to delete."""

_log = logging.getLogger(__name__)


def namespace_object(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


async def ensure_default(store: Store) -> None:
    """Create the `default` Namespace when there is none (once it exists, one read)."""
    try:
        await store.get("Namespace", DEFAULT_NAMESPACE)
    except errors.NotFound:
        try:
            await store.create(namespace_object(DEFAULT_NAMESPACE))
        except errors.AlreadyExists:
            pass  # created meanwhile: what was wanted


async def check_creatable(store: Store, namespace: str) -> None:
    """Refuse (403) a create in a Namespace that is being deleted (module docstring)."""
    try:
        held = await store.get("Namespace", namespace)
    except errors.NotFound:
        return
    if (held.get("status") or {}).get("phase") == "Terminating":
        raise errors.Forbidden(f"unable to create new content in namespace {namespace} because it is being terminated")


def _terminating(current: dict[str, Any]) -> dict[str, Any] | None:
    if (current.get("status") or {}).get("phase") == "Terminating":
        return None
    return {**current, "status": {**(current.get("status") or {}), "phase": "Terminating"}}


async def delete_namespace(store: Store, name: str, *, resource_version: str | None = None) -> dict[str, Any]:
    """Mark `name` Terminating, delete every object in it, then the Namespace (module docstring); returns it as it
    was while Terminating. `resource_version`: the Namespace must be at it when marked (else `Conflict`)."""
    if name in UNDELETABLE:
        raise errors.Forbidden(f'namespaces "{name}" is forbidden: this namespace may not be deleted')
    current = await store.get("Namespace", name)
    stored = str((current.get("metadata") or {}).get("resourceVersion"))
    if resource_version is not None and resource_version != stored:
        raise errors.Conflict(
            f"Namespace {name}: precondition failed: resourceVersion {resource_version} is stale (current is {stored})"
        )
    marked = (await cas(store, "Namespace", name, "", _terminating)).object
    for info in kinds():
        if not info.namespaced:
            continue
        for obj in (await store.list(info.kind, name)).items:
            try:
                await store.delete(info.kind, obj["metadata"]["name"], name)
            except errors.NotFound:
                continue  # gone meanwhile
    _log.info("namespace %s: its objects are deleted", name)
    try:
        return await store.delete("Namespace", name)
    except errors.NotFound:
        return marked  # deleted meanwhile by another deletion of it
