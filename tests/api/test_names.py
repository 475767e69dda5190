"""Name rules: DNS-1123 subdomains and labels, qualified label keys, label values; each refusal says why."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import api, errors
from devplace.api import _names as names


@pytest.mark.parametrize(
    "name", ["a", "0", "a-b", "a.b", "my-config.v1", "1-2", "akri-udev-video-8120fe", "a" * 253, "a." * 126 + "a"]
)
def test_dns1123_subdomain_accepts_kubernetes_object_names(name: str) -> None:
    assert names.dns1123_subdomain_problem(name) is None


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "must not be empty"),
        ("A", "lower case alphanumeric"),
        ("a_b", "lower case alphanumeric"),
        ("-a", "start and end with an alphanumeric"),
        ("a-", "start and end with an alphanumeric"),
        ("a..b", "lower case alphanumeric"),
        (".a", "lower case alphanumeric"),
        ("a.", "lower case alphanumeric"),
        ("a b", "lower case alphanumeric"),
        ("ä", "lower case alphanumeric"),
        ("a" * 254, "no more than 253 characters (got 254)"),
    ],
)
def test_dns1123_subdomain_refuses_with_the_reason(name: str, why: str) -> None:
    problem = names.dns1123_subdomain_problem(name)
    assert problem is not None
    assert why in problem


@pytest.mark.parametrize("name", ["default", "kube-system", "a", "a" * 63, "0abc"])
def test_dns1123_label_accepts_namespaces(name: str) -> None:
    assert names.dns1123_label_problem(name) is None


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "must not be empty"),
        ("a.b", "lower case alphanumeric characters or '-'"),
        ("Default", "lower case"),
        ("-x", "start and end"),
        ("a" * 64, "no more than 63 characters (got 64)"),
    ],
)
def test_dns1123_label_refuses_with_the_reason(name: str, why: str) -> None:
    problem = names.dns1123_label_problem(name)
    assert problem is not None
    assert why in problem


@pytest.mark.parametrize(
    "key", ["app", "App", "a_b.c-d", "example.com/app", "akri.sh/instance", "kubernetes.io/hostname", "a" * 63]
)
def test_label_key_accepts_qualified_names(key: str) -> None:
    assert names.label_key_problem(key) is None


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("", "name part"),
        ("/a", "prefix part must not be empty"),
        ("example.com/", "name part"),
        ("Example.com/a", "prefix part"),
        ("a/b/c", "prefix part"),
        ("a" * 64, "name part"),
        ("-a", "name part"),
        ("a_", "name part"),
        ("a b", "name part"),
        ("a" * 254 + "/b", "prefix part must be no more than 253"),
    ],
)
def test_label_key_refuses_with_the_part_and_reason(key: str, why: str) -> None:
    problem = names.label_key_problem(key)
    assert problem is not None
    assert why in problem
    assert repr(key) in problem


@pytest.mark.parametrize("value", ["", "v1", "a" * 63, "A.b-c_d", "1"])
def test_label_value_accepts_empty_and_qualified_values(value: str) -> None:
    assert names.label_value_problem(value) is None


@pytest.mark.parametrize("value", ["a" * 64, "-a", "a-", "a b", "a/b", "ä"])
def test_label_value_refuses_other_values(value: str) -> None:
    problem = names.label_value_problem(value)
    assert problem is not None
    assert "at most 63 characters" in problem


def test_require_dns1123_subdomain_returns_good_names_and_raises_invalid_naming_the_field() -> None:
    assert names.require_dns1123_subdomain("metadata.name", "web-1") == "web-1"
    with pytest.raises(errors.Invalid) as caught:
        names.require_dns1123_subdomain("metadata.name", "Web_1")
    assert caught.value.fields == (errors.FieldError("metadata.name", names.dns1123_subdomain_problem("Web_1") or ""),)
    assert str(caught.value).startswith("metadata.name: 'Web_1'")


def test_require_dns1123_label_raises_invalid_naming_the_field() -> None:
    assert names.require_dns1123_label("metadata.namespace", "default") == "default"
    with pytest.raises(errors.Invalid) as caught:
        names.require_dns1123_label("metadata.namespace", "a.b")
    assert caught.value.fields[0].path == "metadata.namespace"


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", fullmatch=True)


@given(st.lists(_label, min_size=1, max_size=4))
def test_dotted_dns1123_labels_are_subdomains(labels: list[str]) -> None:
    name = ".".join(labels)
    assert (names.dns1123_subdomain_problem(name) is None) == (len(name) <= 253)


@given(st.text(max_size=70))
def test_every_label_is_a_subdomain_and_checks_never_raise(text: str) -> None:
    if names.dns1123_label_problem(text) is None:
        assert names.dns1123_subdomain_problem(text) is None
        assert names.label_key_problem(text) is None
    names.label_value_problem(text)


def test_a_generated_suffix_uses_kubernetes_alphabet_and_is_the_same_for_the_same_seed() -> None:
    first = api.generated_suffix("uid-1/gpu")
    assert len(first) == 5
    assert set(first) <= set("bcdfghjklmnpqrstvwxz2456789")
    assert api.generated_suffix("uid-1/gpu") == first
    assert api.generated_suffix("uid-2/gpu") != first


def test_a_controller_reference_blocks_owner_deletion_and_leaves_out_an_unknown_uid() -> None:
    assert api.controller_reference("v1", "Pod", "p", "u-1") == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "controller": True,
        "blockOwnerDeletion": True,
        "uid": "u-1",
    }
    assert "uid" not in api.controller_reference("akri.sh/v0", "Configuration", "c", None)
