"""`devplace crds --device-classes`: a DRA DeviceClass per Configuration, selecting the devices the devplace.io
driver publishes for it; a bad file is refused naming it, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from devplace.api import DRIVER, DeviceInput, SliceSupport, compile_selector, instance_devices
from devplace.cli._app import app as cli_app

CAMS = """\
apiVersion: akri.sh/v0
kind: Configuration
metadata: {name: cams}
spec:
  discoveryHandler: {name: onvif, discoveryDetails: ""}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated}
data: {a: b}
---
apiVersion: devplace.io/v1alpha1
kind: Configuration
metadata: {name: usbs, namespace: lab}
spec:
  discoveryHandler: {name: udev, discoveryDetails: ""}
  capacity: 2
"""


def instance(configuration: str, namespace: str) -> dict[str, object]:
    return {
        "metadata": {"name": f"{configuration}-0a0b0c", "namespace": namespace},
        "spec": {"configurationName": configuration, "nodes": ["node-a"], "capacity": 2},
    }


def test_a_device_class_per_configuration_follows_the_crds_and_selects_its_devices(tmp_path: Path) -> None:
    path = tmp_path / "cams.yaml"
    path.write_text(CAMS)
    printed = CliRunner().invoke(cli_app, ["crds", "--device-classes", str(path)])
    assert printed.exit_code == 0, printed.output
    docs = [d for d in yaml.safe_load_all(printed.stdout) if d]
    assert {d["kind"] for d in docs[:-2]} == {"CustomResourceDefinition"}
    classes = docs[-2:]
    assert [(c["apiVersion"], c["kind"], c["metadata"]["name"]) for c in classes] == [
        ("resource.k8s.io/v1", "DeviceClass", "cams.akri.sh"),
        ("resource.k8s.io/v1", "DeviceClass", "usbs.devplace.io"),
    ]
    support = SliceSupport(consumable=True, taints=True)
    [cams_selector] = [compile_selector(s["cel"]["expression"]) for s in classes[0]["spec"]["selectors"]]
    [cams] = instance_devices(instance("cams", "default"), support=support)
    [usbs] = instance_devices(instance("usbs", "lab"), support=support)
    assert cams_selector.matches(DeviceInput(DRIVER, cams))
    assert not cams_selector.matches(DeviceInput(DRIVER, usbs))


def test_with_an_output_directory_the_classes_are_a_file_beside_the_crds(tmp_path: Path) -> None:
    path = tmp_path / "cams.yaml"
    path.write_text(CAMS)
    written = CliRunner().invoke(cli_app, ["crds", "-o", str(tmp_path / "out"), "--device-classes", str(path)])
    assert written.exit_code == 0, written.output
    names = [d["metadata"]["name"] for d in yaml.safe_load_all((tmp_path / "out" / "deviceclasses.yaml").read_text())]
    assert names == ["cams.akri.sh", "usbs.devplace.io"]
    kustomization = yaml.safe_load((tmp_path / "out" / "kustomization.yaml").read_text())
    assert "deviceclasses.yaml" not in kustomization["resources"]


def test_a_bad_configuration_is_refused_naming_the_file_and_document_and_nothing_is_written(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        f"{CAMS}---\napiVersion: akri.sh/v0\nkind: Configuration\nmetadata: {{name: x}}\nspec: {{capacity: -1}}\n"
    )
    result = CliRunner().invoke(cli_app, ["crds", "-o", str(tmp_path / "out"), "--device-classes", str(path)])
    assert result.exit_code != 0
    assert f"--device-classes {path}, document 4" in result.output
    assert not (tmp_path / "out").exists()
    missing = CliRunner().invoke(cli_app, ["crds", "--device-classes", str(tmp_path / "nope.yaml")])
    assert missing.exit_code != 0
    assert "No such file" in missing.output
