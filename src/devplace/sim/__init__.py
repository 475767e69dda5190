"""Simulation: devplace's real parts in one process against simulated devices, kubelets and time.

- `fleets`: `Fleet`: nodes (a real agent + a simulated kubelet each), a device `World`, a store, a `FakeClock`;
  apply manifests, run pods, settle, advance time, restart parts, take nodes down. The documented simulation API;
- `kubelets`: `SimKubelet`, speaking the real Registration / DevicePlugin / PodResources gRPC protocols;
- `drakubelets`: its DRA side (with `cdi_dirs`): plugins found in the plugin registry, claims prepared before a pod
  runs and unprepared after, CDI ids resolved;
- `admissions`, `nodes`: the kubelet's decisions (device picking, admission, Node status) as pure functions;
- `invariants`: the properties every simulated run must keep, checked while it runs;
- `scenarios`: scenario files (pure): the models, `load_scenario` with line and column for every problem, the JSON
  Schema, durations;
- `expectations`: a step's `expect` block checked against a snapshot of the cluster (pure);
- `generators`: `generate_scenario`: a scenario of any size whose expectations are known exactly (pure; `devplace
  sim generate`, bench/sim.py).

One door: every module here is private; this face is what the package promises (pinned by tests/test_faces.py).
"""

from devplace.sim._expectations import Mismatch, Observed, device_resource, holder_label
from devplace.sim._expectations import check as check_expectations
from devplace.sim._expectations import kinds_read as expectation_kinds
from devplace.sim._fleets import Fleet
from devplace.sim._generators import generate_scenario
from devplace.sim._invariants import recording
from devplace.sim._kubelets import SimKubelet
from devplace.sim._scenarios import (
    ACTIONS,
    Expect,
    Scenario,
    load_scenario,
    load_scenario_file,
    parse_duration,
    scenario_schema,
)
from devplace.sim._scenarios import Step as ScenarioStep

__all__ = [
    "ACTIONS",
    "Expect",
    "Fleet",
    "Mismatch",
    "Observed",
    "Scenario",
    "ScenarioStep",
    "SimKubelet",
    "check_expectations",
    "device_resource",
    "expectation_kinds",
    "generate_scenario",
    "holder_label",
    "load_scenario",
    "load_scenario_file",
    "parse_duration",
    "recording",
    "scenario_schema",
]
