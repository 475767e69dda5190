"""managedFields and server-side apply: who owns what, conflicts, force, removal of fields no longer applied, and the
Update entries every other write leaves."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.kubeapi import _managedfields as managedfields
from devplace.kubeapi import _patches as patches
from devplace.kubeapi._managedfields import Path

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def deployment(replicas: int = 1, image: str = "nginx:1", *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": labels if labels is not None else {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": image, "ports": [{"containerPort": 80}]}]},
            },
        },
    }


def stored(obj: dict[str, Any], rv: str = "1") -> dict[str, Any]:
    """`obj` as the store hands it back: with the identity metadata the store owns."""
    out = copy.deepcopy(obj)
    out["metadata"].update(resourceVersion=rv, uid="u-1", generation=1, creationTimestamp="2026-01-01T00:00:00Z")
    return out


def apply(
    live: dict[str, Any] | None, config: dict[str, Any], manager: str, *, force: bool = False, at: float = T0
) -> dict[str, Any]:
    out = patches.server_side_apply(live, config, manager=manager, force=force, api_version="apps/v1", now=at)
    return stored(out)


def owners(obj: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    """(manager, operation) -> the paths it owns, as text."""
    return {
        (m.manager, m.operation): {managedfields.path_text(p) for p in m.fields}
        for m in managedfields.managers_of(obj).values()
    }


REPLICAS = ".spec.replicas"
IMAGE = '.spec.template.spec.containers[name="web"].image'


# -- field sets and FieldsV1 ---------------------------------------------------------------------------------------


def test_an_applied_configuration_owns_leaves_and_keyed_items_as_kubernetes_writes_them() -> None:
    fields = managedfields.field_set(managedfields.comparable(deployment()), "Deployment")
    assert managedfields.encode_fields(managedfields.without_identity(fields)) == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},  # a LabelSelector is atomic
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"web"}': {
                            ".": {},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {
                                'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}},
                            },
                        }
                    }
                },
            },
        },
    }


def test_lists_of_a_devplace_kind_are_atomic_unless_they_embed_a_kubernetes_type() -> None:
    config = {
        "apiVersion": "akri.sh/v0",
        "kind": "Configuration",
        "metadata": {"name": "cam"},
        "spec": {
            "discoveryHandler": {"name": "x", "discoveryProperties": [{"name": "a"}]},
            "brokerSpec": {"brokerPodSpec": {"containers": [{"name": "b", "image": "i"}]}},
        },
    }
    texts = {managedfields.path_text(p) for p in managedfields.field_set(config, "Configuration")}
    assert ".spec.discoveryHandler.discoveryProperties" in texts
    assert '.spec.brokerSpec.brokerPodSpec.containers[name="b"].image' in texts


paths = st.lists(
    st.one_of(
        st.tuples(st.just("f"), st.text(alphabet="abc.:", min_size=1, max_size=3)),
        st.tuples(st.just("k"), st.sampled_from(['{"name":"a"}', '{"containerPort":80,"protocol":"TCP"}'])),
        st.tuples(st.just("v"), st.sampled_from(['"x"', "3", "true"])),
        st.tuples(st.just("i"), st.integers(0, 3)),
    ),
    min_size=1,
    max_size=4,
).map(tuple)


@given(st.sets(paths, max_size=8))
def test_fields_v1_round_trips_any_field_set(fields: set[Path]) -> None:
    assert managedfields.decode_fields(managedfields.encode_fields(fields)) == fields


@pytest.mark.parametrize("bad", [{"x:a": {}}, {"f:a": 3}, {"k:not json": {}}, {"i:x": {}}, []])
def test_a_fields_v1_that_is_not_one_is_invalid(bad: Any) -> None:
    with pytest.raises(errors.Invalid):
        managedfields.decode_fields(bad)


def test_paths_read_as_kubernetes_prints_them() -> None:
    path = (("f", "spec"), ("f", "ports"), ("k", '{"port":80,"protocol":"TCP"}'), ("f", "name"))
    assert managedfields.path_text(path) == '.spec.ports[port=80,protocol="TCP"].name'
    assert managedfields.path_text((("f", "finalizers"), ("v", '"x"'))) == '.finalizers[="x"]'


# -- managers ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field_manager", "user_agent", "expected"),
    [
        ("mine", "kubectl/v1.32", "mine"),
        (None, "kubectl-edit/v1.32.4 (linux/amd64) kubernetes/abc", "kubectl-edit"),
        ("", "python-httpx/0.28", "python-httpx"),
        (None, None, "unknown"),
        (None, "x" * 300, "x" * 128),
    ],
)
def test_the_manager_is_the_field_manager_else_the_user_agent_up_to_its_first_slash(
    field_manager: str | None, user_agent: str | None, expected: str
) -> None:
    assert managedfields.manager_name(field_manager, user_agent) == expected


@pytest.mark.parametrize("field_manager", ["x" * 129, "tab\there"])
def test_a_field_manager_kubernetes_would_refuse_is_invalid_naming_it(field_manager: str) -> None:
    with pytest.raises(errors.Invalid) as raised:
        managedfields.manager_name(field_manager, None)
    assert raised.value.fields[0].path == "fieldManager"


# -- Update entries ------------------------------------------------------------------------------------------------


def update(
    old: dict[str, Any] | None, new: dict[str, Any], manager: str, at: float = T0, sub: str = ""
) -> dict[str, Any]:
    out = managedfields.recorded(old, new, manager=manager, api_version="apps/v1", now=at, subresource=sub)
    return stored(out)


def test_a_create_gives_its_manager_every_field_with_the_maps_it_made() -> None:
    created = update(None, deployment(), "kubectl-create")
    [entry] = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"], entry["time"]) == ("kubectl-create", "Update", "2026-01-01T00:00:00Z")
    assert entry["fieldsV1"]["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
    assert entry["fieldsV1"]["f:spec"]["."] == {}
    assert REPLICAS in owners(created)[("kubectl-create", "Update")]


def test_an_update_takes_the_fields_it_changes_from_every_other_manager() -> None:
    created = update(None, deployment(), "kubectl-create")
    scaled = update(created, deployment(replicas=3), "kubectl-scale", at=T0 + 60, sub="scale")
    own = owners(scaled)
    assert own[("kubectl-scale", "Update")] == {REPLICAS}
    assert REPLICAS not in own[("kubectl-create", "Update")]
    scale_entry = next(e for e in scaled["metadata"]["managedFields"] if e["manager"] == "kubectl-scale")
    assert (scale_entry["subresource"], scale_entry["time"]) == ("scale", "2026-01-01T00:01:00Z")


def test_what_an_update_removes_is_nobodys_and_an_empty_entry_goes() -> None:
    created = update(None, deployment(), "kubectl-create")
    labelled = update(created, deployment(labels={"app": "web", "tier": "a"}), "kubectl-label")
    unlabelled = update(labelled, deployment(labels={"app": "web"}), "kubectl-edit")
    assert ("kubectl-label", "Update") not in owners(unlabelled)
    assert ("kubectl-edit", "Update") not in owners(unlabelled)  # it removed a field, it set none


def test_an_update_that_changes_nothing_leaves_the_entries_and_their_times() -> None:
    created = update(None, deployment(), "kubectl-create")
    again = update(created, deployment(), "kubectl-create", at=T0 + 3600)
    assert again["metadata"]["managedFields"] == created["metadata"]["managedFields"]


def test_managed_fields_in_the_new_object_are_ignored() -> None:
    created = update(None, deployment(), "kubectl-create")
    forged = deployment(replicas=2)
    forged["metadata"]["managedFields"] = [{"manager": "forger", "operation": "Apply", "fieldsV1": {"f:spec": {}}}]
    assert set(owners(update(created, forged, "kubectl-edit"))) == {
        ("kubectl-create", "Update"),
        ("kubectl-edit", "Update"),
    }


def test_entries_are_sorted_as_kubernetes_sorts_them() -> None:
    obj = apply(None, deployment(), "zeta")
    obj = update(obj, deployment(labels={"app": "web", "b": "1"}), "beta", at=T0 + 2)
    obj = update(obj, deployment(image="nginx:2", labels={"app": "web", "b": "1"}), "alpha", at=T0 + 1)
    order = [(e["operation"], e["manager"]) for e in obj["metadata"]["managedFields"]]
    assert order == [("Apply", "zeta"), ("Update", "alpha"), ("Update", "beta")]


# -- server-side apply ---------------------------------------------------------------------------------------------


def test_an_apply_to_no_object_creates_it_owned_by_the_applier() -> None:
    created = apply(None, deployment(), "kubectl")
    assert created["spec"] == deployment()["spec"]
    assert set(owners(created)) == {("kubectl", "Apply")}
    assert {REPLICAS, IMAGE} <= owners(created)[("kubectl", "Apply")]


def test_a_second_manager_changing_an_owned_field_conflicts_naming_field_and_owner() -> None:
    live = apply(None, deployment(), "kubectl")
    with pytest.raises(errors.Conflict) as raised:
        apply(live, deployment(replicas=5), "ci")
    assert raised.value.message == 'Apply failed with 1 conflict: conflict with "kubectl": .spec.replicas'
    assert raised.value.fields == (errors.FieldError(REPLICAS, 'conflict with "kubectl"'),)


def test_conflicts_with_several_fields_and_update_managers_are_listed_per_manager() -> None:
    live = update(None, deployment(), "kubectl-create")
    live = apply(live, deployment(), "kubectl")  # shares every field: same values
    with pytest.raises(errors.Conflict) as raised:
        apply(live, deployment(replicas=5, image="nginx:2"), "ci")
    assert raised.value.message == (
        "Apply failed with 4 conflicts: "
        'conflicts with "kubectl":\n'
        f"- {REPLICAS}\n"
        f"- {IMAGE}\n"
        'conflicts with "kubectl-create" using apps/v1:\n'
        f"- {REPLICAS}\n"
        f"- {IMAGE}"
    )
    assert len(raised.value.fields) == 4


def test_applying_the_same_value_shares_ownership_without_conflict() -> None:
    live = apply(None, deployment(), "kubectl")
    shared = apply(live, deployment(), "ci")
    own = owners(shared)
    assert REPLICAS in own[("kubectl", "Apply")]
    assert REPLICAS in own[("ci", "Apply")]


def test_force_takes_the_conflicting_fields_over() -> None:
    live = apply(None, deployment(), "kubectl")
    forced = apply(live, {**deployment(replicas=5), "metadata": {"name": "web"}}, "ci", force=True)
    assert forced["spec"]["replicas"] == 5
    own = owners(forced)
    assert REPLICAS in own[("ci", "Apply")]
    assert REPLICAS not in own[("kubectl", "Apply")]
    assert IMAGE in own[("kubectl", "Apply")]
    assert IMAGE in own[("ci", "Apply")]


def test_fields_the_applier_no_longer_applies_are_removed() -> None:
    live = apply(None, deployment(labels={"app": "web", "tier": "a"}), "kubectl")
    again = apply(live, deployment(labels={"app": "web"}), "kubectl")
    assert again["metadata"]["labels"] == {"app": "web"}
    without_replicas = deployment()
    del without_replicas["spec"]["replicas"]
    assert "replicas" not in apply(again, without_replicas, "kubectl")["spec"]


def test_fields_another_manager_also_owns_are_kept_when_the_applier_drops_them() -> None:
    live = apply(None, deployment(), "kubectl")
    live = apply(live, deployment(), "ci")
    without_replicas = deployment()
    del without_replicas["spec"]["replicas"]
    kept = apply(live, without_replicas, "kubectl")
    assert kept["spec"]["replicas"] == 1
    assert REPLICAS not in owners(kept)[("kubectl", "Apply")]


def test_an_item_another_manager_added_to_a_keyed_list_survives_the_appliers_next_apply() -> None:
    live = apply(None, deployment(), "kubectl")
    sidecar = deployment()
    sidecar["spec"]["template"]["spec"]["containers"] = [{"name": "log", "image": "busybox"}]
    sidecar["spec"].pop("replicas")
    live = apply(live, sidecar, "injector")
    assert [c["name"] for c in live["spec"]["template"]["spec"]["containers"]] == ["web", "log"]
    again = apply(live, deployment(image="nginx:2"), "kubectl")
    containers = again["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("web", "nginx:2"), ("log", "busybox")]


def test_an_object_no_manager_touched_is_owned_by_before_first_apply() -> None:
    legacy = stored(deployment())  # written by a part straight into the store: no managedFields
    with pytest.raises(errors.Conflict, match='conflict with "before-first-apply" using apps/v1'):
        apply(legacy, deployment(replicas=2), "kubectl")
    same_values = apply(legacy, deployment(), "kubectl")
    assert set(owners(same_values)) == {("before-first-apply", "Update"), ("kubectl", "Apply")}


def test_a_reapply_that_changes_nothing_keeps_the_entry_time() -> None:
    live = apply(None, deployment(), "kubectl")
    again = apply(live, deployment(), "kubectl", at=T0 + 3600)
    assert again["metadata"]["managedFields"] == live["metadata"]["managedFields"]


def test_an_applied_configuration_may_not_carry_managed_fields_or_unkeyed_list_items() -> None:
    config = deployment()
    config["metadata"]["managedFields"] = [{"manager": "x"}]
    with pytest.raises(errors.Malformed):
        apply(None, config, "kubectl")
    config = deployment()
    config["spec"]["template"]["spec"]["containers"].append({"image": "no-name"})
    with pytest.raises(errors.Invalid, match=r"spec\.template\.spec\.containers"):
        apply(None, config, "kubectl")


# -- from client-side apply to server-side apply (Kubernetes' last-applied manager and updater) -----------------------


def client_side_applied(obj: dict[str, Any]) -> dict[str, Any]:
    """What `kubectl apply` (client-side) leaves: the object with its last-applied annotation, created by
    `kubectl-client-side-apply` (an Update entry owning what it wrote)."""
    annotated = copy.deepcopy(obj)
    annotated["metadata"]["annotations"] = {patches.LAST_APPLIED: patches.last_applied_text(obj)}
    recorded = managedfields.recorded(
        None, annotated, manager="kubectl-client-side-apply", api_version="apps/v1", now=T0
    )
    return stored(recorded)


def test_kubectl_server_side_apply_takes_over_what_it_applied_client_side() -> None:
    live = client_side_applied(deployment(replicas=1))
    applied = apply(live, deployment(replicas=2), "kubectl")
    assert applied["spec"]["replicas"] == 2
    assert REPLICAS in owners(applied)[("kubectl", "Apply")]
    assert REPLICAS not in owners(applied)[("kubectl-client-side-apply", "Update")]
    last = applied["metadata"]["annotations"][patches.LAST_APPLIED]
    assert last == patches.last_applied_text(deployment(replicas=2))  # kept in step for kubectl's next apply


def test_another_manager_or_a_field_changed_since_still_conflicts() -> None:
    live = client_side_applied(deployment(replicas=1))
    with pytest.raises(errors.Conflict):
        apply(live, deployment(replicas=2), "helm")  # only kubectl upgrades
    scaled = copy.deepcopy(live)
    scaled["spec"]["replicas"] = 3  # changed by someone else since the client-side apply (no longer as applied)
    scaled["metadata"]["managedFields"] = managedfields.updated_managed_fields(
        live, scaled, manager="kubectl-client-side-apply", api_version="apps/v1", now=T0, root=None
    )
    with pytest.raises(errors.Conflict) as caught:
        apply(scaled, deployment(replicas=2), "kubectl")
    assert [c.path for c in caught.value.fields] == [REPLICAS]


def test_an_update_may_reset_or_replace_the_managed_fields_as_kubernetes_allows() -> None:
    live = apply(None, deployment(), "alice")
    for reset in ([], [{}]):
        entries = managedfields.updated_managed_fields(
            live, live, manager="bob", api_version="apps/v1", now=T0, root=None, requested=reset
        )
        assert entries == []
    moved = [
        {
            "manager": "carol",
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:replicas": {}}},
        }
    ]
    entries = managedfields.updated_managed_fields(
        live, live, manager="bob", api_version="apps/v1", now=T0, root=None, requested=moved
    )
    assert [(e["manager"], e["fieldsV1"]) for e in entries] == [("carol", {"f:spec": {"f:replicas": {}}})]
    with pytest.raises(errors.Invalid) as caught:
        managedfields.requested_managers([{"manager": "x", "operation": "Take"}])
    assert caught.value.fields[0].path == "metadata.managedFields[0].operation"
