"""The NVML boundary: the fake built from the captured H200 answers as the capture says, NotSupported included, and
the same checks run against the real library where a GPU is present (skipped elsewhere, saying why).

The capture is `fixtures/h200-nvml.json`, a copy of `shared/reference/gpu/nvml.json` (made by its `nvml_probe.py`).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devplace import errors
from devplace.discovery import Event, FakeNvml, Nvml, Pynvml
from devplace.discovery._nvml import (
    ATTRIBUTES,
    EVENT_DOUBLE_BIT_ECC,
    EVENT_SINGLE_BIT_ECC,
    EVENT_XID_CRITICAL,
    NOT_SUPPORTED,
)

CAPTURE = Path(__file__).parent / "fixtures" / "h200-nvml.json"
H200_UUID = "GPU-fe43fcbd-8f29-4b15-1b77-585704c64e32"


def capture() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(CAPTURE.read_text())
    return loaded


def real_gpu_absent() -> str | None:
    """Why the real-library variant is skipped here, or None when this machine has a GPU NVML can see."""
    nvml = Pynvml()
    try:
        nvml.init()
    except errors.Unavailable as e:
        return f"no NVIDIA GPU here: {e.message}"
    try:
        return None if nvml.device_count() > 0 else "NVML sees no GPU on this machine"
    finally:
        nvml.shutdown()


REAL_ABSENT = real_gpu_absent()


@pytest.fixture(params=["fake", "real"])
def nvml(request: pytest.FixtureRequest) -> Iterator[Nvml]:
    """The captured H200 (fake) or this machine's NVML (real; skipped without a GPU)."""
    if request.param == "real":
        if REAL_ABSENT is not None:
            pytest.skip(REAL_ABSENT)
        library: Nvml = Pynvml()
    else:
        library = FakeNvml(capture())
    library.init()
    try:
        yield library
    finally:
        library.release_events()
        library.shutdown()


def test_every_attribute_the_handler_reads_answers_in_the_captures_shape_or_not_supported(nvml: Nvml) -> None:
    assert nvml.device_count() >= 1
    values = {name: nvml.attribute(0, name) for name in ATTRIBUTES}
    assert isinstance(values["name"], str)
    assert values["name"]
    assert values["uuid"].startswith("GPU-")
    assert isinstance(values["brand"], int)
    assert isinstance(values["architecture"], int)
    major, minor = values["cuda_compute_capability"]
    assert (isinstance(major, int), isinstance(minor, int)) == (True, True)
    assert set(values["memory"]) == {"total", "free", "used"}
    assert values["memory"]["total"] > 0
    assert {"busId", "domain", "bus", "device"} <= set(values["pci"])
    assert values["numa_node"] is NOT_SUPPORTED or isinstance(values["numa_node"], int)
    assert isinstance(values["minor_number"], int)
    assert len(values["mig_mode"]) == 2
    assert values["supported_event_types"] & EVENT_XID_CRITICAL
    assert isinstance(nvml.system("driver"), str)
    assert isinstance(nvml.system("cuda_driver"), int)


def test_waiting_with_no_event_pending_times_out_with_none_the_healthy_answer(nvml: Nvml) -> None:
    nvml.register_events(0, EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC)
    assert nvml.wait(100) is None


def test_unknown_attribute_names_are_invalid_naming_the_attribute(nvml: Nvml) -> None:
    with pytest.raises(errors.Invalid) as info:
        nvml.attribute(0, "colour")
    assert info.value.message.startswith("name: unknown GPU attribute 'colour'")


# -- the fake, exactly as captured ------------------------------------------------------------------------------------


def test_the_fake_answers_every_attribute_exactly_as_the_h200_did() -> None:
    fake = FakeNvml.from_file(CAPTURE)
    fake.init()
    assert fake.device_count() == 1
    assert (fake.system("driver"), fake.system("cuda_driver")) == ("580.159.04", 13000)
    assert {name: fake.attribute(0, name) for name in ATTRIBUTES} == {
        "name": "NVIDIA H200",
        "uuid": H200_UUID,
        "brand": 14,
        "architecture": 9,
        "cuda_compute_capability": [9, 0],
        "memory": {"total": 150754820096, "free": 150109880320, "used": 644939776},
        "pci": {
            "busIdLegacy": "0000:00:06.0",
            "domain": 0,
            "bus": 0,
            "device": 6,
            "pciDeviceId": 590680286,
            "pciSubSystemId": 415174878,
            "busId": "00000000:00:06.0",
        },
        "numa_node": NOT_SUPPORTED,  # the capture's NVMLError_NotSupported
        "minor_number": 0,
        "mig_mode": [0, 0],
        "supported_event_types": 65439,
    }
    assert fake.reads == len(ATTRIBUTES)


def test_a_captured_error_other_than_not_supported_is_unavailable_with_nvmls_message() -> None:
    data = capture()
    data["devices"][0]["memory"] = {"error": "NVMLError_GpuIsLost: GPU is lost"}
    fake = FakeNvml(data)
    with pytest.raises(errors.Unavailable) as info:
        fake.attribute(0, "memory")
    assert info.value.message == "NVML memory of GPU 0: NVMLError_GpuIsLost: GPU is lost"


def test_copies_are_further_gpus_with_their_own_index_minor_uuid_and_bus() -> None:
    fake = FakeNvml(capture(), copies=3)
    assert fake.uuids == [
        H200_UUID,
        "GPU-fe43fcbd-8f29-4b15-1b77-000000000001",
        "GPU-fe43fcbd-8f29-4b15-1b77-000000000002",
    ]
    assert [fake.attribute(i, "minor_number") for i in range(3)] == [0, 1, 2]
    assert [fake.attribute(i, "pci")["busId"] for i in range(3)] == [
        "00000000:00:06.0",
        "00000000:01:06.0",
        "00000000:02:06.0",
    ]


def test_a_fake_without_the_library_fails_init_as_a_node_without_the_driver_does() -> None:
    with pytest.raises(errors.Unavailable) as info:
        FakeNvml(capture(), library=False).init()
    assert info.value.message.startswith("libnvidia-ml.so.1 not found")


def test_the_fake_delivers_injected_events_only_of_registered_types_in_order() -> None:
    fake = FakeNvml(capture())
    fake.register_events(0, EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC)
    assert fake.registered == {0: EVENT_XID_CRITICAL | EVENT_DOUBLE_BIT_ECC}
    fake.inject(Event(H200_UUID, EVENT_SINGLE_BIT_ECC))  # not registered: dropped
    fake.inject(Event("GPU-other", EVENT_XID_CRITICAL, 79))  # not a GPU of this machine: dropped
    fake.inject(Event(H200_UUID, EVENT_XID_CRITICAL, 79))
    fake.inject(Event(H200_UUID, EVENT_DOUBLE_BIT_ECC))
    assert fake.wait(0) == Event(H200_UUID, EVENT_XID_CRITICAL, 79)
    assert fake.wait(0) == Event(H200_UUID, EVENT_DOUBLE_BIT_ECC)
    assert fake.wait(0) is None
    fake.fail_waits(1)
    with pytest.raises(errors.Unavailable, match="NVML event wait: Unknown Error"):
        fake.wait(0)
    assert fake.wait(0) is None
    assert fake.waits == 5


def test_a_bad_capture_file_is_invalid_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "nvml.json"
    path.write_text('{"driver": "1"}')
    with pytest.raises(errors.Invalid) as info:
        FakeNvml.from_file(path)
    assert info.value.message == f"capture: {path}: not an NVML capture (no devices list)"


# -- the real library where it is missing ------------------------------------------------------------------------------


@pytest.mark.skipif(REAL_ABSENT is None, reason="this machine has a GPU: the library is not missing")
def test_the_real_library_on_a_node_without_the_driver_is_unavailable_saying_why() -> None:
    with pytest.raises(errors.Unavailable) as info:
        Pynvml().init()
    assert info.value.message.startswith(("libnvidia-ml.so.1 not found", "the NVIDIA kernel driver", "nvmlInit"))


def test_without_the_bindings_installed_the_real_library_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.import_module

    def without_pynvml(name: str, *args: Any) -> Any:
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real(name, *args)

    monkeypatch.setattr(importlib, "import_module", without_pynvml)
    with pytest.raises(errors.Unavailable) as info:
        Pynvml().init()
    assert info.value.message == "the NVML bindings (nvidia-ml-py, module pynvml) are not installed"
