"""What the API server answers in a Deployment's status, since devplace runs no Deployment controller.

devplace stores Deployments (Akri's samples and EMCO's apps carry them) but creates no ReplicaSet or Pod for them.
A status nobody writes leaves `observedGeneration` below `metadata.generation`, and `kubectl rollout status` then
waits for ever ("Waiting for deployment spec update to be observed..."). So the server answers the status a
controller would, honestly: the spec is observed (`observedGeneration` is the generation) and the rollout cannot
progress (condition `Progressing`, status `False`, reason `ProgressDeadlineExceeded`, message `NO_CONTROLLER`), and
no replica counts, since no Pod runs. kubectl reads that as a failed rollout: `kubectl rollout status` ends at once,
non-zero, with `deployment "x" exceeded its progress deadline`; `kubectl get` shows 0 ready. `kubectl describe`
prints conditions without their messages, so each fresh answer is also told by a `Warning` Event on the Deployment
(reason `NoDeploymentController`, the same message; component `devplace-server`), which `describe` lists.

The rule (`answer`, pure), for every create and update of a Deployment the server stores (POST, PUT, each PATCH
type, `/scale`, `/status`), with "blank" meaning no status or an empty one, and "ours" meaning the answer as the server
made it (an `observedGeneration` and one `Progressing` condition carrying `NO_CONTROLLER`, nothing else: as a client
read it and sent it back; a status patch that adds a field makes it the client's):
- create: a blank or ours status is answered at generation 1; any other is kept (the writer's own: a controller,
  or devplace's remote store copying an object).
- update: when the stored status and the written one are each blank or ours, the answer is made at the generation
  the store will stamp (its rule: +1 when `spec` changes); it is fresh (new timestamps, an Event) only when that
  generation is not the one the stored answer observed, else the stored answer stands as it was. When either is
  another status (a controller's, or one a client wrote through `/status` or with the object), it is kept as written:
  devplace never overwrites a status it did not make.

Where: the server wraps its store in `AnsweringStore` (inside the authorization guard, so the answer is the server's
write, not the client's) when the store holds the data itself (memory, sqlite, etcd). Over a client backend it does
not: on `kube://` a Kubernetes API server and its own Deployment controller own the status (the answer would be
written through `/status` and race that controller), and on `http(s)://` the devplace server behind answers.
`create_app(deployment_status=...)` overrides the choice. A dry run goes past the store, so it shows no new answer.
Costs: a Deployment update reads the stored object once more (the generation to answer); a fresh answer's Event is
one more write (one more revision) before the request is answered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from devplace import errors
from devplace.clocks import Clock
from devplace.store import (
    DelegatingStore,
    EventRecorder,
    Store,
    key_of,
    resource_version_of,
    rfc3339,
    stamp_updated,
)

KIND = "Deployment"
NO_CONTROLLER = (
    "devplace runs no Deployment controller: the Deployment is stored, but no ReplicaSet or Pod is created for it, so "
    "it never rolls out here (run it on a Kubernetes cluster)"
)
"""The answer's condition message, and the Event's note; also how the server recognizes its own answer."""
CONDITION_REASON = "ProgressDeadlineExceeded"
"""The reason kubectl's rollout status reads as a failed rollout."""
EVENT_REASON = "NoDeploymentController"
COMPONENT = "devplace-server"


@dataclass(frozen=True)
class Answer:
    status: dict[str, Any]
    fresh: bool
    """A new generation was answered (tell it with an Event); False: the stored answer stands unchanged."""


def is_blank(status: Any) -> bool:
    return status is None or (isinstance(status, Mapping) and not status)


def is_ours(status: Any) -> bool:
    """The status is the server's answer as it made it (module docstring): an `observedGeneration` and one condition,
    `Progressing` with `NO_CONTROLLER`. A status with anything added is somebody's own."""
    if not isinstance(status, Mapping) or not set(status) <= {"observedGeneration", "conditions"}:
        return False
    conditions = status.get("conditions")
    return (
        isinstance(conditions, list)
        and len(conditions) == 1
        and isinstance(conditions[0], Mapping)
        and conditions[0].get("type") == "Progressing"
        and conditions[0].get("message") == NO_CONTROLLER
    )


def _observed(status: Any) -> Any:
    return status.get("observedGeneration") if is_ours(status) else None


def _answered(generation: int, now: float, since: str | None) -> dict[str, Any]:
    stamp = rfc3339(now)
    condition = {
        "type": "Progressing",
        "status": "False",
        "reason": CONDITION_REASON,
        "message": NO_CONTROLLER,
        "lastUpdateTime": stamp,
        "lastTransitionTime": since or stamp,
    }
    return {"observedGeneration": generation, "conditions": [condition]}


def _transition_time(status: Any) -> str | None:
    """When the stored answer's condition became False (kept: a re-answer is no transition)."""
    if not is_ours(status):
        return None
    for condition in status["conditions"]:
        if isinstance(condition, Mapping) and condition.get("type") == "Progressing":
            since = condition.get("lastTransitionTime")
            return since if isinstance(since, str) else None
    return None


def answer(old: Mapping[str, Any] | None, new: Mapping[str, Any], generation: int, now: float) -> Answer | None:
    """The status the server stores for Deployment `new` written over `old` (None: a create), whose generation will
    be `generation`; None: the written status is kept (module docstring)."""
    written, stored = new.get("status"), (old or {}).get("status")
    if not (is_blank(written) or is_ours(written)):
        return None
    if old is None:
        return Answer(_answered(1, now, None), fresh=True)
    if not (is_blank(stored) or is_ours(stored)):
        return None
    if isinstance(stored, Mapping) and _observed(stored) == generation:
        return Answer(dict(stored), fresh=False)
    return Answer(_answered(generation, now, _transition_time(stored)), fresh=True)


def answers_for(store: Store) -> bool:
    """True when `store` holds its data itself, so nothing but this server could write a Deployment's status."""
    from devplace.store import KubeStore, RemoteStore  # client backends load on first use; cheap once loaded

    return not isinstance(store, (KubeStore, RemoteStore))


class AnsweringStore(DelegatingStore):
    """A `Store` that answers Deployment status on create and update (module docstring); all else passes through.

    The Events go through `events`' store directly, written before the request is answered (a failed one is logged
    and dropped: an Event is advice), and this server's old Events are swept every `events.sweep_interval`."""

    def __init__(self, inner: Store, clock: Clock, events: EventRecorder) -> None:
        self.inner = inner
        self.clock = clock
        self.events = events
        self._next_sweep = clock.now() + events.sweep_interval

    async def create(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        if key_of(obj).kind != KIND:
            return await self.inner.create(obj)
        found = answer(None, obj, 1, self.clock.now())
        created = await self.inner.create(obj if found is None else {**obj, "status": found.status})
        await self._tell(created, found)
        return created

    async def update(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        key = key_of(obj)
        if key.kind != KIND:
            return await self.inner.update(obj)
        current = await self.inner.get(key.kind, key.name, key.namespace)
        found = None
        if str(current["metadata"].get("resourceVersion")) == str(resource_version_of(obj)):  # else the store's 409
            generation = int(stamp_updated(current, obj, 0)["metadata"]["generation"])  # the store's own rule
            found = answer(current, obj, generation, self.clock.now())
        updated = await self.inner.update(obj if found is None else {**obj, "status": found.status})
        await self._tell(updated, found)
        return updated

    async def _tell(self, written: dict[str, Any], found: Answer | None) -> None:
        if found is None or not found.fresh:
            return
        self.events.emit(written, EVENT_REASON, NO_CONTROLLER, "Warning")
        await self.events.flush()
        if self.clock.now() >= self._next_sweep:
            self._next_sweep = self.clock.now() + self.events.sweep_interval
            try:
                await self.events.sweep()
            except errors.DevplaceError:
                pass  # the store is away: the next sweep tries again
