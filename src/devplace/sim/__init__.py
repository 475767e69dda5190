"""sim: run devplace's real parts in one process against simulated devices, kubelets and time.

- `fleets.Fleet`: nodes (a real agent + a simulated kubelet each), a device `World`, a store, a `FakeClock`;
  apply manifests, run pods (bound, or placed by the scheduler), settle, advance time, restart parts, take nodes down;
  the scheduler and the broker controller run by default, other cluster-level `Part`s join with `add_part`.
  The documented simulation API.
- `classes.ClassMatcher`: the controller's group members by `resourceClass`, on the scheduler's class engine.
- `kubelets.SimKubelet`: a kubelet speaking the real Registration / DevicePlugin / PodResources gRPC protocols.
- `admissions`, `nodes`: the kubelet's decisions (device picking, admission, Node status) as pure functions.
"""

from devplace.sim.fleets import Fleet

__all__ = ["Fleet"]
