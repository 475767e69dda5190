"""Akri's Helm chart values as devplace manifests: what `helm install akri akri-helm-charts/akri -f values.yaml` makes,
for devplace to run instead (`devplace render --akri-values`).

The oracle is Akri's chart (project-akri/akri, deployment/helm), read by hand; `helm` cannot run here. `DEFAULTS` are
the chart's values as `helm show values` prints them for the release whose templates are followed below (only the
keys those templates read; an Akri values file may hold any others, which are ignored as Helm ignores keys no template
reads). Every rule below names the template it follows; tests/fixtures/akri/*.yaml hold the Configurations worked out
from the templates line by line, and tests/cli/test_renders.py checks this module renders the same.

- `<handler>.configuration.*` (udev, onvif, opcua, debugEcho): one `akri.sh/v0` Configuration each when `enabled`
  (templates/<handler>-configuration.yaml): its discovery details as the template writes them (a YAML text), a
  broker Pod spec when `brokerPod.image.repository` is set, else a broker Job spec when `brokerJob.image.repository`
  is, the instance and configuration Service specs (for a broker Pod; debugEcho also for a Job), the broker
  properties (values as strings) and the capacity. The templates' own quirks are kept, since the install gives
  them: a Job's image takes `brokerPod.image.tag` (but udev's), debugEcho's Pod and the Job pull policies read
  `configuration.pullPolicy`, debugEcho's configuration Service targets its `port`, and a udev broker Pod is
  privileged unless `brokerPod.securityContext` says otherwise. The udev template fails without a rule, with its
  message. `crds.group`/`crds.version` make the apiVersion.
- `agent.*` and `controller.*` (templates/agent.yaml, controller.yaml): strategic-merge patches of devplace's
  DaemonSet and Deployment (deploy/kubernetes/agent.yaml, controller.yaml; apply them with kustomize's `patches`):
  `enabled: false` deletes it; `resources.*` and `securityContext` where they differ from the chart's defaults
  (those are sized for Akri's Rust binaries: devplace's manifests keep their own), the node selectors (`linuxOnly`,
  `nodeSelectors`, `onlyOnControlPlane`), `allowOnControlPlane`'s toleration, the host paths
  (`host.discoveryHandlers`, `host.kubeletDevicePlugins`, `host.udev`), `allowDebugEcho` (the agent's
  ENABLE_DEBUG_ECHO and DEBUG_ECHO_INSTANCES_SHARED, which it accepts) and `imagePullSecrets` carry over. Images do
  not: devplace runs its own image.
- `prometheus.*` (templates/prometheus.yaml, and the ports in agent.yaml and controller.yaml): devplace's parts always
  serve `/metrics` (their probes use the same endpoint), in a container port named `metrics` on 8080, Akri's default;
  another `prometheus.port` moves it (`DEVPLACE_METRICS_PORT`, the port list replaced). When `enabled`, a PodMonitor
  per part (the Prometheus operator's) scrapes `prometheus.endpoint` on it, as Akri's do; `portName` is not used
  (the probes name the port `metrics`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import yaml

from devplace import errors

NAMESPACE = "devplace"
AGENT = "devplace-agent"
CONTROLLER = "devplace-controller"


def _resources(memory_request: str, cpu_request: str, memory_limit: str, cpu_limit: str) -> dict[str, str]:
    return {
        "memoryRequest": memory_request,
        "cpuRequest": cpu_request,
        "memoryLimit": memory_limit,
        "cpuLimit": cpu_limit,
    }


def _configuration(
    name: str,
    details: dict[str, Any],
    capacity: int,
    pod: dict[str, str],
    service_ports: tuple[int, int],
    *,
    port_name: str | None = "grpc",
    service_names: tuple[str, str] | None = None,
) -> dict[str, Any]:
    port, target = service_ports

    def service(kind: str) -> dict[str, Any]:
        found: dict[str, Any] = {"type": "ClusterIP", "port": port, "targetPort": target, "protocol": "TCP"}
        if port_name is not None:
            found["portName"] = port_name
        if service_names is not None:
            found["name"] = service_names[0 if kind == "instance" else 1]
        return found

    return {
        "enabled": False,
        "name": name,
        "brokerProperties": {},
        "discoveryDetails": details,
        "capacity": capacity,
        "brokerPod": {"image": {"repository": None, "tag": "latest", "pullPolicy": ""}, "resources": dict(pod)},
        "brokerJob": {
            "image": {"repository": None, "tag": "latest", "pullPolicy": ""},
            "command": None,
            "restartPolicy": "OnFailure",
            "resources": dict(pod),
            "backoffLimit": 2,
            "parallelism": 1,
            "completions": 1,
        },
        "createInstanceServices": True,
        "instanceService": service("instance"),
        "createConfigurationService": True,
        "configurationService": service("configuration"),
    }


def _filter() -> dict[str, Any]:
    return {"action": "Exclude", "items": []}


DEFAULTS: dict[str, Any] = {
    "imagePullSecrets": [],
    "crds": {"group": "akri.sh", "version": "v0"},
    "rbac": {"enabled": True},
    "prometheus": {"enabled": False, "endpoint": "/metrics", "port": 8080, "portName": "metrics"},
    "controller": {
        "enabled": True,
        "securityContext": {
            "runAsUser": 1000,
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "onlyOnControlPlane": False,
        "allowOnControlPlane": True,
        "linuxOnly": True,
        "nodeSelectors": {},
        "resources": _resources("11Mi", "10m", "100Mi", "26m"),
    },
    "agent": {
        "enabled": True,
        "full": False,
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "host": {
            "discoveryHandlers": "/var/lib/akri",
            "kubeletDevicePlugins": "/var/lib/kubelet/device-plugins",
            "kubeletPodResources": "/var/lib/kubelet/pod-resources",
            "udev": None,
        },
        "allowDebugEcho": False,
        "linuxOnly": True,
        "nodeSelectors": {},
        "resources": _resources("11Mi", "10m", "79Mi", "26m"),
    },
    "debugEcho": {
        "configuration": {
            **_configuration(
                "akri-debug-echo",
                {"descriptions": ["foo0", "foo1"]},
                2,
                _resources("10Mi", "10m", "30Mi", "29m"),
                (6052, 6052),
                port_name=None,
                service_names=("akri-debug-echo-foo-instance-service", "akri-debug-echo-foo-configuration-service"),
            ),
            "shared": True,
        },
    },
    "onvif": {
        "configuration": {
            **_configuration(
                "akri-onvif",
                {
                    "ipAddresses": _filter(),
                    "macAddresses": _filter(),
                    "scopes": _filter(),
                    "uuids": _filter(),
                    "discoveryTimeoutSeconds": 1,
                },
                1,
                _resources("98Mi", "134m", "400Mi", "2800m"),
                (80, 8083),
            ),
            "discoveryProperties": None,
        },
    },
    "opcua": {
        "configuration": {
            **_configuration(
                "akri-opcua",
                {"discoveryUrls": ["opc.tcp://localhost:4840/"], "applicationNames": _filter()},
                1,
                _resources("76Mi", "9m", "200Mi", "30m"),
                (80, 8083),
                port_name=None,
            ),
            "mountCertificates": False,
        },
    },
    "udev": {
        "configuration": _configuration(
            "akri-udev",
            {"groupRecursive": False, "udevRules": None},
            1,
            _resources("10Mi", "10m", "30Mi", "29m"),
            (80, 8083),
        ),
    },
}
DEFAULTS["udev"]["configuration"]["brokerPod"]["securityContext"] = {}
"""Akri's chart values (module docstring), as data."""

HANDLERS = ("debugEcho", "onvif", "opcua", "udev")
"""In the order Helm sorts the Configuration templates' files: debug-echo-, onvif-, opcua-, udev-configuration.yaml."""
UDEV_RULE_REQUIRED = (
    'Please set at least one udev rule with `--set udev.configuration.discoveryDetails.udevRules[0]==\\"<udev '
    "rule>\\\"' to specify what you want discovered. See the udev Configuration document at "
    "https://docs.akri.sh/discovery-handlers/udev for more information."
)
PLACEHOLDER = "{{PLACEHOLDER}}"


def _get(node: Any, *path: str) -> Any:
    for step in path:
        node = node.get(step) if isinstance(node, Mapping) else None
    return node


def _go(value: Any) -> str:
    """`{{ value }}` as Go's template prints a value from YAML: null as nothing (Helm drops `<no value>`), booleans
    lowercase."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _to_yaml(value: Any, indent: int) -> str:
    """`toYaml value | nindent N`: a newline, then the value's YAML indented N spaces (no trailing newline)."""
    text = yaml.safe_dump(value, default_flow_style=False, sort_keys=True, allow_unicode=True, width=1 << 20)
    text = text.removesuffix("\n").removesuffix("...").removesuffix("\n")
    return "".join("\n" + " " * indent + line for line in text.split("\n"))


def _filter_text(name: str, found: Any) -> str:
    """An onvif/opcua filter block (`action`, then `items` or `items: []`), at 6 spaces as in the templates."""
    text = f"{name}:\n  action: {_go(_get(found, 'action'))}"
    items = _get(found, "items")
    text += f"\n  items:{_to_yaml(items, 2)}" if items else "\n  items: []"
    return text


def discovery_details(handler: str, details: Any) -> str:
    """The discoveryDetails text the handler's template writes (its `|+` block, indentation removed)."""
    if handler == "debugEcho":  # debug-echo-configuration.yaml lines 9-15
        descriptions = _get(details, "descriptions")
        body = f"descriptions:{_to_yaml(descriptions, 0)}" if descriptions else "descriptions: []"
    elif handler == "udev":  # udev-configuration.yaml lines 9-13
        rules = _get(details, "udevRules")
        if rules is None:
            raise errors.Invalid.field("udev.configuration.discoveryDetails.udevRules", UDEV_RULE_REQUIRED)
        body = (
            f"groupRecursive: {_go(_get(details, 'groupRecursive'))}\nudevRules:{_to_yaml(rules, 0)}"
            f"\npermissions: {_go(_get(details, 'permissions'))}"
        )
    elif handler == "onvif":  # onvif-configuration.yaml lines 9-42
        body = "\n".join(_filter_text(key, _get(details, key)) for key in ("ipAddresses", "macAddresses", "scopes"))
        body += "\n" + _filter_text("uuids", _get(details, "uuids"))
        body += f"\ndiscoveryTimeoutSeconds: {_go(_get(details, 'discoveryTimeoutSeconds'))}"
        body = body.replace("ipAddresses:\n", "ipAddresses: \n", 1)
    else:  # opcua-configuration.yaml lines 9-21
        urls = _get(details, "discoveryUrls")
        body = f"opcuaDiscoveryMethod: \n  standard:\n    discoveryUrls:{_to_yaml(urls, 4)}\n"
        body += _filter_text("applicationNames", _get(details, "applicationNames"))
    return body + "\n"


def _env(found: Any) -> list[dict[str, str]]:
    return [{"name": str(key), "value": _go(found[key])} for key in sorted(found or {})]


def _env_from(found: Any) -> list[dict[str, Any]]:
    refs: list[dict[str, Any]] = [{"secretRef": {"name": _go(v)}} for v in _get(found, "secretRef") or []]
    return refs + [{"configMapRef": {"name": _go(v)}} for v in _get(found, "configMapRef") or []]


def _amounts(resources: Any, which: str) -> dict[str, str]:
    return {
        PLACEHOLDER: "1",
        "memory": _go(_get(resources, f"memory{which}")),
        "cpu": _go(_get(resources, f"cpu{which}")),
    }


def _container_resources(resources: Any) -> dict[str, Any]:
    return {"requests": _amounts(resources, "Request"), "limits": _amounts(resources, "Limit")}


def _broker_pod(handler: str, config: Mapping[str, Any], pull_secrets: Any) -> dict[str, Any]:
    pod = config.get("brokerPod") or {}
    container: dict[str, Any] = {
        "name": f"{_go(config.get('name'))}-broker",
        "image": f"{_go(_get(pod, 'image', 'repository'))}:{_go(_get(pod, 'image', 'tag'))}",
    }
    policy = config.get("pullPolicy") if handler == "debugEcho" else _get(pod, "image", "pullPolicy")
    if policy:
        container["imagePullPolicy"] = _go(policy)
    if pod.get("env"):
        container["env"] = _env(pod["env"])
    if pod.get("envFrom"):
        container["envFrom"] = _env_from(pod["envFrom"])
    if handler == "udev":
        container["securityContext"] = pod.get("securityContext") or {"privileged": True}
    container["resources"] = _container_resources(pod.get("resources"))
    spec: dict[str, Any] = {"containers": [container]}
    certificates = handler == "opcua" and bool(config.get("mountCertificates"))
    if handler == "opcua":
        if pod.get("volumeMounts") or certificates:
            mounts = list(pod.get("volumeMounts") or [])
            if certificates:
                mounts.append({"name": "credentials", "mountPath": "/etc/opcua-certs/client-pki", "readOnly": False})
            container["volumeMounts"] = mounts
    elif pod.get("volumeMounts"):
        container["volumeMounts"] = pod["volumeMounts"]
    if handler == "opcua":
        if pull_secrets:
            spec["imagePullSecrets"] = pull_secrets
        if pod.get("volumeMounts") or certificates:
            volumes = list(pod.get("volumes") or [])
            if certificates:
                volumes.append(_OPCUA_CREDENTIALS)
            spec["volumes"] = volumes
        return spec
    if pod.get("volumes"):
        spec["volumes"] = pod["volumes"]
    if pull_secrets:
        spec["imagePullSecrets"] = pull_secrets
    return spec


_OPCUA_CREDENTIALS = {
    "name": "credentials",
    "secret": {
        "secretName": "opcua-broker-credentials",
        "items": [
            {"key": "client_certificate", "path": "own/certs/AkriBroker.der"},
            {"key": "client_key", "path": "own/private/AkriBroker.pfx"},
            {"key": "ca_certificate", "path": "trusted/certs/SomeCA.der"},
            {"key": "ca_crl", "path": "trusted/crl/SomeCA.crl"},
        ],
    },
}


def _broker_job(handler: str, config: Mapping[str, Any], pull_secrets: Any) -> dict[str, Any]:
    job = config.get("brokerJob") or {}
    tag = _get(job if handler == "udev" else config.get("brokerPod"), "image", "tag")
    container: dict[str, Any] = {
        "name": f"{_go(config.get('name'))}-broker",
        "image": f"{_go(_get(job, 'image', 'repository'))}:{_go(tag)}",
    }
    if job.get("command"):
        container["command"] = job["command"]
    policy = _get(job, "image", "pullPolicy") if handler == "udev" else config.get("pullPolicy")
    if policy:
        container["imagePullPolicy"] = _go(policy)
    if handler != "udev":
        if job.get("env"):
            container["env"] = _env(job["env"])
        if job.get("envFrom"):
            container["envFrom"] = _env_from(job["envFrom"])
    container["resources"] = _container_resources(job.get("resources"))
    pod: dict[str, Any] = {"containers": [container]}
    if handler != "udev":
        if job.get("volumeMounts"):
            container["volumeMounts"] = job["volumeMounts"]
        if job.get("volumes"):
            pod["volumes"] = job["volumes"]
    pod["restartPolicy"] = _go(job.get("restartPolicy"))
    if pull_secrets:
        pod["imagePullSecrets"] = pull_secrets
    return {
        "template": {"spec": pod},
        "backoffLimit": job.get("backoffLimit"),
        "parallelism": job.get("parallelism"),
        "completions": job.get("completions"),
    }


def _service(handler: str, service: Any, which: str) -> dict[str, Any]:
    if handler == "opcua":
        name: Any = "grpc"
    elif handler == "debugEcho":
        name = _get(service, "name")
    else:
        name = _get(service, "portName")
    target = _get(service, "port" if handler == "debugEcho" and which == "configuration" else "targetPort")
    port = {"name": name, "port": _get(service, "port"), "protocol": _get(service, "protocol"), "targetPort": target}
    return {"type": _get(service, "type"), "ports": [port]}


def configuration(handler: str, values: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Configuration `templates/<handler>-configuration.yaml` writes for `values` (merged with `DEFAULTS`), or
    None when it is not enabled."""
    config = _get(values, handler, "configuration") or {}
    if not config.get("enabled"):
        return None
    crds = values.get("crds") or {}
    pull_secrets = values.get("imagePullSecrets")
    spec: dict[str, Any] = {
        "discoveryHandler": {
            "name": handler,
            "discoveryDetails": discovery_details(handler, config.get("discoveryDetails")),
        }
    }
    if handler == "onvif" and config.get("discoveryProperties"):
        spec["discoveryHandler"]["discoveryProperties"] = [
            _discovery_property(p) for p in config["discoveryProperties"]
        ]
    pod_image = _get(config, "brokerPod", "image", "repository")
    job_image = _get(config, "brokerJob", "image", "repository")
    if pod_image or job_image:
        spec["brokerSpec"] = (
            {"brokerPodSpec": _broker_pod(handler, config, pull_secrets)}
            if pod_image
            else {"brokerJobSpec": _broker_job(handler, config, pull_secrets)}
        )
    if pod_image or (handler == "debugEcho" and job_image):
        if config.get("createInstanceServices"):
            spec["instanceServiceSpec"] = _service(handler, config.get("instanceService"), "instance")
        if config.get("createConfigurationService"):
            spec["configurationServiceSpec"] = _service(handler, config.get("configurationService"), "configuration")
    properties = config.get("brokerProperties")
    spec["brokerProperties"] = {str(k): _go(v) for k, v in sorted(properties.items())} if properties else {}
    spec["capacity"] = config.get("capacity")
    return {
        "apiVersion": f"{_go(crds.get('group'))}/{_go(crds.get('version'))}",
        "kind": "Configuration",
        "metadata": {"name": _go(config.get("name"))},
        "spec": spec,
    }


def _discovery_property(found: Mapping[str, Any]) -> dict[str, Any]:
    """One of onvif's `discoveryProperties` (onvif-configuration.yaml lines 43-79)."""
    out: dict[str, Any] = {"name": found.get("name")}
    source = found.get("valueFrom")
    if not source:
        out["value"] = _go(found.get("value"))
        return out
    for ref in ("secretKeyRef", "configMapKeyRef"):
        if source.get(ref):
            given = source[ref]
            picked = {"name": given.get("name")}
            picked.update({k: given[k] for k in ("namespace", "key") if given.get(k)})
            if "optional" in given:
                picked["optional"] = given["optional"]
            out["valueFrom"] = {ref: picked}
            break
    else:
        out["valueFrom"] = {}
    return out


def configurations(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every Configuration the chart's templates write for `values` (merged with `DEFAULTS`), in Helm's order."""
    return [found for handler in HANDLERS if (found := configuration(handler, values)) is not None]


def _tuned(part: str, values: Mapping[str, Any], container: dict[str, Any]) -> None:
    """Put in `container` the resources and securityContext `values` set other than the chart's defaults.

    The chart's defaults are sized for Akri's Rust binaries (79Mi for the agent) and run the controller as uid 1000:
    devplace's manifests keep their own unless a values file asks otherwise."""
    found, default = values.get(part) or {}, DEFAULTS[part]
    resources: dict[str, dict[str, str]] = {}
    for key, (section, field) in _RESOURCE_KEYS.items():
        value = _get(found, "resources", key)
        if value != default["resources"][key]:
            resources.setdefault(section, {})[field] = _go(value)
    if resources:
        container["resources"] = resources
    if found.get("securityContext") != default["securityContext"]:
        container["securityContext"] = found.get("securityContext") or {}


_RESOURCE_KEYS = {
    "memoryRequest": ("requests", "memory"),
    "cpuRequest": ("requests", "cpu"),
    "memoryLimit": ("limits", "memory"),
    "cpuLimit": ("limits", "cpu"),
}


def _metrics(values: Mapping[str, Any], container: dict[str, Any]) -> None:
    """devplace's parts always serve /metrics (their probes read /livez and /readyz there), on 8080 in a port named
    `metrics`: only another `prometheus.port` changes the container."""
    port = _get(values, "prometheus", "port")
    if port == DEFAULTS["prometheus"]["port"]:
        return
    container.setdefault("env", []).append({"name": "DEVPLACE_METRICS_PORT", "value": _go(port)})
    container["ports"] = [{"$patch": "replace"}, {"name": "metrics", "containerPort": port}]


def agent_patch(values: Mapping[str, Any]) -> dict[str, Any]:
    """The strategic-merge patch of devplace's agent DaemonSet that `agent.*` asks for (templates/agent.yaml)."""
    head = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": AGENT, "namespace": NAMESPACE}}
    agent = values.get("agent") or {}
    if not agent.get("enabled"):
        return {**head, "$patch": "delete"}
    container: dict[str, Any] = {"name": "agent"}
    _tuned("agent", values, container)
    if agent.get("allowDebugEcho"):
        shared = _go(_get(values, "debugEcho", "configuration", "shared"))
        container["env"] = [
            {"name": "ENABLE_DEBUG_ECHO", "value": "1"},
            {"name": "DEBUG_ECHO_INSTANCES_SHARED", "value": shared},
        ]
    _metrics(values, container)
    host = agent.get("host") or {}
    volumes: list[dict[str, Any]] = [
        {"name": "discovery-handlers", "hostPath": {"path": _go(host.get("discoveryHandlers"))}},
        {"name": "device-plugins", "hostPath": {"path": _go(host.get("kubeletDevicePlugins"))}},
    ]
    if host.get("udev"):
        volumes.append({"name": "udev", "hostPath": {"path": _go(host["udev"])}})
        container["volumeMounts"] = [{"name": "udev", "mountPath": "/run/udev", "readOnly": True}]
    pod: dict[str, Any] = {
        "nodeSelector": _node_selector(agent, control_plane=False),
        "containers": [container],
        "volumes": volumes,
    }
    if agent.get("full"):
        pod.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    if values.get("imagePullSecrets"):
        pod["imagePullSecrets"] = values["imagePullSecrets"]
    return {**head, "spec": {"template": {"spec": pod}}}


def _node_selector(part: Mapping[str, Any], *, control_plane: bool) -> dict[str, Any]:
    """`kubernetes.io/os: linux` unless `linuxOnly` is false (null removes the base's), the control plane's label
    when asked, and `nodeSelectors`."""
    selector: dict[str, Any] = {"kubernetes.io/os": "linux" if part.get("linuxOnly", True) else None}
    if control_plane and part.get("onlyOnControlPlane"):
        selector["node-role.kubernetes.io/master"] = ""
    selector.update({str(k): _go(v) for k, v in (part.get("nodeSelectors") or {}).items()})
    return selector


def controller_patch(values: Mapping[str, Any]) -> dict[str, Any]:
    """The strategic-merge patch of devplace's controller Deployment (templates/controller.yaml)."""
    head = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": CONTROLLER, "namespace": NAMESPACE}}
    controller = values.get("controller") or {}
    if not controller.get("enabled"):
        return {**head, "$patch": "delete"}
    container: dict[str, Any] = {"name": "controller"}
    _tuned("controller", values, container)
    _metrics(values, container)
    pod: dict[str, Any] = {"nodeSelector": _node_selector(controller, control_plane=True), "containers": [container]}
    if controller.get("allowOnControlPlane"):
        pod["tolerations"] = [{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}]
    if values.get("imagePullSecrets"):
        pod["imagePullSecrets"] = values["imagePullSecrets"]
    return {**head, "spec": {"template": {"spec": pod}}}


def pod_monitors(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Akri's PodMonitors (templates/prometheus.yaml), selecting devplace's agent and controller Pods."""
    prometheus = values.get("prometheus") or {}
    if not prometheus.get("enabled"):
        return []
    return [
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "PodMonitor",
            "metadata": {
                "name": f"{part}-metrics",
                "namespace": NAMESPACE,
                "labels": {"app.kubernetes.io/name": part, "release": "prometheus"},
            },
            "spec": {
                "selector": {"matchLabels": {"app.kubernetes.io/name": part}},
                "podMetricsEndpoints": [{"port": "metrics", "path": _go(prometheus.get("endpoint"))}],
            },
        }
        for part in (AGENT, CONTROLLER)
    ]


def render(values: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every document for `values` (already merged with `DEFAULTS`): the Configurations, then the agent and controller
    patches, then the PodMonitors."""
    yield from configurations(values)
    yield agent_patch(values)
    yield controller_patch(values)
    yield from pod_monitors(values)
