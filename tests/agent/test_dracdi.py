"""CDI spec files of prepared devices: names, contents, atomic writes, cleanup by claim UID."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devplace.agent import _dracdi as cdi

UID = "7d3c9a52-1f6e-4c11-9a0b-2b1f3c4d5e6f"
EDITS = cdi.Edits(
    env={"B": "2", "A": "1"},
    device_nodes=[("/dev/video0", "/dev/video3", "rw")],
    mounts=[("/etc/cam", "/var/lib/cam", True)],
)


@pytest.mark.parametrize(
    ("configuration", "kind"),
    [("cams", "devplace.io/cams"), ("3d-scanners", "devplace.io/c3d-scanners"), ("a.b", "devplace.io/a.b")],
)
def test_the_cdi_kind_is_the_driver_and_the_configuration_starting_with_a_letter(configuration: str, kind: str) -> None:
    assert cdi.cdi_kind(configuration) == kind
    assert cdi.cdi_id(configuration, UID, "cams-8120fe") == f"{kind}={UID}-cams-8120fe"


def test_a_spec_carries_env_device_nodes_and_mounts_in_cdi_0_5_0_fields() -> None:
    assert cdi.spec("cams", UID, "cams-8120fe", EDITS) == {
        "cdiVersion": "0.5.0",
        "kind": "devplace.io/cams",
        "devices": [
            {
                "name": f"{UID}-cams-8120fe",
                "containerEdits": {
                    "env": ["A=1", "B=2"],
                    "deviceNodes": [{"path": "/dev/video0", "hostPath": "/dev/video3", "permissions": "rw"}],
                    "mounts": [
                        {
                            "hostPath": "/var/lib/cam",
                            "containerPath": "/etc/cam",
                            "type": "bind",
                            "options": ["ro", "rbind", "nosuid", "nodev"],
                        }
                    ],
                },
            }
        ],
    }


def test_write_spec_replaces_atomically_leaves_no_temporary_file_and_is_found_by_claim_uid(tmp_path: Path) -> None:
    first = cdi.write_spec(tmp_path, "cams", UID, "cams-8120fe", EDITS)
    again = cdi.write_spec(tmp_path, "cams", UID, "cams-8120fe", cdi.Edits({"A": "3"}, [], []))
    other = cdi.write_spec(tmp_path, "cams", "0" + UID[1:], "cams-8120fe", EDITS)
    assert first == again
    assert first.name == f"devplace.io-cams_{UID}_cams-8120fe.json"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([first.name, other.name])
    assert json.loads(first.read_text())["devices"][0]["containerEdits"] == {"env": ["A=3"]}
    assert oct(first.stat().st_mode & 0o777) == "0o644"
    assert cdi.claim_files(tmp_path, UID) == [first]
    cdi.remove(cdi.claim_files(tmp_path, UID))
    cdi.remove([first])  # gone already: fine
    assert [p.name for p in tmp_path.iterdir()] == [other.name]
