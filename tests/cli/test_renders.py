"""`devplace render --akri-values`: the Configurations Akri's Helm chart installs, against the hand-worked fixtures.

tests/fixtures/akri/*.yaml hold, per case, the `--set` values (`# set:` lines) and the Configurations Akri's templates
write for them, each field commented with its template line (the fixtures' README). discoveryDetails is compared as
the YAML it holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from devplace import errors
from devplace.api import Configuration
from devplace.cli import app
from devplace.cli._akrivalues import DEFAULTS, agent_patch, controller_patch, pod_monitors
from devplace.cli._helmvalues import apply_sets, merge
from devplace.cli._renders import rendered

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "akri"
CASES = sorted(path.stem for path in FIXTURES.glob("*.yaml"))


def case(name: str) -> tuple[list[str], list[dict[str, Any]]]:
    text = (FIXTURES / f"{name}.yaml").read_text()
    sets = [line.removeprefix("# set: ") for line in text.splitlines() if line.startswith("# set: ")]
    return sets, [doc for doc in yaml.safe_load_all(text) if doc is not None]


def comparable(document: dict[str, Any]) -> dict[str, Any]:
    handler = document["spec"]["discoveryHandler"]
    details = yaml.safe_load(handler["discoveryDetails"])
    return {**document, "spec": {**document["spec"], "discoveryHandler": {**handler, "discoveryDetails": details}}}


def test_every_handler_and_the_defaults_have_a_fixture() -> None:
    assert CASES == ["debugecho-job", "defaults", "onvif", "opcua", "udev"]


@pytest.mark.parametrize("name", CASES)
def test_devplace_renders_the_configurations_akri_s_templates_write(name: str) -> None:
    sets, expected = case(name)
    found = [doc for doc in rendered([], sets, []) if doc["kind"] == "Configuration"]
    assert [comparable(doc) for doc in found] == [comparable(doc) for doc in expected]


@pytest.mark.parametrize("name", CASES)
def test_the_rendered_configurations_are_valid_devplace_configurations(name: str) -> None:
    sets, _ = case(name)
    for document in rendered([], sets, []):
        if document["kind"] == "Configuration":
            assert Configuration.from_obj(document, strict=True).name == document["metadata"]["name"]


def test_a_values_file_in_akri_s_shape_renders_as_its_sets_do(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text(
        "udev:\n  configuration:\n    enabled: true\n    discoveryDetails:\n"
        "      udevRules: ['KERNEL==\"video[0-9]*\"']\n    brokerPod:\n"
        "      image: {repository: ghcr.io/project-akri/akri/udev-video-broker}\n"
        "webhookConfiguration: {enabled: true}\n"  # a key no template devplace follows reads: ignored, as by Helm
    )
    sets, expected = case("udev")
    assert rendered([values], [], []) == rendered([], sets, [])
    assert [d for d in rendered([values], [], []) if d["kind"] == "Configuration"] != []
    assert comparable(rendered([values], [], [])[0]) == comparable(expected[0])


def test_set_overrides_the_values_file_and_set_string_keeps_strings(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("debugEcho:\n  configuration:\n    enabled: true\n    capacity: 5\n")
    [config, *_] = rendered([values], ["debugEcho.configuration.capacity=3"], ["debugEcho.configuration.name=007"])
    assert (config["spec"]["capacity"], config["metadata"]["name"]) == (3, "007")


def test_udev_without_a_rule_fails_with_the_chart_s_message() -> None:
    with pytest.raises(errors.Invalid) as refused:
        rendered([], ["udev.configuration.enabled=true"], [])
    assert refused.value.message.startswith(
        "udev.configuration.discoveryDetails.udevRules: Please set at least one udev rule with `--set"
    )


def test_a_configuration_devplace_refuses_is_an_error_naming_it() -> None:
    with pytest.raises(errors.Invalid) as refused:
        rendered([], ["udev.configuration.enabled=true", "udev.configuration.discoveryDetails.udevRules[0]=bogus"], [])
    assert refused.value.message.startswith("Configuration akri-udev: spec.discoveryHandler.discoveryDetails: ")


def values(*sets: str) -> dict[str, Any]:
    return merge(DEFAULTS, apply_sets({}, list(sets)))


def test_the_chart_defaults_keep_devplace_s_agent_and_controller_as_they_are_but_for_akri_s_placement() -> None:
    assert agent_patch(values()) == {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "devplace-agent", "namespace": "devplace"},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "containers": [{"name": "agent"}],
                    "volumes": [
                        {"name": "discovery-handlers", "hostPath": {"path": "/var/lib/akri"}},
                        {"name": "device-plugins", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}},
                    ],
                }
            }
        },
    }
    controller = controller_patch(values())["spec"]["template"]["spec"]
    assert controller == {
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "containers": [{"name": "controller"}],
        "tolerations": [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}],
    }
    assert pod_monitors(values()) == []


def test_agent_and_controller_values_adjust_devplace_s_manifests() -> None:
    found = values(
        "agent.resources.memoryLimit=1Gi",
        "agent.allowDebugEcho=true",
        "debugEcho.configuration.shared=false",
        "agent.host.udev=/run/udev",
        "agent.nodeSelectors.gpu=true",
        "controller.onlyOnControlPlane=true",
        "controller.allowOnControlPlane=false",
        "controller.linuxOnly=false",
        "imagePullSecrets[0].name=regcred",
    )
    agent = agent_patch(found)["spec"]["template"]["spec"]
    assert agent["containers"] == [
        {
            "name": "agent",
            "resources": {"limits": {"memory": "1Gi"}},
            "env": [
                {"name": "ENABLE_DEBUG_ECHO", "value": "1"},
                {"name": "DEBUG_ECHO_INSTANCES_SHARED", "value": "false"},
            ],
            "volumeMounts": [{"name": "udev", "mountPath": "/run/udev", "readOnly": True}],
        }
    ]
    assert agent["nodeSelector"] == {"kubernetes.io/os": "linux", "gpu": "true"}
    assert agent["volumes"][-1] == {"name": "udev", "hostPath": {"path": "/run/udev"}}
    assert agent["imagePullSecrets"] == [{"name": "regcred"}]
    controller = controller_patch(found)["spec"]["template"]["spec"]
    assert controller["nodeSelector"] == {"kubernetes.io/os": None, "node-role.kubernetes.io/master": ""}
    assert "tolerations" not in controller


def test_disabling_a_part_deletes_it() -> None:
    assert agent_patch(values("agent.enabled=false"))["$patch"] == "delete"
    assert controller_patch(values("controller.enabled=false"))["$patch"] == "delete"


def test_prometheus_adds_akri_s_pod_monitors_and_another_port_moves_the_metrics_endpoint() -> None:
    assert agent_patch(values("prometheus.enabled=true")) == agent_patch(values())  # devplace serves /metrics anyway
    found = values("prometheus.enabled=true", "prometheus.port=9090")
    container = agent_patch(found)["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "DEVPLACE_METRICS_PORT", "value": "9090"}]
    assert container["ports"] == [{"$patch": "replace"}, {"name": "metrics", "containerPort": 9090}]
    monitors = pod_monitors(found)
    assert [m["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] for m in monitors] == [
        "devplace-agent",
        "devplace-controller",
    ]
    assert monitors[0]["spec"]["podMetricsEndpoints"] == [{"port": "metrics", "path": "/metrics"}]


# A strategic merge as kubectl and kustomize do it, for the fields the patches touch (their patchMergeKeys).
MERGE_KEYS = {"containers": "name", "volumes": "name", "env": "name", "volumeMounts": "mountPath",
              "ports": "containerPort", "imagePullSecrets": "name"}  # fmt: skip


def strategic_merge(base: Any, patch: Any, field: str = "") -> Any:
    if isinstance(patch, dict) and isinstance(base, dict):
        out = dict(base)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = strategic_merge(base.get(key), value, key)
        return out
    if isinstance(patch, list) and field in MERGE_KEYS and isinstance(base, list):
        if {"$patch": "replace"} in patch:
            return [item for item in patch if item != {"$patch": "replace"}]
        key, out = MERGE_KEYS[field], list(base)
        for item in patch:
            at = [i for i, old in enumerate(out) if old.get(key) == item.get(key)]
            if at:
                out[at[0]] = strategic_merge(out[at[0]], item)
            else:
                out.append(item)
        return out
    return patch


@pytest.mark.parametrize(
    "sets",
    [
        [],
        ["agent.resources.memoryLimit=1Gi", "agent.allowDebugEcho=true", "agent.host.udev=/run/udev",
         "agent.host.discoveryHandlers=/opt/akri", "agent.nodeSelectors.gpu=true", "controller.linuxOnly=false",
         "controller.onlyOnControlPlane=true", "controller.securityContext.runAsUser=4242", "prometheus.port=9090",
         "imagePullSecrets[0].name=regcred"],
    ],
    ids=["defaults", "tuned"],
)  # fmt: skip
def test_the_patches_applied_to_devplace_s_manifests_give_valid_kubernetes_objects(sets: list[str]) -> None:
    deploy = Path(__file__).resolve().parents[2] / "deploy" / "kubernetes"
    found = values(*sets)
    for patch, manifest in [(agent_patch(found), "agent.yaml"), (controller_patch(found), "controller.yaml")]:
        [base] = [d for d in yaml.safe_load_all((deploy / manifest).read_text()) if d and d["kind"] == patch["kind"]]
        assert base["metadata"] == {**base["metadata"], **patch["metadata"]}  # the patch names devplace's object
        merged = strategic_merge(base, patch)
        kubernetes_validate.validate(merged, "1.32.0", strict=True)
        [container] = [
            c for c in merged["spec"]["template"]["spec"]["containers"] if c["name"] in ("agent", "controller")
        ]
        assert container["image"] == base["spec"]["template"]["spec"]["containers"][0]["image"]  # devplace's image
        if sets:
            assert {"name": "metrics", "containerPort": 9090} in container["ports"]
            assert container["livenessProbe"]["httpGet"]["port"] == "metrics"


def test_the_command_prints_one_yaml_stream_and_fails_in_one_line() -> None:
    result = CliRunner().invoke(app, ["render", "--set", "debugEcho.configuration.enabled=true"], prog_name="devplace")
    assert result.exit_code == 0, result.output
    kinds = [doc["kind"] for doc in yaml.safe_load_all(result.stdout)]
    assert kinds == ["Configuration", "DaemonSet", "Deployment"]
    result = CliRunner().invoke(app, ["render", "--set", "a..b=1"], prog_name="devplace")
    assert (result.exit_code, result.stderr) == (1, "error: --set: 'a..b=1': a key is empty\n")
    result = CliRunner().invoke(app, ["render", "--akri-values", "/nonexistent.yaml"], prog_name="devplace")
    assert (result.exit_code, result.stderr) == (1, "error: /nonexistent.yaml: No such file or directory\n")
