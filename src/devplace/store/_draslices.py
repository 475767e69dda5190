"""ResourceSlice writes shared by the agent (a node's local pool) and the controller (shared pools): the probe that
says whether the store serves DRA's slices and which optional fields it keeps, and one pool's plan
(`api.plan_pool`, pure) applied by compare-and-swap.

Probe (`probe_support`): a dry run would be the gentler question, but the Store protocol has no dry-run write and a
node identity may not send one (a dry run would skip the server's per-object admission), so the probe is a real write:
create a slice of the driver `probe.devplace.io` (no DeviceClass selects it; a node's carries its own `nodeName`, as
NodeRestriction demands), read what the create answered (an API server answers the object as stored, with the fields
its feature gates drop already dropped), delete it. A store that does not serve ResourceSlices (404), or refuses the
write (403, 422), answers None: the publisher stays off and says why. A probe left behind by a crash is deleted and
the probe tried once more.

Writes (`write_pool`): every create, update (with the cached resourceVersion) and delete (with it as precondition) is a
CAS; a lost race (Conflict, AlreadyExists, NotFound on update) re-reads the pool from the store and plans again,
bounded (`ATTEMPTS`, then `Conflict`). A delete that finds the slice gone has nothing left to do. Each result is handed
to `record` so the caller's cache sees its own writes before the watch brings them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from devplace import errors
from devplace.api import PUBLISHER_LABEL, PoolSpec, SliceSupport, plan_pool, probe_slice, support_of
from devplace.store._base import Store

log = logging.getLogger(__name__)

KIND = "ResourceSlice"
ATTEMPTS = 5


def probe_name(node: str | None) -> str:
    """The probe slice's name: per node (a node may write only its own), `cluster` for the controller."""
    return f"devplace.io-probe-{node or 'cluster'}"[:253]


async def probe_support(store: Store, node: str | None) -> SliceSupport | None:
    """What the store keeps of a slice, or None when it does not serve (or lets us write) ResourceSlices."""
    body = probe_slice(probe_name(node), node)
    name = body["metadata"]["name"]
    for _ in range(2):
        try:
            stored = await store.create(body)
        except errors.AlreadyExists:
            await _delete_quietly(store, name)
            continue
        except (errors.NotFound, errors.Forbidden, errors.Invalid) as e:
            log.warning("%s: ResourceSlices are not published: the probe slice was refused (%s)", node or "", e)
            return None
        await _delete_quietly(store, name)
        return support_of(stored)
    log.warning("%s: ResourceSlices are not published: the probe slice %s keeps coming back", node or "", name)
    return None


async def _delete_quietly(store: Store, name: str) -> None:
    try:
        await store.delete(KIND, name)
    except errors.NotFound:
        pass


def _pool_filters(spec: PoolSpec) -> dict[str, str]:
    node = spec.placement.get("nodeName")
    if node:
        return {"fields": f"spec.nodeName={node}"}
    return {"selector": f"{PUBLISHER_LABEL}={spec.labels.get(PUBLISHER_LABEL, '')}"}


async def write_pool(
    store: Store,
    spec: PoolSpec,
    devices: Iterable[dict[str, Any]],
    previous: Iterable[Mapping[str, Any]],
    record: Callable[[Mapping[str, Any], bool], None],
) -> int:
    """Make the store's slices of `spec`'s pool list `devices` (module docstring); `previous` is the cached view
    of the pool's slices. Returns the writes made."""
    wanted = list(devices)
    stored = list(previous)
    made = 0
    for _ in range(ATTEMPTS):
        try:
            for write in plan_pool(spec, wanted, stored):
                if write.op == "create":
                    record(await store.create(write.body), False)
                elif write.op == "update":
                    record(await store.update(write.body), False)
                else:
                    rv = write.body["metadata"].get("resourceVersion")
                    try:
                        record(await store.delete(KIND, write.name, resource_version=rv), True)
                    except errors.NotFound:
                        made -= 1
                made += 1
            return made
        except (errors.Conflict, errors.AlreadyExists, errors.NotFound):
            listing = await store.list(KIND, **_pool_filters(spec))
            stored = [s for s in listing.items if ((s.get("spec") or {}).get("pool") or {}).get("name") == spec.pool]
            for item in stored:
                record(item, False)
    raise errors.Conflict(f"ResourceSlices of pool {spec.pool}: lost {ATTEMPTS} races in a row")
