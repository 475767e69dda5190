"""The DRA half of a simulated kubelet: DRA plugins found through the plugin registry, claims prepared before a pod's
containers start and unprepared after its last pod on the node stops (dra.md section 4).

What the kubelet does, reproduced here over the real gRPC protocols (devplace's own stubs):
- Registration: every socket in `<kubelet_dir>/plugins_registry/` is asked GetInfo; a `DRAPlugin` serving
  `v1.DRAPlugin` (else `v1beta1.DRAPlugin`) is dialled at the endpoint it names and told NotifyRegistrationStatus
  (`plugin_registered: true`). The registry is scanned again when a pod needs a driver not yet known.
- A pod's claims (`spec.resourceClaims`: `resourceClaimName`, or a template's claim named in
  `status.resourceClaimStatuses`) are read from the store; a claim must be allocated and reserved for the pod
  (`status.reservedFor` holds its UID), as the kubelet checks. Each claim is prepared once per node, whatever number
  of pods use it (reference-counted by pod UID), with one NodePrepareResources per driver; a claim UID missing from
  the answer, or an answer with `error` set, fails the pod (`UnexpectedAdmissionError`, the kubelet's reason too).
- The CDI ids a plugin answers are resolved in the CDI spec directories (what a container runtime does): an id no
  spec file defines fails the pod; a resolved id gives the container edits (env, device nodes, mounts).
- After the last pod using a claim stops or goes, NodeUnprepareResources; an error is logged and tried again on the
  next release (the kubelet retries until the plugin answers).
- ResourceSlices: at start the kubelet deletes every slice of its node (`wipe_slices`: `spec.nodeName` is the node),
  and a driver whose registry socket went away and did not come back within `DEREGISTERED_GRACE` (30 s, on the
  kubelet's clock) loses its slices of the node too (`watch_registry`), so a node's pool never outlives its driver.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

from devplace import errors
from devplace.clocks import Clock
from devplace.deviceplugin.dra.v1 import api_pb2 as dra_v1
from devplace.deviceplugin.dra.v1 import api_pb2_grpc as dra_v1_grpc
from devplace.deviceplugin.dra.v1beta1 import api_pb2 as dra_v1beta1
from devplace.deviceplugin.dra.v1beta1 import api_pb2_grpc as dra_v1beta1_grpc
from devplace.deviceplugin.pluginregistration.v1 import api_pb2 as reg_pb2
from devplace.deviceplugin.pluginregistration.v1 import api_pb2_grpc as reg_grpc
from devplace.store import Store

log = logging.getLogger(__name__)

REGISTRY_DIR = "plugins_registry"
DEREGISTERED_GRACE = 30.0
"""Seconds after a driver deregisters before the kubelet deletes its slices of the node."""
REGISTRY_POLL = 1.0
"""Seconds between two looks at the registry directory (the kubelet watches it with inotify)."""
_RPC_TIMEOUT = 45.0
"""The kubelet's timeout for a DRA call."""


class DraFailure(Exception):
    """Why a pod's claims could not be prepared (the pod fails with this message)."""


@dataclass
class _Plugin:
    driver: str
    socket: Path
    """Its registration socket in the registry directory."""
    endpoint: str
    version: str
    channel: grpc.aio.Channel
    stub: Any


@dataclass
class PreparedClaim:
    """A claim prepared on this node: what its plugins answered, and the pods using it."""

    namespace: str
    name: str
    uid: str
    drivers: tuple[str, ...]
    cdi_ids: tuple[str, ...]
    edits: tuple[Mapping[str, Any], ...]
    pods: set[str] = field(default_factory=set)


def claim_names(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(pod claim name, ResourceClaim name) of each of a pod's claims; `DraFailure` for a template's claim that has
    no name in the pod's status yet."""
    spec = pod.get("spec") or {}
    statuses = {
        s.get("name"): s.get("resourceClaimName")
        for s in ((pod.get("status") or {}).get("resourceClaimStatuses") or [])
        if isinstance(s, Mapping)
    }
    out: list[tuple[str, str]] = []
    for entry in spec.get("resourceClaims") or []:
        name = str(entry.get("name") or "")
        if entry.get("resourceClaimName"):
            out.append((name, str(entry["resourceClaimName"])))
        elif entry.get("resourceClaimTemplateName"):
            generated = statuses.get(name)
            if not generated:
                raise DraFailure(f"claim {name!r} of the pod has no ResourceClaim yet (status.resourceClaimStatuses)")
            out.append((name, str(generated)))
    return out


def resolve_cdi(cdi_id: str, directories: Sequence[Path]) -> Mapping[str, Any] | None:
    """The containerEdits of device `vendor/class=name` in the spec files of `directories` (JSON specs; the later
    directory wins, as `/var/run/cdi` over `/etc/cdi`), or None when no spec defines it."""
    kind, sep, name = cdi_id.partition("=")
    if not sep:
        return None
    found: Mapping[str, Any] | None = None
    for directory in directories:
        for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
            try:
                spec = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(spec, Mapping) or spec.get("kind") != kind:
                continue
            for device in spec.get("devices") or []:
                if isinstance(device, Mapping) and device.get("name") == name:
                    found = device.get("containerEdits") or {}
    return found


class DraClient:
    """The simulated kubelet's DRA side for one node (module docstring)."""

    def __init__(self, node: str, kubelet_dir: Path, store: Store, cdi_dirs: Sequence[Path]) -> None:
        self.node = node
        self.registry = Path(kubelet_dir) / REGISTRY_DIR
        self.store = store
        self.cdi_dirs = [Path(d) for d in cdi_dirs]
        self.plugins: dict[str, _Plugin] = {}
        self.claims: dict[str, PreparedClaim] = {}
        """Prepared claims by UID."""
        self._by_pod: dict[str, list[str]] = {}
        self._deregistered: dict[str, float] = {}
        """Drivers whose registry socket went, and when (their slices go after `DEREGISTERED_GRACE`)."""

    async def discover(self) -> None:
        """Ask every registry socket not yet known for its plugin (GetInfo), dial it, tell it it is registered."""
        known = {p.endpoint for p in self.plugins.values()}
        sockets = sorted(self.registry.glob("*.sock")) if self.registry.is_dir() else []
        for socket in sockets:
            try:
                async with grpc.aio.insecure_channel(f"unix://{socket}") as channel:
                    stub = reg_grpc.RegistrationStub(channel)
                    info = await stub.GetInfo(reg_pb2.InfoRequest(), timeout=_RPC_TIMEOUT)
                    if info.type != "DRAPlugin" or info.endpoint in known:
                        continue
                    versions = set(info.supported_versions)
                    version = (
                        "v1" if "v1.DRAPlugin" in versions else "v1beta1" if "v1beta1.DRAPlugin" in versions else ""
                    )
                    error = "" if version else f"no supported DRAPlugin version in {sorted(versions)}"
                    await stub.NotifyRegistrationStatus(
                        reg_pb2.RegistrationStatus(plugin_registered=not error, error=error), timeout=_RPC_TIMEOUT
                    )
            except grpc.aio.AioRpcError as e:
                log.debug("%s: plugin registry socket %s did not answer: %s", self.node, socket, e.details())
                continue
            if not version:
                continue
            old = self.plugins.pop(info.name, None)
            if old is not None:
                await old.channel.close(None)
            channel = grpc.aio.insecure_channel(f"unix://{info.endpoint}")
            stub_class = dra_v1_grpc.DRAPluginStub if version == "v1" else dra_v1beta1_grpc.DRAPluginStub
            self.plugins[info.name] = _Plugin(info.name, socket, info.endpoint, version, channel, stub_class(channel))
            self._deregistered.pop(info.name, None)

    async def wipe_slices(self, driver: str | None = None) -> list[str]:
        """Delete the node's ResourceSlices (of `driver`, or all); the names deleted."""
        found = await self.store.list("ResourceSlice", fields=f"spec.nodeName={self.node}")
        deleted: list[str] = []
        for item in found.items:
            if driver is not None and (item.get("spec") or {}).get("driver") != driver:
                continue
            name = str(item["metadata"]["name"])
            try:
                await self.store.delete("ResourceSlice", name, resource_version=item["metadata"]["resourceVersion"])
            except (errors.NotFound, errors.Conflict):
                continue  # gone already, or rewritten meanwhile by a live driver
            deleted.append(name)
        if deleted:
            log.info("%s: deleted ResourceSlices %s", self.node, ", ".join(deleted))
        return deleted

    async def check_registry(self, now: float) -> None:
        """One look at the registry: drivers whose socket went are deregistered; their slices go after the grace;
        new sockets are registered."""
        for driver, plugin in list(self.plugins.items()):
            if not plugin.socket.exists():
                del self.plugins[driver]
                await plugin.channel.close(None)
                self._deregistered.setdefault(driver, now)
        if self.registry.is_dir() and any(
            s not in {p.socket for p in self.plugins.values()} for s in self.registry.glob("*.sock")
        ):
            await self.discover()
        for driver, since in list(self._deregistered.items()):
            if driver in self.plugins:
                del self._deregistered[driver]
            elif now - since >= DEREGISTERED_GRACE:
                del self._deregistered[driver]
                await self.wipe_slices(driver)

    async def watch_registry(self, clock: Clock) -> None:
        """`check_registry` every `REGISTRY_POLL` seconds of `clock`, forever."""
        while True:
            await self.check_registry(clock.now())
            await clock.sleep(REGISTRY_POLL)

    async def close(self) -> None:
        plugins, self.plugins = list(self.plugins.values()), {}
        for plugin in plugins:
            await plugin.channel.close(None)

    def pod_cdi_ids(self, pod_uid: str) -> list[str]:
        """The CDI ids of every claim a pod uses (what its containers get)."""
        return [i for uid in self._by_pod.get(pod_uid, []) for i in self.claims[uid].cdi_ids]

    async def prepare_pod(self, pod: Mapping[str, Any]) -> list[str]:
        """Prepare the pod's claims (module docstring); their CDI ids, or `DraFailure`."""
        meta = pod.get("metadata") or {}
        namespace, pod_uid = str(meta.get("namespace") or "default"), str(meta.get("uid") or "")
        used = self._by_pod.setdefault(pod_uid, [])
        try:
            for pod_claim, name in claim_names(pod):
                try:
                    claim = await self.store.get("ResourceClaim", name, namespace)
                except errors.NotFound:
                    raise DraFailure(f"ResourceClaim {namespace}/{name} (pod claim {pod_claim!r}) not found") from None
                uid = str((claim.get("metadata") or {}).get("uid") or "")
                status = claim.get("status") or {}
                if not status.get("allocation"):
                    raise DraFailure(f"ResourceClaim {namespace}/{name} is not allocated")
                if pod_uid not in {str(r.get("uid")) for r in status.get("reservedFor") or []}:
                    raise DraFailure(f"ResourceClaim {namespace}/{name} is not reserved for this pod")
                if uid not in self.claims:
                    self.claims[uid] = await self._prepare(namespace, name, uid, claim)
                self.claims[uid].pods.add(pod_uid)
                if uid not in used:
                    used.append(uid)
        except DraFailure:
            await self.release_pod(pod_uid)  # what this pod took so far goes again: a failed pod holds nothing
            raise
        return self.pod_cdi_ids(pod_uid)

    def uses_claims(self, pod_uid: str) -> bool:
        return bool(self._by_pod.get(pod_uid))

    async def _prepare(self, namespace: str, name: str, uid: str, claim: Mapping[str, Any]) -> PreparedClaim:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        results = (allocation.get("devices") or {}).get("results") or []
        drivers = tuple(sorted({str(r.get("driver")) for r in results if isinstance(r, Mapping)}))
        missing = [d for d in drivers if d not in self.plugins]
        if missing:
            await self.discover()
            missing = [d for d in drivers if d not in self.plugins]
        if missing:
            raise DraFailure(f"DRA driver {', '.join(missing)} is not registered on node {self.node}")
        ids: list[str] = []
        prepared: list[str] = []
        try:
            for driver in drivers:
                plugin = self.plugins[driver]
                module = dra_v1 if plugin.version == "v1" else dra_v1beta1
                request = module.NodePrepareResourcesRequest(
                    claims=[module.Claim(namespace=namespace, name=name, uid=uid)]
                )
                try:
                    response = await plugin.stub.NodePrepareResources(request, timeout=_RPC_TIMEOUT)
                except grpc.aio.AioRpcError as e:
                    raise DraFailure(f"NodePrepareResources of {driver} failed: {e.details() or e.code()}") from e
                prepared.append(driver)
                answer = response.claims.get(uid)
                if answer is None:
                    raise DraFailure(f"{driver} did not answer for claim {namespace}/{name} ({uid})")
                if answer.error:
                    raise DraFailure(f"{driver} could not prepare claim {namespace}/{name}: {answer.error}")
                ids.extend(i for device in answer.devices for i in device.cdi_device_ids)
        except DraFailure:
            await self._unprepare(namespace, name, uid, prepared)
            raise
        edits: list[Mapping[str, Any]] = []
        for cdi_id in ids:
            found = resolve_cdi(cdi_id, self.cdi_dirs)
            if found is None:
                await self._unprepare(namespace, name, uid, drivers)
                raise DraFailure(f"CDI device {cdi_id} of claim {namespace}/{name} is in no CDI spec")
            edits.append(found)
        return PreparedClaim(namespace, name, uid, drivers, tuple(ids), tuple(edits))

    async def release_pod(self, pod_uid: str) -> None:
        """The pod stopped or went: unprepare each of its claims no other pod on this node uses."""
        for uid in self._by_pod.pop(pod_uid, []):
            claim = self.claims.get(uid)
            if claim is None:
                continue
            claim.pods.discard(pod_uid)
            if claim.pods:
                continue
            if await self._unprepare(claim.namespace, claim.name, uid, claim.drivers):
                del self.claims[uid]

    async def _unprepare(self, namespace: str, name: str, uid: str, drivers: Sequence[str]) -> bool:
        done = True
        for driver in drivers:
            plugin = self.plugins.get(driver)
            if plugin is None:
                continue
            module = dra_v1 if plugin.version == "v1" else dra_v1beta1
            request = module.NodeUnprepareResourcesRequest(
                claims=[module.Claim(namespace=namespace, name=name, uid=uid)]
            )
            try:
                response = await plugin.stub.NodeUnprepareResources(request, timeout=_RPC_TIMEOUT)
            except grpc.aio.AioRpcError as e:
                error = e.details() or str(e.code())
            else:
                answer = response.claims.get(uid)
                error = "no answer" if answer is None else answer.error
            if not error:
                continue
            log.warning("%s: %s could not unprepare claim %s/%s: %s", self.node, driver, namespace, name, error)
            done = False
        return done
