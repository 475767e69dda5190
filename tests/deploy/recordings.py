"""A store that notes which part of devplace asked it for what, as the Kubernetes API requests the `kube` backend
would send for it: the evidence the RBAC test holds `deploy/kubernetes/rbac.yaml` against.

Each call is attributed to the part whose code made it: the innermost frame on the stack from one of the parts'
packages, else (an informer's or a supervisor's own task, whose stack holds no part frame) the task's name, which
the parts' supervisors prefix with their own name. Each call becomes the (verb, API group, resource) requests the
`kube` store makes for it (`devplace.store._kube`): a list or a watch lists; a write whose `status` changes writes
`/status` too, because Kubernetes ignores `status` in the main resource of a kind that has the subresource; the
store's `revision()` lists Configurations; a JSON patch (`store.JsonPatchStore`, offered as the `kube` store offers it)
is a PATCH.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from devplace import errors
from devplace.api import _registry as registry
from devplace.kubeapi import _subresources as subresources
from devplace.kubeapi import json_patch
from devplace.store import cas
from devplace.store._base import EncodedPage, ObjectList, Store, WatchStream

__all__ = ["Recording", "Request"]

Request = tuple[str, str, str]
"""(verb, API group, resource) as an RBAC rule names them: ("update", "akri.sh", "instances/status")."""

_PARTS_BY_MODULE = (
    ("devplace.agent.", "agent"),
    ("devplace.discovery.", "agent"),
    ("devplace.controller.", "controller"),
    ("devplace.scheduler.", "scheduler"),
    ("devplace.sim._kubelets", "kubelet"),
    ("devplace.sim.", "harness"),
    ("tests.", "harness"),
)
_PARTS_BY_TASK = (("agent ", "agent"), ("controller", "controller"), ("classes", "controller"))
_PARTS_BY_TASK += (("devplace-scheduler", "scheduler"), ("kubelet ", "kubelet"))


class Recording:
    """A `Store` over `inner` that records every call as `requests[part]` (module docstring)."""

    def __init__(self, inner: Store, groups: Mapping[str, str]) -> None:
        """`groups`: kind -> the API group the `kube` store reads it in (Configuration and Instance live in two)."""
        self.inner = inner
        self.groups = dict(groups)
        self.requests: dict[str, set[Request]] = {}

    # -- attribution -----------------------------------------------------------------------------------------------

    def _part(self) -> str:
        frame = sys._getframe(2)
        while frame is not None:
            module = str(frame.f_globals.get("__name__", ""))
            for prefix, part in _PARTS_BY_MODULE:
                if module.startswith(prefix):
                    return part
            frame = frame.f_back  # type: ignore[assignment]
        task = asyncio.current_task()
        name = task.get_name() if task is not None else ""
        for prefix, part in _PARTS_BY_TASK:
            if name.startswith(prefix):
                return part
        return f"unknown (task {name!r})"

    def _resource(self, kind: str) -> tuple[str, str]:
        info = registry.lookup(kind)
        group = self.groups.get(kind) or info.preferred_api_version.rpartition("/")[0]
        return group, info.plural

    def _note(self, part: str, verb: str, kind: str, sub: str = "") -> None:
        group, plural = self._resource(kind)
        self.requests.setdefault(part, set()).add((verb, group, f"{plural}/{sub}" if sub else plural))

    # -- the Store protocol ----------------------------------------------------------------------------------------

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        part = self._part()
        kind = str(obj.get("kind"))
        self._note(part, "create", kind)
        if subresources.has_status(kind) and obj.get("status"):
            self._note(part, "update", kind, "status")
        return await self.inner.create(obj)

    async def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any]:
        self._note(self._part(), "get", kind)
        return await self.inner.get(kind, name, namespace)

    async def list(
        self, kind: str, namespace: str | None = None, selector: str | None = None, *, fields: str | None = None
    ) -> ObjectList:
        self._note(self._part(), "list", kind)
        return await self.inner.list(kind, namespace, selector, fields=fields)

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
    ) -> EncodedPage:
        self._note(self._part(), "list", kind)
        return await self.inner.list_page(
            kind, namespace, selector, fields=fields, after=after, limit=limit, max_bytes=max_bytes
        )

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        part = self._part()
        kind = str(obj.get("kind"))
        self._note(part, "update", kind)
        if subresources.has_status(kind):
            meta = obj.get("metadata") or {}
            try:
                stored = await self.inner.get(kind, str(meta.get("name")), str(meta.get("namespace") or ""))
            except errors.NotFound:
                stored = {}
            if stored.get("status") != obj.get("status"):
                self._note(part, "update", kind, "status")
        return await self.inner.update(obj)

    async def delete(
        self, kind: str, name: str, namespace: str = "", *, resource_version: str | None = None
    ) -> dict[str, Any]:
        self._note(self._part(), "delete", kind)
        return await self.inner.delete(kind, name, namespace, resource_version=resource_version)

    def watch(
        self,
        kind: str | None = None,
        namespace: str | None = None,
        *,
        since: int | None = None,
        selector: str | None = None,
        fields: str | None = None,
    ) -> WatchStream:
        part = self._part()
        if kind is None:
            self.requests.setdefault(part, set()).add(("watch", "*", "*"))
        else:
            self._note(part, "watch", kind)
            self._note(part, "list", kind)  # the kube store lists (limit=1) to learn where the watch starts
        return self.inner.watch(kind, namespace, since=since, selector=selector, fields=fields)

    async def json_patch(
        self,
        kind: str,
        name: str,
        namespace: str,
        ops: Sequence[Mapping[str, Any]],
        *,
        api_version: str | None = None,
    ) -> dict[str, Any]:
        """The kube store's `JsonPatchStore.json_patch` is a PATCH: applied here as the API server applies it, by
        compare-and-swap on the inner store (a failed `test` is `Invalid`)."""
        self._note(self._part(), "patch", kind)
        written = await cas(self.inner, kind, name, namespace, lambda current: json_patch(current, list(ops)))
        result: dict[str, Any] = written.object
        return result

    async def revision(self) -> int:
        self._note(self._part(), "list", "Configuration")  # the kube store lists one Configuration to learn it
        return await self.inner.revision()

    async def compact(self, revision: int) -> None:
        await self.inner.compact(revision)

    async def close(self) -> None:
        await self.inner.close()
