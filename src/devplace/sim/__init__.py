"""sim: run devplace's real parts in one process against simulated devices, kubelets and time.

- `fleets.Fleet`: nodes (a real agent + a simulated kubelet each), a device `World`, a store, a `FakeClock`;
  apply manifests, run pods, settle, advance time, restart parts; cluster-level `Part`s (controller, scheduler) join
  with `add_part`. The documented simulation API.
- `kubelets.SimKubelet`: a kubelet speaking the real Registration / DevicePlugin / PodResources gRPC protocols.
- `admissions`, `nodes`: the kubelet's decisions (device picking, admission, Node status) as pure functions.
"""

from devplace.sim.fleets import Fleet, Part, PartFactory
from devplace.sim.kubelets import ContainerAllocation, PodAllocation, SimKubelet

__all__ = ["ContainerAllocation", "Fleet", "Part", "PartFactory", "PodAllocation", "SimKubelet"]
