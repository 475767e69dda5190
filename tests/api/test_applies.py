"""`plan_apply`: what apply writes for a manifest over what is stored. One row per rule of the module docstring."""

from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.api._applies import Create, Unchanged, Update, plan_apply
from devplace.api._registry import SERVER_OWNED_METADATA

STORED_META = {
    "name": "a",
    "namespace": "default",
    "resourceVersion": "5",
    "uid": "u-1",
    "generation": 1,
    "creationTimestamp": "2026-01-01T00:00:00Z",
}


def config_map(meta: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta or {"name": "a", "namespace": "default"},
        **fields,
    }


def stored_map(**fields: Any) -> dict[str, Any]:
    return config_map(dict(STORED_META), **fields)


def instance(usage: dict[str, str] | None, capacity: int = 3, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"configurationName": "cams", "capacity": capacity}
    if usage is not None:
        spec["deviceUsage"] = usage
    return {
        "apiVersion": "akri.sh/v0",
        "kind": "Instance",
        "metadata": meta or {"name": "x", "namespace": "default"},
        "spec": spec,
    }


def stored_instance(usage: dict[str, str], capacity: int = 3) -> dict[str, Any]:
    return instance(usage, capacity, {**STORED_META, "name": "x"})


FREE3 = {"x-0": "", "x-1": "", "x-2": ""}


@pytest.mark.parametrize(
    ("manifest", "stored", "expected"),
    [
        # nothing stored: the manifest, without what the store owns
        (config_map(data={"k": "v"}), None, Create(config_map(data={"k": "v"}))),
        (
            config_map({"name": "a", "namespace": "default", "uid": "forged", "generation": 9}, data={}),
            None,
            Create(config_map(data={})),
        ),
        # what is stored already: nothing to write, even with status written by others
        (config_map(data={"k": "v"}), stored_map(data={"k": "v"}), Unchanged()),
        (config_map(data={"k": "v"}), stored_map(data={"k": "v"}, status={"ready": True}), Unchanged()),
        # user fields replaced; identity, the read revision and status kept
        (
            config_map(data={"k": "w"}),
            stored_map(data={"k": "v"}, status={"ready": True}),
            Update(stored_map(data={"k": "w"}, status={"ready": True})),
        ),
        # the manifest's own server fields are ignored, its status is taken
        (
            config_map({"name": "a", "namespace": "default", "uid": "forged", "generation": 9}, status={"p": "x"}),
            stored_map(),
            Update(stored_map(status={"p": "x"})),
        ),
        # owner references and finalizers the manifest omits are kept; the ones it writes replace them
        (
            config_map(data={"k": "w"}),
            config_map({**STORED_META, "finalizers": ["f"], "ownerReferences": [{"name": "o"}]}, data={}),
            Update(
                config_map({**STORED_META, "finalizers": ["f"], "ownerReferences": [{"name": "o"}]}, data={"k": "w"})
            ),
        ),
        (
            config_map({"name": "a", "namespace": "default", "finalizers": ["mine"]}),
            config_map({**STORED_META, "finalizers": ["f"]}),
            Update(config_map({**STORED_META, "finalizers": ["mine"]})),
        ),
        # an Instance's slot holders are agent state: kept for every slot that still exists, and said so
        (
            instance(FREE3),
            stored_instance({"x-0": "node-a", "x-1": "", "x-2": "C:v0:node-b"}),
            Unchanged(("kept 2 slot holders written by agents",)),
        ),
        (
            instance(None),
            stored_instance({"x-0": "node-a", "x-1": "", "x-2": ""}),
            Unchanged(("kept 1 slot holder written by agents",)),
        ),
        (
            instance({"x-0": "", "x-1": ""}, capacity=2),
            stored_instance({"x-0": "node-a", "x-1": "", "x-2": "node-b"}),
            Update(
                stored_instance({"x-0": "node-a", "x-1": ""}, capacity=2),
                ("kept 1 slot holder written by agents", "dropped 1 slot holder of slots the manifest removes"),
            ),
        ),
        # a manifest that already names the stored holder changes nothing and notes nothing
        (instance({**FREE3, "x-0": "node-a"}), stored_instance({**FREE3, "x-0": "node-a"}), Unchanged()),
        # no holders stored: the manifest's usage as written
        (instance(FREE3, capacity=3), stored_instance({"x-0": ""}, capacity=1), Update(stored_instance(FREE3))),
    ],
)
def test_plan_apply_follows_the_ownership_rules(
    manifest: dict[str, Any], stored: dict[str, Any] | None, expected: Create | Update | Unchanged
) -> None:
    assert plan_apply(manifest, stored) == expected


SERVER_WRITTEN = {
    "deletionTimestamp": "2000-01-01T00:00:00Z",
    "deletionGracePeriodSeconds": 30,
    "selfLink": "/api/v1/namespaces/default/configmaps/a",
    "managedFields": [{"manager": "forged"}],
    "uid": "forged",
    "generation": 9,
    "creationTimestamp": "2000-01-01T00:00:00Z",
}


@pytest.mark.parametrize("key", sorted(SERVER_WRITTEN))
def test_a_manifest_never_writes_server_owned_metadata(key: str) -> None:
    """The plan drops what `api.meta.SERVER_OWNED_METADATA` lists on create, and keeps the stored value on update."""
    assert key in SERVER_OWNED_METADATA
    forged = config_map({"name": "a", "namespace": "default", key: SERVER_WRITTEN[key]}, data={"k": "v"})
    assert plan_apply(forged, None) == Create(config_map(data={"k": "v"}))
    stored = stored_map(data={"k": "v"})
    stored["metadata"] = {**stored["metadata"], key: "as stored"}
    assert plan_apply(forged, stored) == Unchanged()


def test_a_pinned_resource_version_is_a_precondition() -> None:
    pinned = config_map({"name": "a", "namespace": "default", "resourceVersion": "5"}, data={"k": "w"})
    assert plan_apply(pinned, stored_map(data={"k": "v"})) == Update(stored_map(data={"k": "w"}))
    with pytest.raises(errors.Conflict, match="resourceVersion 4 is stale: the object is at 5"):
        plan_apply({**pinned, "metadata": {**pinned["metadata"], "resourceVersion": "4"}}, stored_map())
    with pytest.raises(errors.Conflict, match="resourceVersion 5 is given but the object does not exist"):
        plan_apply(pinned, None)


def test_plan_apply_never_changes_its_arguments() -> None:
    manifest, stored = instance(FREE3), stored_instance({**FREE3, "x-1": "node-a"})
    before = (repr(manifest), repr(stored))
    plan_apply(manifest, stored)
    assert (repr(manifest), repr(stored)) == before
