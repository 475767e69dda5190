"""Which paths serve a Configuration's devices: its device plugins (Instance- and Configuration-level), DRA
(ResourceSlices and the kubelet's DRA plugin), or both (DESIGN.md section 6a, issue #26 item 2).

Why a choice: devplace's scheduler counts device-plugin slots when it allocates claims and DRA-held slots when it
places device-plugin requests, so both paths at once are safe under it. A stock kube-scheduler allocating claims reads
only ResourceSlices and cannot see device-plugin slots, so serving one device through both there over-commits it.
A Configuration therefore chooses, by the annotation `devplace.io/device-paths` (an annotation keeps Akri's CRD
valid):
- `device-plugins`: its Instances are in no ResourceSlice (the agent's local pool and the controller's shared pools
  leave them out), so nothing allocates them through DRA;
- `dra`: no Instance- or Configuration-level device plugin is served for it, so the kubelet advertises none of its
  extended resources;
- `both`: both paths, each seeing the other's slots in `deviceUsage` (safe only under devplace's scheduler).
A Configuration without the annotation takes the part's default (`--device-paths` of `devplace agent` and
`devplace controller`; `both` in the library and the simulation). A change converges without a restart; a slot
already held through the path a change turns off stays held until it is released as usual.

Apply refuses any other value (`device_paths_problems`, naming `metadata.annotations["devplace.io/device-paths"]`);
a stored value that breaks the rule (written through a store that does not validate annotations, a real cluster's
CRD) is read as the part's default (`device_paths`), so a part never stops on it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Literal, get_args

from devplace import errors

DEVICE_PATHS_ANNOTATION = "devplace.io/device-paths"
DevicePaths = Literal["device-plugins", "dra", "both"]
DEVICE_PATHS: tuple[DevicePaths, ...] = get_args(DevicePaths)
_FIELD = f'metadata.annotations["{DEVICE_PATHS_ANNOTATION}"]'


def device_paths(configuration: Mapping[str, Any] | None, default: DevicePaths) -> DevicePaths:
    """The paths a Configuration (a wire dict; None: unknown) is served through: its annotation, else `default`."""
    annotations = ((configuration or {}).get("metadata") or {}).get("annotations") or {}
    value = annotations.get(DEVICE_PATHS_ANNOTATION) if isinstance(annotations, Mapping) else None
    for known in DEVICE_PATHS:
        if value == known:
            return known
    return default


def device_paths_problems(annotations: Mapping[str, str]) -> Iterator[errors.FieldError]:
    """The annotation's value when it is not one of `DEVICE_PATHS` (module docstring)."""
    value = annotations.get(DEVICE_PATHS_ANNOTATION)
    if value is not None and value not in DEVICE_PATHS:
        yield errors.FieldError(_FIELD, f"{value!r} is not one of {', '.join(DEVICE_PATHS)}")
