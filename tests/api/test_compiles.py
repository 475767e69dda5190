"""ResourceClass -> DeviceClass (`api._compiles`): the compiled CEL selects exactly the devices the seed's evaluator
selects, under the one device mapping (`api._dradevices`); a Configuration's class selects exactly its Instances and
carries its Akri resource name."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from devplace.api import normalize, resource_name
from devplace.api._cel import DeviceInput, compile_selector
from devplace.api._compiles import compile_class, compile_configuration, extended_resource
from devplace.api._dradevices import DRIVER, dra_device, instance_device, wire_value
from devplace.api._selectors import DEVICE_OPERATORS, DeviceSelector, Requirement
from devplace.scheduler import resolve_each

KEYS = ["Kind", "memory", "speed", "ver", "flag", "name"]
QUANTITIES = ["30G", "32Gi", "16Gi", "1Ki", "4", "0", "-3", "34359738368", "100m", "2k", "1e3"]
VERSIONS = ["1.2.3", "v1.2", "v2", "1.0.0-rc.1", "1.0.0-rc.10", "1.10.0", "v0.9", "1-alpha"]
UNITS = ["40GBPS", "10GBPS", "100GBPS", "5Mbps", "5000kbps", "1Gbps"]
WORDS = ["nvidia-gpu", "nic", "Hopper", "a b", "true", "false", ""]
DEVICE_VALUES = QUANTITIES + VERSIONS + UNITS + WORDS
CLASS_VALUES = [*DEVICE_VALUES, "1.2", "0.5", "31G"]

devices = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(DEVICE_VALUES), max_size=len(KEYS))


@st.composite
def requirements(draw: Any) -> Requirement:
    op = draw(st.sampled_from(DEVICE_OPERATORS))
    key = draw(st.sampled_from(KEYS))
    if op in ("Exists", "DoesNotExist"):
        return Requirement(key, op)
    if op in ("In", "NotIn"):
        return Requirement(key, op, tuple(draw(st.lists(st.sampled_from(CLASS_VALUES), min_size=1, max_size=3))))
    pool = CLASS_VALUES if op == "Eq" else [v for v in CLASS_VALUES if v not in WORDS]
    return Requirement(key, op, (draw(st.sampled_from(pool)),))


selectors_ = st.lists(st.lists(requirements(), min_size=1, max_size=3), max_size=3).map(DeviceSelector)


def _cel_verdict(selector: DeviceSelector, attrs: dict[str, str]) -> bool:
    expression = compile_class("c", selector)["spec"]["selectors"][0]["cel"]["expression"]
    return compile_selector(expression).matches(DeviceInput(DRIVER, dra_device("dev", attrs).to_wire()))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(selector=selectors_, attrs=devices)
def test_the_compiled_cel_selects_exactly_what_the_class_selects(
    selector: DeviceSelector, attrs: dict[str, str]
) -> None:
    assert _cel_verdict(selector, attrs) == selector.matches(attrs)


def test_seed_example_one_compiles_to_a_device_class_with_its_extended_resource() -> None:
    selector = DeviceSelector([[Requirement("Kind", "In", ("nvidia-gpu",)), Requirement("memory", "GtEq", ("30G",))]])
    device_class = compile_class("nvidia.high.mem", selector)
    assert device_class["apiVersion"] == "resource.k8s.io/v1"
    assert device_class["kind"] == "DeviceClass"
    assert device_class["spec"]["extendedResourceName"] == "rc.devplace.io/nvidia.high.mem"
    assert extended_resource("fast.nic") == "rc.devplace.io/fast.nic"
    assert _cel_verdict(selector, {"Kind": "nvidia-gpu", "memory": "32Gi"}) is True
    assert _cel_verdict(selector, {"Kind": "nvidia-gpu", "memory": "16Gi"}) is False
    assert _cel_verdict(selector, {"Kind": "nic", "memory": "64Gi"}) is False


def test_an_empty_class_compiles_to_a_selector_that_matches_nothing() -> None:
    assert _cel_verdict(DeviceSelector([]), {"Kind": "nvidia-gpu"}) is False


def test_a_nested_class_compiles_with_the_terms_of_the_classes_it_references() -> None:
    def kind_is(kind: str) -> dict[str, Any]:
        return {"resourceSelector": [{"matchExpressions": [{"key": "Kind", "operator": "In", "values": [kind]}]}]}

    specs = {
        "gpu": kind_is("gpu"),
        "nic": kind_is("nic"),
        "any": {"resourceSelector": [{"classRef": "gpu"}, {"classRef": "nic"}]},
    }
    resolved, refused = resolve_each(specs)
    assert not refused
    selector = resolved["any"].selector
    for kind, expected in (("gpu", True), ("nic", True), ("fpga", False)):
        assert _cel_verdict(selector, {"Kind": kind}) is expected


# -- a Configuration's Akri resource as a DeviceClass ---------------------------------------------------------------

CONFIGURATION_NAMES = ["cam", "akri-udev", "gpus.a", "123", "7", "v2", "v2.1", "1-rc", "true", "false", "10m", "2k"]
"""Configuration names of every kind the mapping types a value as (string, int, version, bool, capacity), none two
of which the mapping gives one value."""

dns_labels = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?", fullmatch=True)


def configuration(name: str, api_version: str = "akri.sh/v0") -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "Configuration",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"discoveryHandler": {"name": "udev"}},
    }


def instance_of(configuration_name: str, properties: dict[str, str]) -> DeviceInput:
    instance = {
        "metadata": {"name": f"{configuration_name}-a1b2c3"},
        "spec": {"configurationName": configuration_name, "nodes": ["node-a"], "brokerProperties": properties},
    }
    return DeviceInput(DRIVER, instance_device(instance, handler_name="udev").to_wire())


def selects(device_class: dict[str, Any], device: DeviceInput) -> bool:
    return compile_selector(device_class["spec"]["selectors"][0]["cel"]["expression"]).matches(device)


@pytest.mark.parametrize("name", CONFIGURATION_NAMES)
def test_a_configurations_class_selects_exactly_its_own_instances_and_carries_its_akri_resource(name: str) -> None:
    device_class = compile_configuration(configuration(name))
    normalize(device_class)  # a DeviceClass kube-apiserver accepts
    assert device_class["metadata"]["name"] == f"{name}.akri.sh"
    assert device_class["spec"]["extendedResourceName"] == resource_name("akri.sh/v0", name) == f"akri.sh/{name}"
    for other in CONFIGURATION_NAMES:
        assert selects(device_class, instance_of(other, {"configuration": name})) is (other == name), other


@settings(max_examples=200, deadline=None)
@given(ours=dns_labels, theirs=dns_labels, properties=st.dictionaries(st.sampled_from(KEYS), dns_labels, max_size=3))
def test_a_configurations_class_selects_a_device_exactly_when_the_mapping_gives_it_that_configuration(
    ours: str, theirs: str, properties: dict[str, str]
) -> None:
    device = instance_of(theirs, properties)
    assert selects(compile_configuration(configuration(ours)), device) is (wire_value(ours) == wire_value(theirs))


def test_the_akri_resource_follows_the_configurations_group_or_the_agents_prefix() -> None:
    native = compile_configuration(configuration("cams", "devplace.io/v1alpha1"))
    assert native["spec"]["extendedResourceName"] == "devplace.io/cams"
    assert native["metadata"]["name"] == "cams.devplace.io"
    overridden = compile_configuration(configuration("cams"), prefix="example.com")
    assert overridden["spec"]["extendedResourceName"] == "example.com/cams"
    assert overridden["metadata"]["annotations"] == {"devplace.io/configuration": "default/cams"}


def test_names_the_mapping_gives_one_value_share_a_class() -> None:
    """`7` and `007` are one int under the mapping: no selector tells their devices apart (module docstring)."""
    assert selects(compile_configuration(configuration("7")), instance_of("007", {})) is True
