"""The DRA CEL environment (`api._cel`) against Kubernetes' own test vectors (tests/fixtures/dra/cel-conformance.yaml):
every expression gets Kubernetes' verdict: a match, no match, refused when compiled, or an evaluation error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.cel import vector_device
from devplace import errors
from devplace.api._cel import (
    MAX_COST,
    DeviceInput,
    Filter,
    Verdicts,
    compile_selector,
    exact_quantity,
    parse_semver,
    selector_problem,
)

CASES: list[dict[str, Any]] = yaml.safe_load(
    (Path(__file__).parent.parent / "fixtures" / "dra" / "cel-conformance.yaml").read_text()
)


_device = vector_device


@pytest.mark.parametrize("case", CASES, ids=[str(c["name"]) for c in CASES])
def test_every_kubernetes_vector_gets_kubernetes_verdict(case: dict[str, Any]) -> None:
    if "skip" in case:
        pytest.skip(case["skip"])
    expect = case["expect"]
    new = case.get("env") == "new"
    if "compile_error" in expect or "cost_error" in expect:
        problem = selector_problem(case["expression"], new=new)
        assert problem is not None, f"{case['name']}: compiled, Kubernetes refuses it"
        if "cost_error" in expect:
            assert "cost" in problem
        return
    selector = compile_selector(case["expression"], new=new)
    device = _device(case.get("device"))
    if "match_error" in expect:
        with pytest.raises(errors.Invalid):
            selector.matches(device)
        return
    assert selector.matches(device) is expect["match"]


def test_the_vectors_cover_every_case_of_kubernetes_dra_compile_test() -> None:
    names = {c["name"] for c in CASES if c["source"].startswith("D") and not c["source"].startswith("DS")}
    assert len(names) == 72  # TestCEL's 71 cases and TestInterrupt's expression


def test_a_missing_attribute_is_an_error_not_false() -> None:
    selector = compile_selector('device.attributes["devplace.io"].memory == "x"')
    with pytest.raises(errors.Invalid, match="no such key"):
        selector.matches(DeviceInput("devplace.io", {"attributes": {"other": {"string": "y"}}}))
    guarded = compile_selector('device.attributes["devplace.io"].?memory.orValue("") == "x"')
    assert guarded.matches(DeviceInput("devplace.io", {"attributes": {"other": {"string": "y"}}})) is False
    assert compile_selector('"memory" in device.attributes["nowhere.io"]').matches(DeviceInput("d", {})) is False


HOSTILE = {
    "deep": "(" * 200 + "true" + ")" * 200,
    "huge": " && ".join(["true"] * 3000),
    "over budget": "["
    + ",".join(["1"] * 100)
    + "].all(a, ["
    + ",".join(["1"] * 100)
    + "].all(b, ["
    + ",".join(["1"] * 100)
    + "].all(c, a + b + c > 0)))",
    "nested loops over the device": "device.attributes.all(d, device.attributes.all(e, device.attributes.all(f, "
    "device.attributes[d].all(g, device.attributes[e].all(h, g != h)))))",
}


@pytest.mark.parametrize("expression", HOSTILE.values(), ids=list(HOSTILE))
def test_a_hostile_selector_is_refused_when_compiled(expression: str) -> None:
    problem = selector_problem(expression)
    assert problem is not None
    assert any(word in problem for word in ("cost", "longer", "recursion", "nested", "depth"))


def test_a_selector_within_budget_reports_its_worst_case_cost() -> None:
    selector = compile_selector('device.attributes.exists_one(x, x == "dra.example.com")')
    assert 0 < selector.cost <= MAX_COST


def test_quantities_and_versions_parse_as_kubernetes_parses_them() -> None:
    assert exact_quantity("1.5Gi") == 1536 * 1024 * 1024
    assert exact_quantity("9999999999999999999999999999999999999G") == 10**46 - 10**9
    assert parse_semver("1.0.0-rc.1") < parse_semver("1.0.0")
    with pytest.raises(ValueError, match=r"Major\.Minor\.Patch"):
        parse_semver("v1.0")


def test_verdicts_are_kept_until_the_device_changes() -> None:
    verdicts = Verdicts()
    selector = compile_selector('device.attributes["d.io"].n > 1')
    before = DeviceInput("d.io", {"attributes": {"n": {"int": 2}}})
    assert verdicts.verdict(selector, before) is True
    assert verdicts.verdict(selector, DeviceInput("d.io", {"attributes": {"n": {"int": 2}}})) is True
    assert (verdicts.hits, verdicts.misses) == (1, 1)
    assert verdicts.verdict(selector, DeviceInput("d.io", {"attributes": {"n": {"int": 0}}})) is False
    assert verdicts.misses == 2


def test_a_filter_past_its_deadline_stops_with_unavailable() -> None:
    ticks = iter(range(100))
    device_filter = Filter(timeout=3, now=lambda: float(next(ticks)))
    selector = compile_selector("true")
    devices = [DeviceInput("d.io", {"attributes": {"n": {"int": i}}}) for i in range(10)]
    with pytest.raises(errors.Unavailable, match="timed out"):
        device_filter.select([selector], devices)
    assert len(Filter(timeout=0).select([selector], devices)) == 10


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_any_text_either_compiles_or_is_refused_with_a_reason(text: str) -> None:
    problem = selector_problem(text)
    assert problem is None or isinstance(problem, str)
