"""The patch engines: RFC 7386 and RFC 6902 by their own appendices' examples, strategic merge patch by Kubernetes'
merge keys and directives, and the media types a kind accepts."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.kubeapi import _patches as patches

# -- RFC 7386 --------------------------------------------------------------------------------------------------------

# RFC 7386, Appendix A: (original, patch, result)
RFC7386_EXAMPLES = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("original", "patch", "result"), RFC7386_EXAMPLES)
def test_merge_patch_gives_the_results_of_rfc_7386_appendix_a(original: Any, patch: Any, result: Any) -> None:
    before = copy.deepcopy(original)
    assert patches.merge_patch(original, patch) == result
    assert original == before  # the target is not changed in place


json_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)
# a merge patch cannot set a map member to null, so the target state holds none inside maps
no_null_values = st.recursive(
    st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=12,
)
objects = st.dictionaries(st.text(max_size=3), json_values, max_size=4)
targets = st.dictionaries(st.text(max_size=3), no_null_values, max_size=4)


@given(objects, targets)
def test_the_merge_patch_of_a_diff_applied_to_its_source_gives_its_target(old: Any, new: Any) -> None:
    assert patches.merge_patch(old, patches.merge_diff(old, new)) == new


@given(targets)
def test_the_merge_diff_of_an_object_with_itself_is_empty(obj: Any) -> None:
    assert patches.merge_diff(obj, copy.deepcopy(obj)) == {}


# -- RFC 6902 --------------------------------------------------------------------------------------------------------

# RFC 6902, Appendix A (A.1-A.12, A.14-A.16; A.13 is a JSON document with a duplicate key): (doc, ops, result)
RFC6902_EXAMPLES = [
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}], {"baz": "qux", "foo": "bar"}),
    ({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}], {"foo": ["bar", "qux", "baz"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}], {"foo": "bar"}),
    ({"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}], {"foo": ["bar", "baz"]}),
    ({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}], {"baz": "boo", "foo": "bar"}),
    (
        {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
        [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
        {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}},
    ),
    (
        {"foo": ["all", "grass", "cows", "eat"]},
        [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
        {"foo": ["all", "cows", "eat", "grass"]},
    ),
    (
        {"baz": "qux", "foo": ["a", 2, "c"]},
        [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
        {"baz": "qux", "foo": ["a", 2, "c"]},
    ),
    (
        {"foo": "bar"},
        [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
        {"foo": "bar", "child": {"grandchild": {}}},
    ),
    ({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}], {"foo": "bar", "baz": "qux"}),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}], {"/": 9, "~1": 10}),
    ({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}], {"foo": ["bar", ["abc", "def"]]}),
]

# RFC 6902, Appendix A's failures (A.9, A.12, A.15) and the rules of section 4: (doc, ops, index of the failing op)
RFC6902_FAILURES = [
    ({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}], 0),
    ({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}], 0),
    ({"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": "10"}], 0),
    ({"a": 1}, [{"op": "remove", "path": "/b"}], 0),
    ({"a": 1}, [{"op": "replace", "path": "/b", "value": 2}], 0),
    ({"a": [1]}, [{"op": "add", "path": "/a/2", "value": 2}], 0),
    ({"a": [1]}, [{"op": "add", "path": "/a/01", "value": 2}], 0),
    ({"a": [1]}, [{"op": "remove", "path": "/a/-"}], 0),
    ({"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/b/c"}], 0),
    ({"a": 1}, [{"op": "copy", "from": "/nope", "path": "/b"}], 0),
    ({"a": 1}, [{"op": "add", "path": "a", "value": 2}], 0),
    ({"a": 1}, [{"op": "test", "path": "/a", "value": True}], 0),  # a boolean is not the number 1
    ({"a": 1}, [{"op": "add", "path": "/b", "value": 2}, {"op": "test", "path": "/b", "value": 3}], 1),
]


@pytest.mark.parametrize(("doc", "ops", "result"), RFC6902_EXAMPLES)
def test_json_patch_gives_the_results_of_rfc_6902_appendix_a(doc: Any, ops: list[Any], result: Any) -> None:
    before = copy.deepcopy(doc)
    assert patches.json_patch(doc, patches.parse_json_patch(json.dumps(ops).encode())) == result
    assert doc == before


@pytest.mark.parametrize(("doc", "ops", "index"), RFC6902_FAILURES)
def test_a_json_patch_operation_that_cannot_apply_is_invalid_naming_its_index_and_path(
    doc: Any, ops: list[Any], index: int
) -> None:
    with pytest.raises(errors.Invalid) as raised:
        patches.json_patch(doc, ops)
    assert type(raised.value) is errors.Invalid
    assert raised.value.fields[0].path == f"[{index}]"
    assert f"operation {index}" in raised.value.message
    assert ops[index]["path"] in raised.value.message


def test_json_patch_is_all_or_nothing() -> None:
    doc = {"a": 1}
    with pytest.raises(errors.Invalid):
        patches.json_patch(doc, [{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/c"}])
    assert doc == {"a": 1}


def test_json_patch_replaces_the_whole_document_at_the_empty_pointer() -> None:
    assert patches.json_patch({"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}]) == {"b": 2}


def test_json_patch_copies_and_moves_to_the_end_of_an_array() -> None:
    doc = {"a": [1, 2], "b": {"c": 3}}
    ops = [{"op": "copy", "from": "/b/c", "path": "/a/-"}, {"op": "move", "from": "/a/0", "path": "/a/-"}]
    assert patches.json_patch(doc, ops) == {"a": [2, 3, 1], "b": {"c": 3}}


pointers = st.lists(st.text(alphabet="ab/~01", max_size=3), min_size=1, max_size=3)


@given(targets, st.text(alphabet="ab/~", max_size=4), no_null_values)
def test_a_test_of_the_value_a_pointer_names_passes_and_of_any_other_value_fails(
    doc: dict[str, Any], key: str, other: Any
) -> None:
    doc = {**doc, key: {"inner": other}}
    pointer = "/" + key.replace("~", "~0").replace("/", "~1") + "/inner"
    assert patches.json_patch(doc, [{"op": "test", "path": pointer, "value": other}]) == doc
    different = [other, 1] if not isinstance(other, list) else "not the list"
    with pytest.raises(errors.Invalid):
        patches.json_patch(doc, [{"op": "test", "path": pointer, "value": different}])


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"op": "add"}', "JSON array"),
        (b"[1]", "must be an object"),
        (b'[{"op": "frobnicate", "path": "/a"}]', "not an operation"),
        (b'[{"op": "add", "path": "/a"}]', "needs 'value'"),
        (b'[{"op": "move", "path": "/a"}]', "'from'"),
        (b'[{"op": "remove", "path": 3}]', "'path'"),
        (b"[{oops", "not valid JSON"),
        (b'[{"op": "add", "path": "/a", "value": NaN}]', "not valid JSON"),
    ],
)
def test_a_json_patch_body_that_is_no_array_of_operations_is_malformed(body: bytes, says: str) -> None:
    with pytest.raises(errors.Malformed) as raised:
        patches.parse_json_patch(body)
    assert says in raised.value.message


def test_a_json_patch_of_more_operations_than_kubernetes_allows_is_too_large() -> None:
    ops = [{"op": "test", "path": "", "value": {}}] * (patches.MAX_JSON_PATCH_OPERATIONS + 1)
    with pytest.raises(errors.TooLarge):
        patches.parse_json_patch(json.dumps(ops).encode())


# -- media types -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/merge-patch+json", patches.MERGE_PATCH),
        ("application/json-patch+json; charset=utf-8", patches.JSON_PATCH),
        ("Application/Strategic-Merge-Patch+JSON", patches.STRATEGIC_MERGE_PATCH),
        ("application/apply-patch+yaml", patches.APPLY_PATCH),
    ],
)
def test_patch_type_reads_the_content_type(content_type: str, expected: str) -> None:
    assert patches.patch_type(content_type, strategic=True) == expected


@pytest.mark.parametrize("content_type", ["application/json", "text/plain", None, "application/merge-patch"])
def test_an_unknown_patch_type_is_415_listing_the_accepted_ones(content_type: str | None) -> None:
    with pytest.raises(errors.UnsupportedMediaType) as raised:
        patches.patch_type(content_type, strategic=True)
    assert raised.value.message == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, "
        "application/apply-patch+yaml"
    )


def test_a_kind_without_strategic_merge_refuses_it_and_does_not_list_it() -> None:
    with pytest.raises(errors.UnsupportedMediaType) as raised:
        patches.patch_type("application/strategic-merge-patch+json", strategic=False)
    assert "strategic" not in raised.value.message
    assert "application/apply-patch+yaml" in raised.value.message


# -- strategic merge patch -------------------------------------------------------------------------------------------


def deployment(*containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": list(containers), **spec}},
        },
    }


def pod_spec_patch(**fields: Any) -> dict[str, Any]:
    return {"spec": {"template": {"spec": fields}}}


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def smp(original: dict[str, Any], patch: dict[str, Any], kind: str = "Deployment") -> dict[str, Any]:
    before = copy.deepcopy(original)
    out = patches.strategic_merge(original, patch, kind)
    assert original == before
    return out


C_WEB = {"name": "web", "image": "nginx:1", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
C_LOG = {"name": "log", "image": "busybox"}


def test_containers_merge_by_name_and_an_unnamed_image_change_touches_only_that_container() -> None:
    out = smp(deployment(C_WEB, C_LOG), pod_spec_patch(containers=[{"name": "log", "image": "busybox:2"}]))
    assert pod_spec(out)["containers"] == [C_WEB, {"name": "log", "image": "busybox:2"}]


def test_a_container_the_patch_adds_comes_first_without_an_element_order_as_in_kubernetes() -> None:
    out = smp(deployment(C_WEB), pod_spec_patch(containers=[C_LOG]))
    assert [c["name"] for c in pod_spec(out)["containers"]] == ["log", "web"]


def test_set_element_order_places_the_items_as_kubectl_asks() -> None:
    patch = pod_spec_patch(**{"$setElementOrder/containers": [{"name": "web"}, {"name": "log"}], "containers": [C_LOG]})
    out = smp(deployment(C_WEB), patch)
    assert [c["name"] for c in pod_spec(out)["containers"]] == ["web", "log"]
    reorder = pod_spec_patch(**{"$setElementOrder/containers": [{"name": "log"}, {"name": "web"}]})
    assert [c["name"] for c in pod_spec(smp(out, reorder))["containers"]] == ["log", "web"]


def test_env_merges_by_name_and_null_in_an_item_deletes_its_field() -> None:
    patch = pod_spec_patch(containers=[{"name": "web", "env": [{"name": "B", "value": None, "valueFrom": {}}]}])
    out = smp(deployment(C_WEB), patch)
    assert pod_spec(out)["containers"][0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": {}}]


def test_a_delete_directive_removes_the_item_with_that_merge_key() -> None:
    patch = pod_spec_patch(containers=[{"name": "web", "env": [{"name": "A", "$patch": "delete"}]}])
    assert pod_spec(smp(deployment(C_WEB), patch))["containers"][0]["env"] == [{"name": "B", "value": "2"}]


def test_a_replace_directive_in_a_list_replaces_the_whole_list() -> None:
    patch = pod_spec_patch(containers=[{"$patch": "replace"}, {"name": "only", "image": "x"}])
    assert pod_spec(smp(deployment(C_WEB, C_LOG), patch))["containers"] == [{"name": "only", "image": "x"}]


def test_a_replace_directive_in_a_map_replaces_the_map() -> None:
    patch = {"metadata": {"labels": {"$patch": "replace", "tier": "front"}}}
    assert smp(deployment(C_WEB), patch)["metadata"]["labels"] == {"tier": "front"}


def test_container_ports_merge_by_container_port_and_service_ports_by_port() -> None:
    web = {"name": "web", "image": "nginx", "ports": [{"containerPort": 80, "name": "http"}]}
    patch = pod_spec_patch(containers=[{"name": "web", "ports": [{"containerPort": 80, "name": "www"}]}])
    assert pod_spec(smp(deployment(web), patch))["containers"][0]["ports"] == [{"containerPort": 80, "name": "www"}]
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 8443}]},
    }
    out = smp(service, {"spec": {"ports": [{"port": 443, "targetPort": 9443}]}}, "Service")
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 8080}, {"port": 443, "targetPort": 9443}]


def test_volumes_merge_by_name_and_retain_keys_clears_the_old_volume_source() -> None:
    spec = {"volumes": [{"name": "data", "emptyDir": {}}, {"name": "conf", "configMap": {"name": "c"}}]}
    patch = pod_spec_patch(volumes=[{"name": "data", "hostPath": {"path": "/d"}, "$retainKeys": ["hostPath", "name"]}])
    out = smp(deployment(C_WEB, **spec), patch)
    assert pod_spec(out)["volumes"] == [{"name": "data", "hostPath": {"path": "/d"}}, spec["volumes"][1]]


def test_retain_keys_must_list_every_field_the_patch_sets() -> None:
    patch = pod_spec_patch(volumes=[{"name": "data", "hostPath": {"path": "/d"}, "$retainKeys": ["name"]}])
    with pytest.raises(errors.Malformed, match="retainKeys"):
        smp(deployment(C_WEB, volumes=[{"name": "data", "emptyDir": {}}]), patch)


def test_volume_mounts_merge_by_mount_path() -> None:
    web = {"name": "web", "image": "nginx", "volumeMounts": [{"mountPath": "/a", "name": "x"}]}
    patch = pod_spec_patch(containers=[{"name": "web", "volumeMounts": [{"mountPath": "/b", "name": "y"}]}])
    mounts = pod_spec(smp(deployment(web), patch))["containers"][0]["volumeMounts"]
    assert sorted(m["mountPath"] for m in mounts) == ["/a", "/b"]


def test_a_list_without_a_merge_strategy_is_replaced() -> None:
    web = {"name": "web", "image": "nginx", "args": ["a", "b"]}
    patch = pod_spec_patch(containers=[{"name": "web", "args": ["c"]}], tolerations=[{"key": "k"}])
    out = smp(deployment(web, tolerations=[{"key": "old"}]), patch)
    assert pod_spec(out)["containers"][0]["args"] == ["c"]
    assert pod_spec(out)["tolerations"] == [{"key": "k"}]


def test_finalizers_merge_as_a_set_and_delete_from_primitive_list_removes_values() -> None:
    obj = deployment(C_WEB)
    obj["metadata"]["finalizers"] = ["a", "b"]
    out = smp(obj, {"metadata": {"finalizers": ["c", "a"]}})
    assert out["metadata"]["finalizers"] == ["c", "a", "b"]
    out = smp(out, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert out["metadata"]["finalizers"] == ["c", "b"]


def test_a_map_delete_directive_and_null_remove_fields() -> None:
    out = smp(deployment(C_WEB), {"spec": {"replicas": None, "selector": {"$patch": "delete"}}})
    assert "replicas" not in out["spec"]
    assert out["spec"]["selector"] == {}


@pytest.mark.parametrize(
    ("patch", "error"),
    [
        ({"spec": {"$patch": "explode"}}, errors.Malformed),
        (pod_spec_patch(containers=[{"$patch": "merge"}]), errors.Malformed),
        (pod_spec_patch(containers=[{"$patch": "delete"}]), errors.Malformed),
        (pod_spec_patch(containers=[{"image": "no name"}]), errors.Invalid),
        (pod_spec_patch(containers=["web"]), errors.Invalid),
        ({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}}, errors.Malformed),
        ({"spec": {"$setElementOrder/x": {}}}, errors.Malformed),
    ],
)
def test_a_broken_directive_or_an_item_without_its_merge_key_is_refused(
    patch: dict[str, Any], error: type[errors.Invalid]
) -> None:
    with pytest.raises(error):
        smp(deployment(C_WEB), patch)


def test_strategic_merge_is_refused_for_devplace_kinds_as_kubernetes_refuses_it_for_custom_resources() -> None:
    config = {"apiVersion": "akri.sh/v0", "kind": "Configuration", "metadata": {"name": "c"}, "spec": {}}
    with pytest.raises(errors.UnsupportedMediaType):
        patches.strategic_merge(config, {"spec": {"capacity": 2}}, "Configuration")


@given(targets, objects)
def test_a_strategic_merge_of_plain_maps_is_a_merge_patch(old: dict[str, Any], patch: dict[str, Any]) -> None:
    """Fields without merge keys merge as RFC 7386 says (here under a ConfigMap's `data`-free top level)."""
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "x": old}
    plain = {k: v for k, v in patch.items() if not k.startswith("$")}
    assert patches.strategic_merge(doc, {"x": plain}, "ConfigMap") == patches.merge_patch(doc, {"x": plain})
