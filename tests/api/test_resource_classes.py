"""The ResourceClass model (seed 003): terms are matchExpressions or a classRef, a strategy and a status are optional,
and every refused field is named by its path."""

from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.api import normalize

GPU = {"key": "Kind", "operator": "In", "values": ["nvidia-gpu"]}


def resource_class(*terms: Any, name: str = "gpu", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "ResourceClass",
        "metadata": {"name": name},
        "spec": {"resourceSelector": list(terms), **spec},
    }


def refusal(obj: dict[str, Any]) -> tuple[list[str], str]:
    with pytest.raises(errors.Invalid) as caught:
        normalize(obj)
    return [f.path for f in caught.value.fields], caught.value.message


def test_a_class_of_expressions_references_a_strategy_and_a_status_loads_as_written() -> None:
    obj = resource_class(
        {"matchExpressions": [GPU, {"key": "memory", "operator": "GtEq", "values": ["30G"]}]},
        {"classRef": "fast.nic"},
        selectionStrategy="binpack",
    )
    obj["status"] = {"allocatable": "4", "requested": "1"}
    assert normalize(obj) == obj


@pytest.mark.parametrize("strategy", ["firstFit", "binpack", "spread", "optimal"])
def test_each_selection_strategy_is_accepted(strategy: str) -> None:
    assert normalize(resource_class({"classRef": "x"}, selectionStrategy=strategy))["spec"]["selectionStrategy"] == (
        strategy
    )


E0 = "spec.resourceSelector[0].matchExpressions[0]"


@pytest.mark.parametrize(
    ("term", "path", "reason"),
    [
        (
            {"matchExpressions": [{"key": "m", "operator": "Gt", "values": ["1", "2"]}]},
            f"{E0}.values",
            "Gt needs exactly one value, got 2",
        ),
        (
            {"matchExpressions": [{"key": "m", "operator": "Exists", "values": ["1"]}]},
            f"{E0}.values",
            "Exists takes no values, got 1",
        ),
        (
            {"matchExpressions": [{"key": "m", "operator": "In"}]},
            f"{E0}.values",
            "In needs at least one value",
        ),
        (
            {"matchExpressions": [{"key": "m", "operator": "LtEq", "values": ["lots"]}]},
            f"{E0}.values",
            "LtEq needs a value that orders: a quantity (30G, 32Gi), a quantity with a unit (40GBPS) or a version "
            "(1.2.10); 'lots' is none of these",
        ),
        (
            {"matchExpressions": [{"key": "m", "operator": "Like", "values": ["x"]}]},
            f"{E0}.operator",
            "Input should be 'In', 'NotIn', 'Eq', 'Exists', 'DoesNotExist', 'Gt', 'GtEq', 'Lt' or 'LtEq'",
        ),
        (
            {"matchExpressions": [{"key": "", "operator": "Exists"}]},
            f"{E0}.key",
            "String should have at least 1 character",
        ),
        (
            {"classRef": "fast.nic", "matchExpressions": [GPU]},
            "spec.resourceSelector[0]",
            "a term is either matchExpressions or classRef, not both",
        ),
        (
            {"classRef": "fast.nic", "matchExpressions": []},
            "spec.resourceSelector[0]",
            "a term is either matchExpressions or classRef, not both",
        ),
        (
            {},
            "spec.resourceSelector[0]",
            "a term needs classRef or non-empty matchExpressions (an empty term matches nothing)",
        ),
        (
            {"matchExpressions": []},
            "spec.resourceSelector[0]",
            "a term needs classRef or non-empty matchExpressions (an empty term matches nothing)",
        ),
        (
            {"classRef": "Fast_NIC"},
            "spec.resourceSelector[0].classRef",
            "'Fast_NIC' must consist of lower case alphanumeric characters, '-' or '.', and must start and end with "
            "an alphanumeric character",
        ),
        ({"matchLabels": {"a": "b"}}, "spec.resourceSelector[0].matchLabels", "Extra inputs are not permitted"),
    ],
)
def test_a_bad_selector_term_is_refused_naming_its_field(term: dict[str, Any], path: str, reason: str) -> None:
    assert refusal(resource_class(term)) == ([path], f"{path}: {reason}")


def test_the_second_bad_term_is_named_by_its_own_index() -> None:
    paths, _ = refusal(resource_class({"classRef": "a"}, {"matchExpressions": [GPU, {"key": "m", "operator": "Gt"}]}))
    assert paths == ["spec.resourceSelector[1].matchExpressions[1].values"]


def test_an_unknown_selection_strategy_is_refused() -> None:
    assert refusal(resource_class({"classRef": "a"}, selectionStrategy="random")) == (
        ["spec.selectionStrategy"],
        "spec.selectionStrategy: Input should be 'firstFit', 'binpack', 'spread' or 'optimal'",
    )


def test_a_class_name_must_be_a_dns_subdomain() -> None:
    paths, message = refusal(resource_class({"classRef": "a"}, name="Big_GPU"))
    assert paths == ["metadata.name"]
    assert message.startswith("metadata.name: 'Big_GPU' must consist of lower case alphanumeric characters")


@pytest.mark.parametrize(
    ("status", "path", "reason"),
    [
        ({"allocatable": "many"}, "status.allocatable", "'many' is not a quantity"),
        ({"requested": 3}, "status.requested", "must be a string, not number 3"),
        ({"free": "1"}, "status.free", "Extra inputs are not permitted"),
    ],
)
def test_the_status_holds_allocatable_and_requested_quantities_as_strings(
    status: dict[str, Any], path: str, reason: str
) -> None:
    assert refusal({**resource_class({"classRef": "a"}), "status": status}) == ([path], f"{path}: {reason}")
