"""The `nvml` handler: one device per GPU with DRA's attribute names, what a container needs, health from NVML
events with a sticky rule, and the node without NVML or GPUs; driven by the captured H200 (the fake NVML), and where
a GPU is present, also by the real library (skipped elsewhere, saying why).

Watcher threads block in the fake's wait for at most `WAIT` seconds at a time (real time: a thread has no fake clock),
which only bounds how long `close` takes; nothing here asserts a duration.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.api import DeviceSelector, Quantity
from devplace.discovery import GPU_ATTRIBUTES, Event, FakeNvml, GpuHandler, Pynvml, xid_policy
from devplace.discovery._devices import CDI_DEVICES, HEALTH, HEALTH_REASON, Device, DeviceSpec
from devplace.discovery._gpus import (
    IGNORED_XIDS,
    Gpu,
    Health,
    NodeView,
    XidPolicy,
    cdi_device,
    cuda_version,
    device_specs,
    event_reason,
    gpu_properties,
    health_after,
    parse_details,
    parse_xids,
    pci_bus_id,
    read_gpu,
    read_node,
    semver,
)
from devplace.discovery._nvml import EVENT_DOUBLE_BIT_ECC, EVENT_SINGLE_BIT_ECC, EVENT_XID_CRITICAL

from .streams import next_of
from .test_nvml import CAPTURE, H200_UUID, REAL_ABSENT, capture

WAIT = 0.05
H200 = Gpu(
    index=0,
    uuid=H200_UUID,
    name="NVIDIA H200",
    memory=150754820096,
    pci_bus_id="0000:00:06.0",
    minor=0,
    brand="Nvidia",
    architecture="Hopper",
    compute_capability="9.0.0",
    driver_version="580.159.4",
    cuda_driver_version="13.0.0",
    numa_node=None,  # NotSupported on the captured machine
    mig_enabled=False,
    supported_events=65439,
)
H200_PROPERTIES = {
    "type": "gpu",
    "uuid": H200_UUID,
    "productName": "NVIDIA H200",
    "brand": "Nvidia",
    "architecture": "Hopper",
    "cudaComputeCapability": "9.0.0",
    "driverVersion": "580.159.4",
    "cudaDriverVersion": "13.0.0",
    "resource.kubernetes.io/pciBusID": "0000:00:06.0",
    "memory": "143771Mi",
    "NVIDIA_VISIBLE_DEVICES": H200_UUID,
    HEALTH: "Healthy",
}


def xid(uuid: str, number: int) -> Event:
    return Event(uuid, EVENT_XID_CRITICAL, number)


async def until(handler: GpuHandler, condition: Any, timeout: float = 10.0) -> None:
    """Wait for the handler's state to satisfy `condition` (woken by its changes; bounded against a hang)."""
    async with asyncio.timeout(timeout):
        while True:
            wake = handler.current()
            if condition():
                return
            await wake.wait()


@pytest.fixture
async def fake() -> FakeNvml:
    return FakeNvml(capture())


@pytest.fixture
async def handler(fake: FakeNvml, tmp_path: Path) -> AsyncIterator[GpuHandler]:
    gpus = GpuHandler(fake, root=tmp_path, wait_timeout=WAIT)
    try:
        yield gpus
    finally:
        await gpus.close()


# -- pure parts -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("9.0", "9.0.0"), ("580.159.04", "580.159.4"), ("13", "13.0.0"), ("v1.2.3", "1.2.3"), ("r580", None), ("", None)],
)
def test_versions_become_strict_semver_as_the_dra_driver_writes_them(text: str, expected: str | None) -> None:
    assert semver(text) == expected


def test_cuda_driver_versions_and_bus_ids_read_as_dra_names_them() -> None:
    assert cuda_version(13000) == "13.0.0"
    assert cuda_version(12040) == "12.4.0"
    assert pci_bus_id("00000000:00:06.0") == "0000:00:06.0"
    assert pci_bus_id("00000001:3B:00.0") == "0001:3b:00.0"


def test_reading_the_captured_h200_gives_every_attribute_not_supported_ones_left_out() -> None:
    fake = FakeNvml.from_file(CAPTURE)
    assert read_gpu(fake, 0, "580.159.4", "13.0.0") == H200


def test_the_h200s_properties_carry_the_dra_drivers_names_and_types() -> None:
    props = gpu_properties(H200, Health())
    assert props == H200_PROPERTIES
    for name, kind in GPU_ATTRIBUTES.items():
        if name not in props:
            continue
        value = props[name]
        if kind == "version":
            assert semver(value) == value, name
        elif kind == "capacity":
            assert Quantity(value) == Quantity(str(H200.memory)), name
        elif kind == "int":
            assert value.lstrip("-").isdigit(), name


def test_optional_properties_appear_when_the_node_has_them() -> None:
    props = gpu_properties(
        Gpu(**{**H200.__dict__, "numa_node": 1}),
        Health(False, "XID 79 (critical error)"),
        cdi="nvidia.com/gpu=0",
        pcie_root="pci0000:00",
    )
    assert props == {
        **H200_PROPERTIES,
        "numaNode": "1",
        "resource.kubernetes.io/pcieRoot": "pci0000:00",
        CDI_DEVICES: "nvidia.com/gpu=0",
        HEALTH: "Unhealthy",
        HEALTH_REASON: "XID 79 (critical error)",
    }


def _selector(*expressions: dict[str, Any]) -> DeviceSelector:
    return DeviceSelector.from_wire([{"matchExpressions": list(expressions)}])


@pytest.mark.parametrize(
    ("memory", "selected"),
    [(150754820096, True), (85899345920, True), (17179869184, False)],  # H200 141 GB, H100 80 GB, V100 16 GB
)
def test_seed_003s_class_memory_gteq_30g_selects_an_80_or_141_gb_gpu_and_not_a_16_gb_one(
    memory: int, selected: bool
) -> None:
    props = gpu_properties(Gpu(**{**H200.__dict__, "memory": memory}), Health())
    assert _selector({"key": "memory", "operator": "GtEq", "values": ["30G"]}).matches(props) is selected
    assert _selector({"key": "memory", "operator": "GtEq", "values": ["200G"]}).matches(props) is False


def test_versions_compare_as_versions_in_class_selectors() -> None:
    props = gpu_properties(H200, Health())
    assert _selector({"key": "cudaComputeCapability", "operator": "GtEq", "values": ["8.0"]}).matches(props)
    assert not _selector({"key": "cudaComputeCapability", "operator": "Gt", "values": ["9.0.0"]}).matches(props)
    assert _selector({"key": "driverVersion", "operator": "Gt", "values": ["580.95.5"]}).matches(props)


def test_device_nodes_are_those_present_on_the_node_read_write() -> None:
    present = {"/dev/nvidia3", "/dev/nvidiactl", "/dev/nvidia-uvm"}
    assert device_specs(3, present.__contains__) == (
        DeviceSpec("/dev/nvidia3", "/dev/nvidia3", "rw"),
        DeviceSpec("/dev/nvidiactl", "/dev/nvidiactl", "rw"),
        DeviceSpec("/dev/nvidia-uvm", "/dev/nvidia-uvm", "rw"),
    )
    assert device_specs(0, present.__contains__) == (
        DeviceSpec("/dev/nvidiactl", "/dev/nvidiactl", "rw"),
        DeviceSpec("/dev/nvidia-uvm", "/dev/nvidia-uvm", "rw"),
    )


def _spec(*devices: dict[str, Any], kind: str = "nvidia.com/gpu") -> dict[str, Any]:
    return {"cdiVersion": "0.5.0", "kind": kind, "devices": list(devices)}


def _nodes(*paths: str) -> dict[str, Any]:
    return {"deviceNodes": [{"path": p} for p in paths]}


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        ([_spec({"name": "0"}, {"name": H200_UUID}, {"name": "all"})], f"nvidia.com/gpu={H200_UUID}"),
        ([_spec({"name": "gpu0", "containerEdits": _nodes("/dev/nvidia0")})], "nvidia.com/gpu=gpu0"),
        ([_spec({"name": "0"}, {"name": "all", "containerEdits": _nodes("/dev/nvidia1")})], "nvidia.com/gpu=0"),
        ([_spec({"name": H200_UUID}, kind="example.com/gpu")], None),
        ([_spec({"name": "1"})], None),
        ([], None),
        # the higher-priority directory (later) wins for the same strategy
        (
            [
                _spec({"name": "a", "containerEdits": _nodes("/dev/nvidia0")}),
                _spec({"name": "b", "containerEdits": _nodes("/dev/nvidia0")}),
            ],
            "nvidia.com/gpu=b",
        ),
    ],
)
def test_the_gpus_cdi_device_is_found_under_whichever_naming_nvidia_ctk_used(
    specs: list[dict[str, Any]], expected: str | None
) -> None:
    assert cdi_device(H200, specs) == expected


def test_reading_the_node_finds_device_nodes_cdi_specs_and_the_pcie_root(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "dev").mkdir()
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
        (tmp_path / "dev" / name).write_text("")
    (tmp_path / "etc/cdi").mkdir(parents=True)
    (tmp_path / "etc/cdi/nvidia.yaml").write_text(
        f"cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: {H200_UUID}\n"
    )
    (tmp_path / "etc/cdi/broken.json").write_text("{")
    (tmp_path / "etc/cdi/notes.txt").write_text("ignored")
    (tmp_path / "sys/devices/pci0000:00/0000:00:06.0").mkdir(parents=True)
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:06.0", tmp_path / "sys/bus/pci/devices/0000:00:06.0")
    with caplog.at_level(logging.WARNING):
        node = read_node(tmp_path, [H200])
    assert node.present == frozenset({"/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"})
    assert [s["kind"] for s in node.cdi_specs] == ["nvidia.com/gpu"]
    assert node.pcie_roots == {"0000:00:06.0": "pci0000:00"}
    assert [r.message for r in caplog.records] == [
        f"nvml: skipping CDI spec {tmp_path / 'etc/cdi/broken.json'}: " + caplog.records[0].message.split(": ", 2)[2]
    ]


def test_a_bare_node_has_no_device_nodes_cdi_or_pcie_root(tmp_path: Path) -> None:
    assert read_node(tmp_path, [H200]) == NodeView()


@pytest.mark.parametrize("details", ["", "  ", "{}", "null"])
def test_the_handler_takes_no_details(details: str) -> None:
    parse_details(details)


@pytest.mark.parametrize(
    ("details", "message"),
    [("uuids: [x]", "discoveryDetails.uuids: unknown key"), ("- a", "discoveryDetails: must be a YAML mapping")],
)
def test_details_it_does_not_take_are_invalid_naming_the_field(details: str, message: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        parse_details(details)
    assert info.value.message.startswith(message)


# -- health rules (pure) -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (xid(H200_UUID, 79), "XID 79 (critical error)"),
        (xid(H200_UUID, 48), "XID 48 (critical error)"),
        *[(xid(H200_UUID, n), None) for n in sorted(IGNORED_XIDS)],  # application errors, as NVIDIA ignores them
        (Event(H200_UUID, EVENT_DOUBLE_BIT_ECC), "double-bit ECC error"),
        (Event(H200_UUID, EVENT_SINGLE_BIT_ECC), None),
        (Event(H200_UUID, 0x4), None),  # a P-state change
    ],
)
def test_xid_critical_and_double_bit_ecc_events_make_a_gpu_unhealthy_and_nothing_else(
    event: Event, reason: str | None
) -> None:
    assert event_reason(event, XidPolicy()) == reason


def test_nvidias_ignored_xids_are_13_31_43_45_68_109() -> None:
    assert frozenset({13, 31, 43, 45, 68, 109}) == IGNORED_XIDS


def test_unhealthy_is_sticky_with_the_first_reason_and_events_of_other_gpus_change_nothing() -> None:
    health = {"GPU-a": Health(), "GPU-b": Health()}
    after = health_after(health, xid("GPU-a", 79), XidPolicy())
    assert after == {"GPU-a": Health(False, "XID 79 (critical error)"), "GPU-b": Health()}
    assert health_after(after, xid("GPU-a", 48), XidPolicy()) is None  # already Unhealthy: the first reason stays
    assert health_after(after, xid("GPU-z", 79), XidPolicy()) is None  # not a GPU of this node
    assert health_after(after, xid("GPU-a", 13), XidPolicy()) is None


def test_an_event_nvml_cannot_attribute_marks_every_gpu() -> None:
    health = {"GPU-a": Health(), "GPU-b": Health()}
    assert health_after(health, xid("", 79), XidPolicy()) == {
        "GPU-a": Health(False, "XID 79 (critical error)"),
        "GPU-b": Health(False, "XID 79 (critical error)"),
    }


xid_items = st.lists(st.integers(min_value=0, max_value=200), max_size=4)


@given(disabled=xid_items, enabled=xid_items, disable_all=st.booleans(), enable_all=st.booleans())
def test_the_xid_policy_follows_nvidias_variables(
    disabled: list[int], enabled: list[int], disable_all: bool, enable_all: bool
) -> None:
    environ = {
        "DP_DISABLE_HEALTHCHECKS": ",".join(["all"] if disable_all else [str(x) for x in disabled]),
        "DP_ENABLE_HEALTHCHECKS": ",".join(["all"] if enable_all else [f" {x} " for x in enabled]),
    }
    policy = xid_policy(environ)
    for number in range(201):
        if enable_all or number in enabled:
            expected = False
        elif disable_all:
            expected = True
        else:
            expected = number in IGNORED_XIDS or number in disabled
        assert policy.ignores(number) is expected, number
    assert policy.off is (disable_all and not enable_all and not enabled)


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("DP_DISABLE_HEALTHCHECKS", "13,abc", "DP_DISABLE_HEALTHCHECKS: 'abc' is neither an XID (a number) nor 'all'"),
        ("DP_ENABLE_HEALTHCHECKS", "-1", "DP_ENABLE_HEALTHCHECKS: '-1' is neither an XID (a number) nor 'all'"),
    ],
)
def test_a_malformed_xid_list_is_invalid_naming_the_variable(variable: str, value: str, message: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        xid_policy({variable: value})
    assert info.value.message == message


def test_xid_lists_take_case_spaces_and_blank_items() -> None:
    assert parse_xids(" 48, ,79 ", "V") == (False, frozenset({48, 79}))
    assert parse_xids("XIDS", "V") == (True, frozenset())


# -- the handler over the captured H200 -------------------------------------------------------------------------------


async def test_the_handler_reports_one_unshared_device_per_gpu_with_its_uuid_as_id(
    handler: GpuHandler, fake: FakeNvml
) -> None:
    stream = handler.discover("")
    assert await next_of(stream) == [Device(H200_UUID, H200_PROPERTIES, shared=False)]
    await stream.aclose()
    assert (fake.inits, fake.registered) == (1, {0: EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC})
    assert handler.watching


async def test_nvml_is_read_once_for_every_stream(handler: GpuHandler, fake: FakeNvml) -> None:
    first, second = handler.discover(""), handler.discover("")
    assert await next_of(first) == await next_of(second)
    await first.aclose()
    await second.aclose()
    assert fake.inits == 1
    assert fake.reads == 11  # every attribute, once


async def test_allocate_gets_the_device_nodes_present_and_nvidias_cdi_device(fake: FakeNvml, tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    for name in ("nvidia0", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset"):
        (tmp_path / "dev" / name).write_text("")
    (tmp_path / "var/run/cdi").mkdir(parents=True)
    (tmp_path / "var/run/cdi/nvidia.json").write_text(
        '{"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": [{"name": "0", "containerEdits": '
        '{"deviceNodes": [{"path": "/dev/nvidia0"}]}}]}'
    )
    gpus = GpuHandler(fake, root=tmp_path, wait_timeout=WAIT)
    try:
        [device] = await next_of(gpus.discover(""))
    finally:
        await gpus.close()
    assert device.device_specs == tuple(
        DeviceSpec(p, p, "rw")
        for p in ("/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset")
    )
    assert device.properties[CDI_DEVICES] == "nvidia.com/gpu=0"


async def test_bad_details_are_refused_before_nvml_is_touched(handler: GpuHandler, fake: FakeNvml) -> None:
    with pytest.raises(errors.Invalid, match=r"discoveryDetails\.gpus: unknown key"):
        await next_of(handler.discover("gpus: all"))
    assert fake.inits == 0


async def test_an_xid_makes_the_gpu_unhealthy_and_the_stream_resends_the_full_list(
    handler: GpuHandler, fake: FakeNvml
) -> None:
    stream = handler.discover("")
    await next_of(stream)
    fake.inject(xid(H200_UUID, 13))  # ignored, as NVIDIA ignores it
    fake.inject(Event(H200_UUID, EVENT_SINGLE_BIT_ECC))  # not registered
    fake.inject(xid(H200_UUID, 79))
    [device] = await next_of(stream)
    assert device.properties == {**H200_PROPERTIES, HEALTH: "Unhealthy", HEALTH_REASON: "XID 79 (critical error)"}
    await stream.aclose()


async def test_a_double_bit_ecc_error_makes_the_gpu_unhealthy(handler: GpuHandler, fake: FakeNvml) -> None:
    await handler.start()
    fake.inject(Event(H200_UUID, EVENT_DOUBLE_BIT_ECC))
    await until(handler, lambda: not handler.health[H200_UUID].healthy)
    assert handler.health == {H200_UUID: Health(False, "double-bit ECC error")}


async def test_recovery_rule_unhealthy_stays_until_a_reset_reads_nvml_afresh(tmp_path: Path) -> None:
    fake = FakeNvml(capture(), copies=2)
    first, second = fake.uuids
    gpus = GpuHandler(fake, root=tmp_path, wait_timeout=WAIT)
    try:
        stream = gpus.discover("")
        assert [d.properties[HEALTH] for d in await next_of(stream)] == ["Healthy", "Healthy"]
        fake.inject(xid(first, 79))
        assert [d.properties[HEALTH] for d in await next_of(stream)] == ["Unhealthy", "Healthy"]
        # more events, more time: NVML never says an XID is over, so nothing clears it (events arrive in order:
        # once the second GPU's shows, the first GPU's later events have been seen)
        fake.inject(xid(first, 48))
        fake.inject(Event(first, EVENT_DOUBLE_BIT_ECC))
        fake.inject(xid(second, 13))
        fake.inject(xid(second, 94))
        await next_of(stream)
        assert gpus.health == {
            first: Health(False, "XID 79 (critical error)"),
            second: Health(False, "XID 94 (critical error)"),
        }
        # the operator's action: reset (SIGHUP to `devplace handler nvml`, or a restart): a fresh read, Healthy again
        await gpus.reset()
        assert [d.properties[HEALTH] for d in await next_of(stream)] == ["Healthy", "Healthy"]
        assert (fake.inits, fake.shutdowns) == (2, 1)
        assert gpus.watching
        await stream.aclose()
    finally:
        await gpus.close()


async def test_a_failing_event_wait_marks_every_gpu_and_backs_off_instead_of_spinning(tmp_path: Path) -> None:
    fake = FakeNvml(capture(), copies=2)
    gpus = GpuHandler(fake, root=tmp_path, wait_timeout=30.0)  # the back-off after a failure is one wait_timeout
    try:
        await gpus.start()
        fake.fail_waits(1000)
        await until(gpus, lambda: not any(h.healthy for h in gpus.health.values()))
        assert {h.reason for h in gpus.health.values()} == {"NVML event wait failed: NVML event wait: Unknown Error"}
        for _ in range(100):
            await asyncio.sleep(0)
        assert fake.waits <= 2  # the first wait (which may have been waiting already) and the failed one, no more
    finally:
        fake.fail_waits(0)
        await asyncio.wait_for(gpus.close(), 10)  # the watcher leaves its back-off at once when told to stop


async def test_a_gpu_whose_events_cannot_be_registered_is_unhealthy_from_the_start(tmp_path: Path) -> None:
    class Unwatchable(FakeNvml):
        def register_events(self, index: int, mask: int) -> None:
            raise errors.Unavailable("NVML events of GPU 0: Insufficient Permissions")

    gpus = GpuHandler(Unwatchable(capture()), root=tmp_path, wait_timeout=WAIT)
    try:
        [device] = await next_of(gpus.discover(""))
    finally:
        await gpus.close()
    assert device.properties[HEALTH] == "Unhealthy"
    assert device.properties[HEALTH_REASON] == (
        "health events cannot be watched: NVML events of GPU 0: Insufficient Permissions"
    )
    assert not gpus.watching


async def test_a_gpu_without_health_events_is_reported_healthy_and_not_watched(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = capture()
    data["devices"][0]["supported_event_types"] = EVENT_SINGLE_BIT_ECC
    gpus = GpuHandler(FakeNvml(data), root=tmp_path, wait_timeout=WAIT)
    with caplog.at_level(logging.WARNING):
        [device] = await next_of(gpus.discover(""))
    await gpus.close()
    assert device.properties[HEALTH] == "Healthy"
    assert not gpus.watching
    assert f"nvml: GPU {H200_UUID} delivers no XID or ECC events: its health is not watched" in caplog.messages


async def test_health_checks_turned_off_watch_nothing(fake: FakeNvml, tmp_path: Path) -> None:
    gpus = GpuHandler(fake, root=tmp_path, policy=xid_policy({"DP_DISABLE_HEALTHCHECKS": "all"}), wait_timeout=WAIT)
    await gpus.start()
    assert (gpus.watching, fake.registered, fake.waits) == (False, {}, 0)
    await gpus.close()


@pytest.mark.parametrize(
    ("nvml", "line"),
    [
        (
            FakeNvml(capture(), library=False),
            "nvml: reporting no GPUs: libnvidia-ml.so.1 not found: no NVIDIA driver on this node "
            "(or its libraries are not mounted here)",
        ),
        (
            FakeNvml({"driver": "580.159.04", "cuda_driver": 13000, "devices": []}),
            "nvml: reporting no GPUs: NVML (driver 580.159.4) sees no GPU on this node",
        ),
    ],
    ids=["no library", "no GPU"],
)
async def test_a_node_without_nvml_or_gpus_reports_none_in_one_log_line_and_never_retries(
    nvml: FakeNvml, line: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    gpus = GpuHandler(nvml, root=tmp_path, wait_timeout=WAIT)
    with caplog.at_level(logging.INFO, logger="devplace.discovery._gpus"):
        first, second = gpus.discover(""), gpus.discover("")
        assert await next_of(first) == []
        assert await next_of(second) == []
        await first.aclose()
        await second.aclose()
    await gpus.close()
    assert caplog.messages == [line]
    assert (gpus.watching, nvml.waits) == (False, 0)


async def test_a_gpu_that_cannot_be_read_is_left_out_with_a_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fake = FakeNvml(capture(), copies=2)
    fake.devices[1]["uuid"] = {"error": "NVMLError_NotSupported: Not Supported"}
    gpus = GpuHandler(fake, root=tmp_path, wait_timeout=WAIT)
    with caplog.at_level(logging.WARNING):
        devices = await next_of(gpus.discover(""))
    await gpus.close()
    assert [d.id for d in devices] == [H200_UUID]
    assert "nvml: leaving GPU 1 out: GPU 1: NVML does not report its UUID" in caplog.messages


# -- the same handler over the real library, where a GPU is present --------------------------------------------------


@pytest.mark.skipif(REAL_ABSENT is not None, reason=str(REAL_ABSENT))
async def test_the_real_library_gives_one_healthy_device_per_gpu_with_dra_typed_properties(tmp_path: Path) -> None:
    gpus = GpuHandler(Pynvml(), wait_timeout=0.2)
    try:
        devices = await next_of(gpus.discover(""), 30)
    finally:
        await gpus.close()
    assert devices
    for device in devices:
        props: Mapping[str, str] = device.properties
        assert device.id == props["uuid"] == props["NVIDIA_VISIBLE_DEVICES"]
        assert device.id.startswith("GPU-")
        assert (device.shared, props["type"], props[HEALTH]) == (False, "gpu", "Healthy")
        assert Quantity(props["memory"]) > Quantity("1Gi")
        assert semver(props["cudaComputeCapability"]) == props["cudaComputeCapability"]
        assert any(s.host_path == "/dev/nvidiactl" for s in device.device_specs)
