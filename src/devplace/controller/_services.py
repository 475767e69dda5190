"""Akri's broker Services: `<instance>-svc` and `<configuration>-svc`, while a broker behind them runs.

Pure. As in Akri, a Service exists while at least one of its brokers is Running (not merely created) and goes when
none remain: the instance Service (from `instanceServiceSpec`) selects `akri.sh/instance=<instance>`, the
configuration Service (from `configurationServiceSpec`) selects `akri.sh/configuration=<configuration>`. Only
brokers that are still desired count, so a Service goes in the same pass as the last broker behind it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from devplace.controller import _inputs as inputs
from devplace.controller import _names as names
from devplace.controller import _plans as plans


def _running(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status")
    meta = pod.get("metadata") or {}
    return isinstance(status, Mapping) and status.get("phase") == "Running" and not meta.get("deletionTimestamp")


_MEMO: dict[tuple[str, str, str, str], plans.Desired] = {}
"""Service bodies already built, by (Configuration, spec, owner, name) digest: pure (see strategies._MEMO)."""
_MEMO_LIMIT = 200_000


def _service(
    configuration: inputs.ConfigurationFacts,
    name: str,
    spec: Mapping[str, Any],
    labels: dict[str, str],
    selector: dict[str, str],
    owner: dict[str, Any],
) -> plans.Desired:
    memo_key = (configuration.namespace, name, names.digest([spec, labels, selector, owner], 32), configuration.name)
    found = _MEMO.get(memo_key)
    if found is not None:
        return found
    body_spec = copy.deepcopy(dict(spec))
    body_spec["selector"] = selector
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": name,
            "namespace": configuration.namespace,
            "labels": labels,
            "ownerReferences": [owner],
        },
        "spec": body_spec,
    }
    if len(_MEMO) >= _MEMO_LIMIT:
        _MEMO.clear()
    found = _MEMO[memo_key] = plans.Desired(plans.stamped(body), "update")
    return found


def services(
    configuration: inputs.ConfigurationFacts,
    brokers: Iterable[plans.Desired],
    existing: Sequence[Mapping[str, Any]],
    instances: Mapping[str, inputs.InstanceFacts],
) -> tuple[plans.Desired, ...]:
    """The Services `configuration` wants, given its desired brokers and the objects it owns (module docstring)."""
    wanted = {b.key for b in brokers if b.key[0] == "Pod"}
    running = [obj for obj in existing if plans.key_of(obj) in wanted and _running(obj)]
    out: list[plans.Desired] = []
    base = {names.CONTROLLER_LABEL: names.CONTROLLER_VALUE, names.CONFIGURATION_LABEL: configuration.name}
    spec = configuration.instance_service_spec
    if spec is not None:
        serving = sorted({names.labels_of(p).get(names.INSTANCE_LABEL, "") for p in running} - {""})
        for name in serving:
            instance = instances.get(name)
            if instance is None:
                continue
            selector = {names.INSTANCE_LABEL: name}
            out.append(
                _service(
                    configuration,
                    names.instance_service_name(name),
                    spec,
                    {**base, **selector},
                    selector,
                    inputs.instance_owner(instance),
                )
            )
    spec = configuration.configuration_service_spec
    if spec is not None and running:
        out.append(
            _service(
                configuration,
                names.configuration_service_name(configuration.name),
                spec,
                dict(base),
                {names.CONFIGURATION_LABEL: configuration.name},
                configuration.owner_reference(),
            )
        )
    return tuple(out)
