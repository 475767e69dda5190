"""Simulation: devplace's real parts in one process against simulated devices, kubelets and time.

- `fleets`: `Fleet`: nodes (a real agent + a simulated kubelet each), a device `World`, a store, a `FakeClock`;
  apply manifests, run pods, settle, advance time, restart parts, take nodes down. The documented simulation API;
- `kubelets`: `SimKubelet`, speaking the real Registration / DevicePlugin / PodResources gRPC protocols;
- `drakubelets`: its DRA side (with `cdi_dirs`): plugins found in the plugin registry, claims prepared before a pod
  runs and unprepared after, CDI ids resolved;
- `admissions`, `nodes`: the kubelet's decisions (device picking, admission, Node status) as pure functions;
- `invariants`: the properties every simulated run must keep, checked while it runs.

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.sim._fleets import Fleet
from devplace.sim._invariants import recording
from devplace.sim._kubelets import SimKubelet

__all__ = [
    "Fleet",
    "SimKubelet",
    "recording",
]
