"""The ResourceClaim lifecycle (issue #25 item 4), as Kubernetes' resourceclaim controller keeps it.

Pure decisions over plain wire dicts, then a thin shell (`ClaimLifecycle`: informers in, one work queue, CAS writes):
- `claims_to_make(pod, templates, existing)`: a pod's `spec.resourceClaims` entries that name a template get a
  ResourceClaim made for the pod: named `<pod>-<entry>-<5 characters from the pod's uid and the entry>` (the same name
  on every try, so a restarted or second controller never makes two), owned by the pod (a controlling
  ownerReference), annotated with the entry (`resource.kubernetes.io/pod-claim-name`), its spec the template's. The
  pod's `status.resourceClaimStatuses` then names each entry's claim (`claim_statuses`): the scheduler waits for it;
- `reservations(claim, pods)`: `status.reservedFor` without the pods that are gone (no pod of that uid) or finished
  (Succeeded or Failed);
- `deallocated(claim)`: a claim allocated and reserved for nobody loses `status.allocation` and its delete-protection
  finalizer, and the slots devplace's Instances hold for it (`D:<namespace>/<claim>:<node>`,
  `api.instance_without_claims`) are freed;
- a claim made from a template whose pod is gone or finished is deleted once nobody holds it (devplace's store has no
  garbage collector, so this controller deletes it);
- an Instance slot held for a claim that does not exist is freed at once; one held for a claim that exists but is
  not allocated is freed when it still is so after `slot_grace` seconds (the scheduler takes the slot just before it
  writes the allocation: a crash between the two leaves such a slot, and the grace keeps a live scheduler's slot).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from devplace import errors
from devplace.api import DRA, controller_reference, generated_suffix, instance_without_claims, parse_holder
from devplace.clocks import Clock
from devplace.queues import WorkQueue
from devplace.store import DELETE, Change, Delete, Informer, Store, cas
from devplace.supervisors import Supervisor

log = logging.getLogger(__name__)

DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
_FINISHED = frozenset({"Succeeded", "Failed"})
_AT_ONCE = 64
"""Keys handled concurrently: their writes overlap, each key's own steps stay in order."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _key(obj: Mapping[str, Any]) -> str:
    meta = _meta(obj)
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def finished(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in _FINISHED


def claim_name_for(pod: Mapping[str, Any], entry: str) -> str:
    """The claim made for `pod`'s entry: `<pod>-<entry>-<5 characters>` (the pod and entry parts cut so that the
    name stays a DNS label of at most 63 characters, as Kubernetes' generated names are)."""
    meta = _meta(pod)
    suffix = generated_suffix(f"{meta.get('uid')}/{entry}")
    base = f"{meta.get('name')}-{entry}"[:57].rstrip("-.")
    return f"{base}-{suffix}"


def owner(pod: Mapping[str, Any]) -> dict[str, Any]:
    meta = _meta(pod)
    return controller_reference("v1", "Pod", str(meta.get("name")), meta.get("uid"))


def owner_uid(claim: Mapping[str, Any]) -> str | None:
    """The uid of the pod a claim was made for (its controlling Pod ownerReference), or None."""
    for ref in _meta(claim).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("kind") == "Pod" and ref.get("controller"):
            return str(ref.get("uid") or "")
    return None


def template_entries(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(entry, template) of each `spec.resourceClaims` entry that names a template."""
    out: list[tuple[str, str]] = []
    for raw in (pod.get("spec") or {}).get("resourceClaims") or ():
        if isinstance(raw, Mapping) and raw.get("name") and raw.get("resourceClaimTemplateName"):
            out.append((str(raw["name"]), str(raw["resourceClaimTemplateName"])))
    return out


def claims_to_make(
    pod: Mapping[str, Any], template: Callable[[str], Mapping[str, Any] | None]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The claims to create for `pod`'s template entries, and the templates that do not exist (the pod waits)."""
    if finished(pod) or _meta(pod).get("deletionTimestamp") or (pod.get("spec") or {}).get("nodeName"):
        return [], []
    namespace = str(_meta(pod).get("namespace") or "default")
    made: list[dict[str, Any]] = []
    missing: list[str] = []
    for entry, name in template_entries(pod):
        found = template(name)
        if found is None:
            missing.append(name)
            continue
        tmeta = (found.get("spec") or {}).get("metadata") or {}
        meta: dict[str, Any] = {
            "name": claim_name_for(pod, entry),
            "namespace": namespace,
            "ownerReferences": [owner(pod)],
            "annotations": {**(tmeta.get("annotations") or {}), POD_CLAIM_NAME: entry},
        }
        if tmeta.get("labels"):
            meta["labels"] = dict(tmeta["labels"])
        made.append(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": meta,
                "spec": dict((found.get("spec") or {}).get("spec") or {}),
            }
        )
    return made, missing


def claim_statuses(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`status.resourceClaimStatuses` naming each template entry's claim."""
    return [{"name": entry, "resourceClaimName": claim_name_for(pod, entry)} for entry, _ in template_entries(pod)]


def reservations(claim: Mapping[str, Any], pod: Callable[[str, str], Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """`status.reservedFor` without entries for pods that are gone (or replaced: another uid) or finished."""
    namespace = str(_meta(claim).get("namespace") or "default")
    keep: list[dict[str, Any]] = []
    for entry in (claim.get("status") or {}).get("reservedFor") or ():
        if not isinstance(entry, Mapping):
            continue
        if entry.get("resource") != "pods":
            keep.append(dict(entry))
            continue
        found = pod(namespace, str(entry.get("name") or ""))
        if found is None or finished(found):
            continue
        if entry.get("uid") and _meta(found).get("uid") != entry.get("uid"):
            continue
        keep.append(dict(entry))
    return keep


def settled(
    claim: Mapping[str, Any], pod: Callable[[str, str], Mapping[str, Any] | None]
) -> dict[str, Any] | Delete | None:
    """What the lifecycle writes for `claim` (module docstring): the claim with stale consumers removed and, reserved
    for nobody, deallocated; `DELETE` for a template's claim whose pod is gone or finished and that nobody holds;
    None when it is as it should be."""
    status = dict(claim.get("status") or {})
    reserved = reservations(claim, pod)
    meta = dict(_meta(claim))
    uid = owner_uid(claim)
    if uid is not None and not reserved:
        owner_pod = next(
            (
                p
                for ref in meta.get("ownerReferences") or ()
                if isinstance(ref, Mapping) and ref.get("kind") == "Pod"
                for p in [pod(str(meta.get("namespace") or "default"), str(ref.get("name") or ""))]
            ),
            None,
        )
        if owner_pod is None or _meta(owner_pod).get("uid") != uid or finished(owner_pod):
            return DELETE
    if reserved:
        status["reservedFor"] = reserved
    else:
        status.pop("reservedFor", None)
        status.pop("allocation", None)
        finalizers = [f for f in meta.get("finalizers") or () if f != DELETE_PROTECTION]
        if finalizers:
            meta["finalizers"] = finalizers
        else:
            meta.pop("finalizers", None)
    out = {**claim, "metadata": meta, "status": status}
    if not status:
        out.pop("status")
    return None if out == claim else out


def stale_holders(
    instance: Mapping[str, Any],
    claim: Callable[[str, str], Mapping[str, Any] | None],
    first_seen: Mapping[str, float],
    now: float,
    grace: float,
) -> tuple[list[tuple[str, str]], dict[str, float]]:
    """The claims (namespace, name) whose slots on `instance` are to be freed now, and the holders to keep watching
    (holder -> when first seen unallocated)."""
    release: list[tuple[str, str]] = []
    watching: dict[str, float] = {}
    for raw in ((instance.get("spec") or {}).get("deviceUsage") or {}).values():
        if not isinstance(raw, str) or not raw.startswith("D:"):
            continue
        try:
            holder = parse_holder(raw)
        except errors.Invalid:
            continue
        if not isinstance(holder, DRA):
            continue
        found = claim(holder.namespace, holder.claim)
        ref = (holder.namespace, holder.claim)
        if found is None:
            if ref not in release:
                release.append(ref)
            continue
        if (found.get("status") or {}).get("allocation"):
            continue
        seen = first_seen.get(raw, now)
        if now - seen >= grace:
            if ref not in release:
                release.append(ref)
        else:
            watching[raw] = seen
    return release, watching


class ClaimLifecycle:
    """Keeps ResourceClaims in step with their pods (module docstring). One work queue of keys: `pod:<ns>/<name>`,
    `claim:<ns>/<name>`, `instance:<ns>/<name>`."""

    def __init__(
        self,
        store: Store,
        clock: Clock,
        *,
        slot_grace: float = 30.0,
        retry_after: float = 1.0,
        contention_clock: Clock | None = None,
        name: str = "claim-lifecycle",
    ) -> None:
        self.store = store
        self.clock = clock
        self.contention_clock = contention_clock or clock
        self.slot_grace = slot_grace
        self.retry_after = retry_after
        self.supervisor = Supervisor(name, clock=self.contention_clock)
        self.pods: Informer[dict[str, Any]] = Informer(
            store, "Pod", indexes={"claims": lambda p: [f"{_key(p).split('/')[0]}/{n}" for n in _named_claims(p)]}
        )
        self.claims: Informer[dict[str, Any]] = Informer(
            store, "ResourceClaim", indexes={"owner": lambda c: [u] if (u := owner_uid(c)) else []}
        )
        self.templates: Informer[dict[str, Any]] = Informer(store, "ResourceClaimTemplate")
        self.instances: Informer[dict[str, Any]] = Informer(store, "Instance", indexes={"dra": _held_claims})
        self._informers: list[Informer[Any]] = [self.pods, self.claims, self.templates, self.instances]
        self.queue: WorkQueue[str] = WorkQueue(clock, name="devplace-claims")
        self.writes = 0
        self._first_seen: dict[str, float] = {}
        self._ready = False
        self._unsubscribe: list[Callable[[], None]] = []

    def start(self) -> None:
        self._unsubscribe = [
            self.pods.subscribe(self._on_pod),
            self.claims.subscribe(self._on_claim),
            self.templates.subscribe(self._on_template),
            self.instances.subscribe(self._on_instance),
        ]
        for informer in self._informers:
            self.supervisor.loop(f"informer:{informer.name}", informer.run)
        self.supervisor.loop("claims", self._work)

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        self._unsubscribe = []
        await self.supervisor.stop()

    def is_idle(self) -> bool:
        return self._ready and self.queue.idle

    # -- events -> keys ----------------------------------------------------------------------------------------------

    def _on_pod(self, change: Change[dict[str, Any]]) -> None:
        pod = change.new if change.new is not None else change.old
        if pod is not None:
            self._mark_pod(pod)

    def _mark_pod(self, pod: Mapping[str, Any]) -> None:
        if template_entries(pod):
            self.queue.mark(f"pod:{_key(pod)}")
        namespace = _key(pod).split("/")[0]
        uid = _meta(pod).get("uid")
        owned = {str(_meta(c).get("name")) for c in self.claims.by("owner", uid)} if uid else set()
        for name in _named_claims(pod) | owned:
            self.queue.mark(f"claim:{namespace}/{name}")

    def _on_claim(self, change: Change[dict[str, Any]]) -> None:
        self.queue.mark(f"claim:{change.key[0]}/{change.key[1]}")
        if change.new is None or not (change.new.get("status") or {}).get("allocation"):
            for key in self.instances.keys_by("dra", f"{change.key[0]}/{change.key[1]}"):
                self.queue.mark(f"instance:{key[0]}/{key[1]}")

    def _on_template(self, change: Change[dict[str, Any]]) -> None:
        for pod in self.pods.values():
            if any(t == change.key[1] for _, t in template_entries(pod)):
                self.queue.mark(f"pod:{_key(pod)}")

    def _on_instance(self, change: Change[dict[str, Any]]) -> None:
        if change.new is not None:
            usage = (change.new.get("spec") or {}).get("deviceUsage") or {}
            if any(isinstance(v, str) and v.startswith("D:") for v in usage.values()):
                self.queue.mark(f"instance:{change.key[0]}/{change.key[1]}")

    # -- the loop ------------------------------------------------------------------------------------------------

    async def _work(self) -> None:
        for informer in self._informers:
            await informer.wait_synced()
        for pod in self.pods.values():
            self._mark_pod(pod)
        for namespace, name in list(self.claims.keys()):
            self.queue.mark(f"claim:{namespace}/{name}")
        for namespace, name in list(self.instances.keys()):
            self.queue.mark(f"instance:{namespace}/{name}")
        self._ready = True
        while True:
            keys = await self.queue.get_batch(_AT_ONCE)
            await asyncio.gather(*(self._one(key) for key in keys))

    async def _one(self, key: str) -> None:
        """One key; a key is never handled twice at once (the queue holds it as processing until `done`)."""
        try:
            await self._handle(key)
        except errors.DevplaceError as e:
            log.warning("claim lifecycle: %s failed: %s", key, e)
            self.queue.mark_at(key, self.clock.now() + self.retry_after)
        finally:
            self.queue.done(key)

    async def _handle(self, key: str) -> None:
        what, _, rest = key.partition(":")
        namespace, _, name = rest.partition("/")
        if what == "pod":
            await self._pod(namespace, name)
        elif what == "claim":
            await self._claim(namespace, name)
        elif what == "instance":
            await self._instance(namespace, name)

    async def _pod(self, namespace: str, name: str) -> None:
        pod = self.pods.get(namespace, name)
        if pod is None:
            return
        wanted, _missing = claims_to_make(pod, lambda t: self.templates.get(namespace, t))
        for body in wanted:
            existing = self.claims.get(namespace, body["metadata"]["name"])
            if existing is not None:
                continue
            try:
                created = await self.store.create(body)
                self.writes += 1
                self.claims.record(created)
            except errors.AlreadyExists:
                pass
        if not wanted:
            return
        want = claim_statuses(pod)
        made = {b["metadata"]["annotations"][POD_CLAIM_NAME] for b in wanted}
        want = [s for s in want if s["name"] in made]

        def decide(current: dict[str, Any]) -> dict[str, Any] | None:
            if _meta(current).get("uid") != _meta(pod).get("uid"):
                return None
            status = dict(current.get("status") or {})
            recorded = {s.get("name"): s for s in status.get("resourceClaimStatuses") or () if isinstance(s, Mapping)}
            merged = {**recorded, **{s["name"]: s for s in want}}
            statuses = [merged[k] for k in sorted(merged)]
            if statuses == status.get("resourceClaimStatuses"):
                return None
            status["resourceClaimStatuses"] = statuses
            return {**current, "status": status}

        written = await cas(self.store, "Pod", name, namespace, decide, first=pod, clock=self.contention_clock)
        if written.action != "unchanged":
            self.writes += 1
            self.pods.record(written.object)

    async def _claim(self, namespace: str, name: str) -> None:
        claim = self.claims.get(namespace, name)
        if claim is None:
            return

        def decide(current: dict[str, Any]) -> dict[str, Any] | Delete | None:
            return settled(current, self.pods.get)

        try:
            written = await cas(
                self.store, "ResourceClaim", name, namespace, decide, first=claim, clock=self.contention_clock
            )
        except errors.NotFound:
            return
        if written.action == "unchanged":
            return
        self.writes += 1
        self.claims.record(written.object, deleted=written.action == "deleted")
        if written.action == "deleted" or not (written.object.get("status") or {}).get("allocation"):
            await self._release(namespace, name)

    async def _release(self, namespace: str, claim: str) -> None:
        for key in self.instances.keys_by("dra", f"{namespace}/{claim}"):
            await self._free(key[0], key[1], [(namespace, claim)])

    async def _free(self, namespace: str, name: str, claims: Iterable[tuple[str, str]]) -> None:
        wanted = list(claims)

        def decide(current: dict[str, Any]) -> dict[str, Any] | None:
            return instance_without_claims(current, wanted)

        try:
            written = await cas(
                self.store,
                "Instance",
                name,
                namespace,
                decide,
                first=self.instances.get(namespace, name),
                clock=self.contention_clock,
            )
        except errors.NotFound:
            return
        if written.action != "unchanged":
            self.writes += 1
            self.instances.record(written.object)

    async def _instance(self, namespace: str, name: str) -> None:
        instance = self.instances.get(namespace, name)
        if instance is None:
            return
        now = self.clock.now()
        mine = {k: v for k, v in self._first_seen.items() if k.startswith(f"{namespace}/{name}|")}
        first_seen = {k.split("|", 1)[1]: v for k, v in mine.items()}
        release, watching = stale_holders(instance, self.claims.get, first_seen, now, self.slot_grace)
        for k in mine:
            del self._first_seen[k]
        for holder, seen in watching.items():
            self._first_seen[f"{namespace}/{name}|{holder}"] = seen
        if watching:
            self.queue.mark_at(f"instance:{namespace}/{name}", min(watching.values()) + self.slot_grace)
        if release:
            await self._free(namespace, name, release)


def _named_claims(pod: Mapping[str, Any]) -> set[str]:
    """Names of the claims a pod uses: direct ones and those its status records for template entries."""
    out: set[str] = set()
    for raw in (pod.get("spec") or {}).get("resourceClaims") or ():
        if isinstance(raw, Mapping) and raw.get("resourceClaimName"):
            out.add(str(raw["resourceClaimName"]))
    for raw in (pod.get("status") or {}).get("resourceClaimStatuses") or ():
        if isinstance(raw, Mapping) and raw.get("resourceClaimName"):
            out.add(str(raw["resourceClaimName"]))
    return out


def _held_claims(instance: Mapping[str, Any]) -> list[str]:
    """`namespace/name` of the claims an Instance's slots are held for."""
    out: set[str] = set()
    for raw in ((instance.get("spec") or {}).get("deviceUsage") or {}).values():
        if isinstance(raw, str) and raw.startswith("D:"):
            out.add(raw[2:].rpartition(":")[0])
    return sorted(out)
