"""Namespace, Event, ServiceAccount and the RBAC kinds: stored as written, checked where Kubernetes checks them."""

from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.api import lookup, normalize


def test_the_kinds_are_registered_at_kubernetes_groups_and_scopes() -> None:
    scopes = {k: (lookup(k).group_versions, lookup(k).namespaced) for k in ("Namespace", "Event", "ClusterRoleBinding")}
    assert scopes == {
        "Namespace": (("v1",), False),
        "Event": (("v1", "events.k8s.io/v1"), True),
        "ClusterRoleBinding": (("rbac.authorization.k8s.io/v1",), False),
    }


def test_an_rbac_manifest_round_trips_unchanged() -> None:
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "read", "namespace": "default"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": "default"}],
    }
    assert normalize(binding) == binding


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "e"},
                "involvedObject": {"name": "p"},
                "type": "Bad",
            },
            "type",
        ),
        ({"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}}, "involvedObject"),
        (
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "b"}},
            "roleRef.kind",
        ),
        (
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "r"},
                "rules": [{"verbs": "get"}],
            },
            "rules[0].verbs",
        ),
        (
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}, "status": {"phase": "Gone"}},
            "status.phase",
        ),
    ],
)
def test_what_kubernetes_refuses_is_refused_naming_the_field(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        normalize(obj)
    assert field in [f.path for f in caught.value.fields]


def _lease(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "devplace-scheduler", "namespace": "devplace"},
        "spec": spec,
    }


def test_a_lease_is_a_namespaced_coordination_kind_and_round_trips_unchanged() -> None:
    assert (lookup("Lease").group_versions, lookup("Lease").namespaced) == (("coordination.k8s.io/v1",), True)
    lease = _lease(
        holderIdentity="host_1",
        leaseDurationSeconds=15,
        acquireTime="2026-01-01T00:00:00.000000Z",
        renewTime="2026-01-01T00:00:02.500000Z",
        leaseTransitions=3,
    )
    assert normalize(lease) == lease


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"leaseDurationSeconds": 0}, "spec.leaseDurationSeconds"),
        ({"leaseDurationSeconds": "15"}, "spec.leaseDurationSeconds"),
        ({"leaseTransitions": -1}, "spec.leaseTransitions"),
        ({"holderIdentity": 7}, "spec.holderIdentity"),
        ({"renewTime": True}, "spec.renewTime"),
    ],
)
def test_a_lease_with_a_field_of_the_wrong_type_is_refused_naming_it(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        normalize(_lease(**spec))
    assert [f.path for f in caught.value.fields] == [field]
