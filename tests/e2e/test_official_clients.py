"""The official `kubernetes` Python client and kr8s against `devplace server` (issue #22, section 1): calls a new user
makes first, each of which failed before. One server (a child process on sqlite) serves the module; each test works
in its own namespace.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import kr8s.asyncio
import pytest
from kr8s.asyncio.objects import Namespace as Kr8sNamespace
from kr8s.asyncio.objects import Pod as Kr8sPod
from kubernetes import client, config

from tests.e2e.kubeclients import kubeconfig

__all__ = ["kubeconfig"]  # the module's server fixture

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def api(kubeconfig: Path) -> Iterator[client.ApiClient]:
    with config.new_client_from_config(config_file=str(kubeconfig)) as api_client:
        yield api_client


@pytest.fixture
async def kr8s_api(kubeconfig: Path) -> AsyncIterator[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # kr8s warns about a Kubernetes version it does not support
        api = await kr8s.asyncio.Api(kubeconfig=str(kubeconfig), bypass_factory=True)  # not one of another loop
        try:
            yield api
        finally:
            if api._session is not None:  # kr8s has no close(): its HTTP client is closed in this loop, not at exit
                await api._session.aclose()


def pod(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
    }


# -- the official client ----------------------------------------------------------------------------------------------


def test_version_api_reads_every_field_of_version_info(api: client.ApiClient) -> None:
    info = client.VersionApi(api).get_code()
    assert (info.major, info.minor) == ("1", "32")
    assert info.git_version.startswith("v1.32.0+devplace.")
    assert info.go_version.startswith("python")
    assert "/" in info.platform
    assert info.compiler


def test_deleting_a_config_map_answers_a_success_status(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_config_map("delete", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="gone")))
    answer = core.delete_namespaced_config_map("gone", "delete")
    assert (answer["kind"], answer["status"], answer["details"]["name"]) == ("Status", "Success", "gone")


def test_a_created_pod_reads_back_pending(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("pods", pod("waiting", "pods"))
    assert core.read_namespaced_pod("waiting", "pods").status.phase == "Pending"
    assert core.delete_namespaced_pod("waiting", "pods").metadata.name == "waiting"


def test_namespaces_are_created_listed_and_terminate_with_their_objects(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="python")))
    core.create_namespaced_config_map("python", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="c")))
    listed = {n.metadata.name: n.status.phase for n in core.list_namespace().items}
    assert listed["python"] == "Active"
    assert listed["default"] == "Active"
    core.delete_namespace("python")
    assert "python" not in {n.metadata.name for n in core.list_namespace().items}
    assert core.list_namespaced_config_map("python").items == []


def test_events_are_read_in_both_groups(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(name="p.1"),
        involved_object=client.V1ObjectReference(kind="Pod", name="p", namespace="events"),
        reason="Scheduled",
        message="assigned to node-a",
        type="Normal",
    )
    core.create_namespaced_event("events", event)
    assert [e.reason for e in core.list_namespaced_event("events").items] == ["Scheduled"]
    new = client.EventsV1Api(api).list_namespaced_event("events").items
    assert [(e.note, e.regarding.name) for e in new] == [("assigned to node-a", "p")]


def test_rbac_objects_are_stored_and_listed(api: client.ApiClient) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    role = client.V1Role(
        metadata=client.V1ObjectMeta(name="reader"),
        rules=[client.V1PolicyRule(api_groups=[""], resources=["pods"], verbs=["get", "list"])],
    )
    rbac.create_namespaced_role("rbac", role)
    binding = client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name="reader"),
        role_ref=client.V1RoleRef(api_group="rbac.authorization.k8s.io", kind="Role", name="reader"),
        subjects=[client.RbacV1Subject(kind="User", name="bob")],
    )
    rbac.create_namespaced_role_binding("rbac", binding)
    assert [r.metadata.name for r in rbac.list_namespaced_role("rbac").items] == ["reader"]
    assert rbac.read_namespaced_role_binding("reader", "rbac").role_ref.name == "reader"
    sa = client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="agent"))
    assert client.CoreV1Api(api).create_namespaced_service_account("rbac", sa).metadata.name == "agent"


def test_a_self_subject_access_review_is_answered(api: client.ApiClient) -> None:
    review = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(verb="list", resource="pods", namespace="x")
        )
    )
    answer = client.AuthorizationV1Api(api).create_self_subject_access_review(review)
    assert answer.status.allowed is True


def test_the_official_clients_binding_binds_a_pod_once_and_a_second_binding_gets_409(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    core.create_namespaced_pod("default", pod("bind-me", "default"))
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="bind-me"), target=client.V1ObjectReference(kind="Node", name="node-a")
    )
    # the generated client cannot read the Status Kubernetes answers a binding with; it raises on deserializing
    core.create_namespaced_binding("default", body, _preload_content=False)
    bound = core.read_namespaced_pod("bind-me", "default")
    assert bound.spec.node_name == "node-a"
    assert [(c.type, c.status) for c in bound.status.conditions or []] == [("PodScheduled", "True")]
    again = client.V1Binding(
        metadata=client.V1ObjectMeta(name="bind-me"), target=client.V1ObjectReference(kind="Node", name="node-b")
    )
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_binding("default", again, _preload_content=False)
    assert refused.value.status == 409
    answer = json.loads(refused.value.body)
    assert (answer["reason"], answer["code"]) == ("Conflict", 409)
    assert answer["message"].endswith('pod default/bind-me is already assigned to node "node-a"')
    assert core.read_namespaced_pod("bind-me", "default").spec.node_name == "node-a"


def test_a_list_of_akri_configurations_holds_only_akri_objects(api: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api)
    body = {"kind": "Configuration", "spec": {"discoveryHandler": {"name": "debugEcho"}}}
    custom.create_namespaced_custom_object(
        "akri.sh", "v0", "groups", "configurations", {**body, "apiVersion": "akri.sh/v0", "metadata": {"name": "a"}}
    )
    ours = {**body, "apiVersion": "devplace.io/v1alpha1", "metadata": {"name": "b"}}
    custom.create_namespaced_custom_object("devplace.io", "v1alpha1", "groups", "configurations", ours)
    akri = custom.list_namespaced_custom_object("akri.sh", "v0", "groups", "configurations")["items"]
    assert [(c["apiVersion"], c["metadata"]["name"]) for c in akri] == [("akri.sh/v0", "a")]


# -- kr8s -------------------------------------------------------------------------------------------------------------


async def test_kr8s_connects_without_a_version_warning_and_a_new_pod_reads_pending(kr8s_api: Any) -> None:
    assert (await kr8s_api.version())["minor"] == "32"
    created = await Kr8sPod(pod("kr8s", "kr8s"), api=kr8s_api)
    await created.create()
    await created.refresh()
    assert created.status.phase == "Pending"
    assert await created.ready() is False


async def test_kr8s_creates_and_lists_namespaces_and_lists_events(kr8s_api: Any) -> None:
    namespace = await Kr8sNamespace({"metadata": {"name": "kr8s-ns"}}, api=kr8s_api)
    await namespace.create()
    names = [n.name async for n in kr8s_api.async_get("namespaces")]
    assert "kr8s-ns" in names
    assert [e async for e in kr8s_api.async_get("events", namespace="kr8s-ns")] == []
