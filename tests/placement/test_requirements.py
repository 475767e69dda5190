"""Hpa resource requirements (`devplace.placement._requirements`): both dialects state one `Need`, amounts become
exact quantities, and every error names the field as the client spelled it."""

from __future__ import annotations

from typing import Any

import pytest

from devplace import errors
from devplace.api._quantity import Quantity
from devplace.placement._requirements import (
    EmcoRequirementBody,
    HpaRequirementBody,
    Need,
    SeedRequirementBody,
    requirement_quantities,
)


def req(**spec: Any) -> HpaRequirementBody:
    return HpaRequirementBody.parse({"metadata": {"name": "r"}, "spec": spec})


@pytest.mark.parametrize(
    ("spec", "requests", "limits"),
    [
        ({"name": "cpu", "requests": 4, "limits": 4}, "4", "4"),
        ({"name": "cpu", "requests": 500, "units": "m"}, "500m", None),
        ({"name": "cpu", "requests": "1.5"}, "1500m", None),
        ({"name": "memory", "requests": 1000, "limits": 1000, "units": "MB"}, "1G", "1G"),
        ({"name": "memory", "requests": 200}, "200M", None),  # MB by default (seed 004)
        ({"name": "memory", "requests": 2, "units": "GiB"}, "2Gi", None),
        ({"name": "memory", "requests": "1.5Gi"}, "1536Mi", None),
        ({"name": "nvidia.com/gpu", "limits": 1}, None, "1"),
        ({"name": "intel.com/qat", "requests": 1, "limits": 1}, "1", "1"),
        ({"name": "hugepages-2Mi", "requests": 4, "limits": 4, "units": "Mi"}, "4Mi", "4Mi"),
    ],
)
def test_amounts_become_exact_quantities(spec: dict[str, Any], requests: str | None, limits: str | None) -> None:
    got = requirement_quantities(req(**spec).need)
    assert got == (None if requests is None else Quantity(requests), None if limits is None else Quantity(limits))


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"name": "cpu", "requests": 4, "limits": 2}, "spec.requests", "requests 4 exceed limits 2"),
        ({"name": "cpu"}, "spec.requests", "requests or limits is required"),
        ({"name": "cpu", "requests": 0}, "spec.requests", "must be positive"),
        ({"name": "cpu", "requests": "1K"}, "spec.requests", "unknown suffix 'K'"),
        ({"name": "cpu", "requests": 1, "units": "MB"}, "spec.units", "unknown unit 'MB' for cpu"),
        ({"name": "memory", "requests": 1, "units": "parsecs"}, "spec.units", "unknown unit 'parsecs'"),
        ({"name": "memory", "requests": "1Gi", "units": "MB"}, "spec.units", "already carries its unit"),
        ({"name": "nvidia.com/gpu", "requests": 1, "units": "MB"}, "spec.units", "counted in whole units"),
        ({"name": "intel.com/qat", "requests": 1, "limits": 2}, "spec.limits", "cannot be overcommitted"),
        ({"name": "cpu", "requests": 1, "value": "x"}, "spec.value", "forbidden for an allocatable resource"),
        ({"name": "turbo", "allocatable": False}, "spec.value", "required for a non-allocatable resource"),
        ({"name": "turbo", "allocatable": False, "value": "on", "units": "MB"}, "spec.units", "forbidden"),
        ({"name": "turbo", "value": "not ok!"}, "spec.value", "must be at most 63 characters"),
        ({"name": "Bad Name", "requests": 1}, "spec.name", "name part must be"),
    ],
)
def test_requirement_rules_name_the_field(spec: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        req(**spec)
    assert info.value.fields[0].path == field
    assert reason in info.value.fields[0].reason


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": 1, "weight": 11}}, "spec.weight"),
        ({"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": 1, "weight": 0}}, "spec.weight"),
        ({"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": True}}, "spec.requests"),
        ({"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": 1.5}}, "spec.requests"),
        ({"metadata": {"name": "r"}, "spec": {"name": "cpu", "requests": 1, "limit": 2}}, "spec.limit"),
        ({"metadata": {"name": "-r"}, "spec": {"name": "cpu", "requests": 1}}, "metadata.name"),
        ({"metadata": {"name": "r" * 129}, "spec": {"name": "cpu", "requests": 1}}, "metadata.name"),
        (
            {"metadata": {"name": "r", "description": "d" * 1025}, "spec": {"name": "cpu", "requests": 1}},
            "metadata.description",
        ),
        (
            {"metadata": {"name": "r", "userData1": "u" * 513}, "spec": {"name": "cpu", "requests": 1}},
            "metadata.userData1",
        ),
    ],
)
def test_schema_violations_name_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        HpaRequirementBody.parse(body)
    assert info.value.fields[0].path == field


SEED = "seed"


EMCO21 = "21.x"


EMCO22 = "22.x"


REQUIREMENTS: list[tuple[str, dict[str, Any], Need]] = [
    (
        SEED,
        {"mandatory": True, "allocatable": True, "name": "cpu", "requests": 4, "limits": 4},
        Need("cpu", True, None, True, 4, 4),
    ),
    (
        SEED,
        {"mandatory": False, "weight": 9, "allocatable": True, "name": "nvidia.com/gpu", "limits": 1},
        Need("nvidia.com/gpu", False, 9, True, None, 1),
    ),
    (SEED, {"name": "turbo", "value": "on"}, Need("turbo", True, None, False, value="on")),
    (
        EMCO22,
        {
            "allocatable": True,
            "mandatory": True,
            "weight": 1,
            "resource": {"name": "cpu", "requests": 10, "limits": 10},
        },
        Need("cpu", True, 1, True, 10, 10, prefix="spec.resource"),
    ),
    (
        EMCO21,
        {"allocatable": True, "resource": {"name": "memory", "requests": 1000, "units": "MB"}},
        Need("memory", True, None, True, 1000, None, "MB", prefix="spec.resource"),
    ),
    (
        EMCO21,
        {
            "allocatable": False,
            "mandatory": True,
            "weight": 1,
            "resource": {"key": "feature.node.kubernetes.io/intel_qat", "value": "true"},
        },
        Need(
            "feature.node.kubernetes.io/intel_qat",
            True,
            1,
            False,
            value="true",
            prefix="spec.resource",
            name_field="key",
        ),
    ),
]


@pytest.mark.parametrize(
    ("dialect", "spec", "need"), REQUIREMENTS, ids=[f"{d}-{i}" for i, (d, _, _) in enumerate(REQUIREMENTS)]
)
def test_every_requirement_spelling_states_the_same_need(dialect: str, spec: dict[str, Any], need: Need) -> None:
    body = HpaRequirementBody.parse({"metadata": {"name": "r"}, "spec": spec})
    assert isinstance(body, SeedRequirementBody if dialect == SEED else EmcoRequirementBody)
    assert body.need == need


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        (
            {"allocatable": True, "resource": {"name": "cpu", "requests": 4, "limits": 2}},
            "spec.resource.requests",
            "exceed",
        ),
        ({"allocatable": True, "resource": {"name": "cpu"}}, "spec.resource.requests", "requests or limits"),
        ({"allocatable": True, "resource": {"name": "cpu", "requests": True}}, "spec.resource.requests", "boolean"),
        (
            {"allocatable": True, "resource": {"name": "cpu", "requests": 1, "units": "MB"}},
            "spec.resource.units",
            "unknown unit",
        ),
        ({"allocatable": True, "resource": {"key": "a", "value": "b"}}, "spec.resource", "allocatable is true"),
        ({"allocatable": False, "resource": {"name": "cpu", "requests": 1}}, "spec.resource", "allocatable is false"),
        ({"allocatable": False, "resource": {"key": "a"}}, "spec.resource.value", "Field required"),
        ({"allocatable": False, "resource": {"key": "a", "value": "not ok"}}, "spec.resource.value", "at most 63"),
        ({"allocatable": False, "resource": {"key": "bad key", "value": "v"}}, "spec.resource.key", "name part"),
        ({"resource": {"name": "cpu", "requests": 1}}, "spec.allocatable", "Field required"),
        ({"allocatable": True, "weight": 11, "resource": {"name": "cpu", "requests": 1}}, "spec.weight", "less than"),
    ],
)
def test_emco_requirement_errors_name_the_field_as_sent(spec: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        HpaRequirementBody.parse({"metadata": {"name": "r"}, "spec": spec})
    assert info.value.fields[0].path == field
    assert reason in info.value.fields[0].reason
