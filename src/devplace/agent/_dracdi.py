"""CDI spec files for devices prepared through DRA (the Container Device Interface, cdiVersion 0.5.0).

The kubelet hands a container runtime the fully qualified CDI ids NodePrepareResources answered (`vendor/class=name`);
the runtime finds them in the spec files under `/var/run/cdi` (the dynamic directory, read before `/etc/cdi`) and
applies their `containerEdits`. So a prepared device is one spec file, written before the answer and removed on
unprepare:

- kind `devplace.io/<configuration>` (the class is the Instance's Configuration; a name starting with a digit gets a
  `c` before it, since a CDI class starts with a letter), device name `<claim uid>-<device>`, so the same device in
  two claims, or two devices of one claim, never share a name;
- file `devplace.io-<class>_<claim uid>_<device>.json`: the claim UID in the name finds every file of a claim
  (`claim_files`) without reading any, also after an agent restart;
- `containerEdits` are what Allocate gives a container of the same device today (`deviceplugins.container_response`):
  the env vars of its brokerProperties, its device nodes (`deviceNodes`, by path: the runtime reads type, major and
  minor from the host's node) and its mounts (bind, `ro` when read-only). No `annotations`: a device's annotations
  need cdiVersion 0.6.0, which podman 4.3's CDI reader refuses as an unknown field (the whole file is then skipped).

Writes are atomic and durable (`files.write_atomically`): a temporary file in the same directory, fsync, rename over the
target, fsync of the directory, so a runtime reading the directory sees the old file or the new one, never half of
one. Version 0.5.0 is the least one these fields need that Debian's podman 4.3 reads.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from devplace.api import DRIVER
from devplace.files import write_atomically

CDI_VERSION = "0.5.0"
DEFAULT_CDI_DIR = Path("/var/run/cdi")
"""Where specs go: the dynamic CDI directory every CDI-aware runtime reads."""

_CLASS = re.compile(r"[^A-Za-z0-9_.-]")


def cdi_class(configuration: str) -> str:
    """The CDI class of a Configuration's devices: its name, with a leading letter guaranteed."""
    name = _CLASS.sub("-", configuration) or "device"
    return name if name[0].isalpha() else f"c{name}"


def cdi_kind(configuration: str) -> str:
    return f"{DRIVER}/{cdi_class(configuration)}"


def cdi_device_name(claim_uid: str, device: str) -> str:
    return f"{claim_uid}-{device}"


def cdi_id(configuration: str, claim_uid: str, device: str) -> str:
    """The fully qualified CDI id of a prepared device (`devplace.io/<class>=<claim uid>-<device>`)."""
    return f"{cdi_kind(configuration)}={cdi_device_name(claim_uid, device)}"


def spec_file_name(configuration: str, claim_uid: str, device: str) -> str:
    return f"{DRIVER}-{cdi_class(configuration)}_{claim_uid}_{device}.json"


@dataclass(frozen=True)
class Edits:
    """What a container gets for one device (Allocate's answer, in CDI's terms)."""

    env: Mapping[str, str]
    device_nodes: Sequence[tuple[str, str, str]]
    """(container path, host path, permissions)."""
    mounts: Sequence[tuple[str, str, bool]]
    """(container path, host path, read-only)."""


def spec(configuration: str, claim_uid: str, device: str, edits: Edits) -> dict[str, Any]:
    """The CDI spec of one prepared device; pure."""
    container_edits: dict[str, Any] = {"env": [f"{k}={v}" for k, v in sorted(edits.env.items())]}
    if edits.device_nodes:
        container_edits["deviceNodes"] = [
            {"path": path, "hostPath": host, **({"permissions": perms} if perms else {})}
            for path, host, perms in edits.device_nodes
        ]
    if edits.mounts:
        container_edits["mounts"] = [
            {
                "hostPath": host,
                "containerPath": path,
                "type": "bind",
                "options": ["ro" if read_only else "rw", "rbind", "nosuid", "nodev"],
            }
            for path, host, read_only in edits.mounts
        ]
    entry: dict[str, Any] = {"name": cdi_device_name(claim_uid, device), "containerEdits": container_edits}
    return {"cdiVersion": CDI_VERSION, "kind": cdi_kind(configuration), "devices": [entry]}


def write_spec(directory: Path, configuration: str, claim_uid: str, device: str, edits: Edits) -> Path:
    """Write the spec of one prepared device; returns its path."""
    path = directory / spec_file_name(configuration, claim_uid, device)
    directory.mkdir(parents=True, exist_ok=True)
    write_atomically(path, json.dumps(spec(configuration, claim_uid, device, edits), indent=1), mode=0o644, sync="all")
    return path


def claim_files(directory: Path, claim_uid: str) -> list[Path]:
    """Every spec file written for a claim (by name)."""
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob(f"{DRIVER}-*_{claim_uid}_*.json") if p.is_file())


def remove(paths: Iterable[Path]) -> None:
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
