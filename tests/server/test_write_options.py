"""Kubernetes' write options: dryRun, fieldValidation and DeleteOptions, pure and over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from devplace import errors
from devplace.server._app import create_app
from devplace.server._requests import delete_options, dry_run, field_validation
from devplace.store import MemoryStore
from tests.servers import serve_app

CONFIGS = "/apis/devplace.io/v1alpha1/namespaces/default/configurations"


def config(name: str = "cam", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "devplace.io/v1alpha1",
        "kind": "Configuration",
        "metadata": {"name": name},
        "spec": {"discoveryHandler": {"name": "debugEcho"}, **spec},
    }


# -- pure -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("values", "dry"), [([], False), (["All"], True), (["All", "All"], True)])
def test_dry_run_is_all_or_nothing(values: list[str], dry: bool) -> None:
    assert dry_run(values) is dry


@pytest.mark.parametrize("values", [["all"], ["All", "Some"], [""]])
def test_any_other_dry_run_value_is_malformed_naming_it(values: list[str]) -> None:
    with pytest.raises(errors.Malformed) as caught:
        dry_run(values)
    assert caught.value.fields[0].path == "dryRun"


@pytest.mark.parametrize(
    ("raw", "mode"), [(None, "Strict"), ("", "Strict"), ("Strict", "Strict"), ("Warn", "Warn"), ("Ignore", "Ignore")]
)
def test_field_validation_defaults_to_strict(raw: str | None, mode: str) -> None:
    assert field_validation(raw) == mode


def test_an_unknown_field_validation_is_malformed_naming_it() -> None:
    with pytest.raises(errors.Malformed) as caught:
        field_validation("strict")
    assert caught.value.fields[0].path == "fieldValidation"


def test_delete_options_come_from_the_body_then_the_query() -> None:
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground", "gracePeriodSeconds": 0}
    query = {"propagationPolicy": "Orphan", "gracePeriodSeconds": "30", "resourceVersion": "4"}
    options = delete_options(body, query, ["All"])
    assert (options.propagation_policy, options.grace_period_seconds, options.dry_run) == ("Foreground", 0, True)
    assert options.preconditions.resource_version == "4"
    from_query = delete_options(None, query, [])
    assert (from_query.propagation_policy, from_query.grace_period_seconds, from_query.dry_run) == ("Orphan", 30, False)
    assert delete_options({"orphanDependents": True}, {}, []).propagation_policy == "Orphan"


@pytest.mark.parametrize(
    ("body", "query", "field"),
    [
        ({"propagationPolicy": "Cascade"}, {}, "propagationPolicy"),
        ({}, {"propagationPolicy": "background"}, "propagationPolicy"),
        ({"propagationPolicy": "Orphan", "orphanDependents": False}, {}, "propagationPolicy"),
        ({"gracePeriodSeconds": -1}, {}, "gracePeriodSeconds"),
        ({}, {"gracePeriodSeconds": "soon"}, "gracePeriodSeconds"),
        ({"orphanDependents": "yes please"}, {}, "orphanDependents"),
        ({"kind": "Pod"}, {}, "kind"),
        ({"dryRun": "All"}, {}, "dryRun"),
        ({"dryRun": ["Everything"]}, {}, "dryRun"),
    ],
)
def test_bad_delete_options_are_refused_naming_the_field(
    body: dict[str, Any], query: dict[str, str], field: str
) -> None:
    with pytest.raises(errors.Invalid) as caught:
        delete_options(body, query, [])
    assert caught.value.fields[0].path == field


# -- over HTTP ------------------------------------------------------------------------------------------------------


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    async with (
        serve_app(create_app(memory_store, fleet_api=False)) as url,
        httpx2.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield client


async def test_a_dry_run_create_answers_the_would_be_object_and_stores_nothing(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    response = await api.post(CONFIGS, params={"dryRun": "All"}, json=config())
    assert response.status_code == 201, response.text
    meta = response.json()["metadata"]
    assert meta["uid"]
    assert meta["creationTimestamp"]
    assert "resourceVersion" not in meta
    assert await memory_store.revision() == 0
    assert (await api.get(f"{CONFIGS}/cam")).status_code == 404


async def test_a_dry_run_is_validated_admitted_and_checked_like_a_write(api: httpx2.AsyncClient) -> None:
    invalid = await api.post(CONFIGS, params={"dryRun": "All"}, json=config(capacity=0))
    assert invalid.status_code == 422
    created = (await api.post(CONFIGS, json=config())).json()
    taken = await api.post(CONFIGS, params={"dryRun": "All"}, json=config())
    assert (taken.status_code, taken.json()["reason"]) == (409, "AlreadyExists")
    changed = {**created, "spec": {**created["spec"], "capacity": 3}}
    dry_update = await api.put(f"{CONFIGS}/cam", params={"dryRun": "All"}, json=changed)
    assert dry_update.status_code == 200, dry_update.text
    assert (dry_update.json()["spec"]["capacity"], dry_update.json()["metadata"]["generation"]) == (3, 2)
    stale = {**changed, "metadata": {**changed["metadata"], "resourceVersion": "99"}}
    assert (await api.put(f"{CONFIGS}/cam", params={"dryRun": "All"}, json=stale)).status_code == 409
    assert (await api.get(f"{CONFIGS}/cam")).json() == created
    bad = await api.post(CONFIGS, params={"dryRun": "Yes"}, json=config("other"))
    assert (bad.status_code, bad.json()["details"]["causes"][0]["field"]) == (400, "dryRun")


async def test_a_dry_run_delete_checks_preconditions_and_deletes_nothing(api: httpx2.AsyncClient) -> None:
    created = (await api.post(CONFIGS, json=config())).json()
    dry = await api.request("DELETE", f"{CONFIGS}/cam", params={"dryRun": "All"})
    assert dry.json() == created
    stale = await api.request(
        "DELETE", f"{CONFIGS}/cam", json={"dryRun": ["All"], "preconditions": {"uid": "someone-else"}}
    )
    assert stale.status_code == 409
    assert (await api.get(f"{CONFIGS}/cam")).status_code == 200


async def test_delete_takes_a_propagation_policy_and_grace_period_and_deletes_at_once(api: httpx2.AsyncClient) -> None:
    await api.post(CONFIGS, json=config())
    body = {"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background", "gracePeriodSeconds": 30}
    response = await api.request("DELETE", f"{CONFIGS}/cam", json=body)
    assert response.status_code == 200, response.text
    assert (await api.get(f"{CONFIGS}/cam")).status_code == 404
    await api.post(CONFIGS, json=config())
    refused = await api.request("DELETE", f"{CONFIGS}/cam", params={"propagationPolicy": "Everything"})
    assert (refused.status_code, refused.json()["details"]["causes"][0]["field"]) == (422, "propagationPolicy")
    assert (await api.get(f"{CONFIGS}/cam")).status_code == 200


async def test_unknown_fields_are_refused_by_default_and_under_strict(api: httpx2.AsyncClient) -> None:
    body = config()
    body["spec"]["colour"] = "blue"
    for params in ({}, {"fieldValidation": "Strict"}):
        response = await api.post(CONFIGS, params=params, json=body)
        assert response.status_code == 422, response.text
        assert response.json()["details"]["causes"][0]["field"] == "spec.colour"


@pytest.mark.parametrize(("mode", "warned"), [("Warn", True), ("Ignore", False)])
async def test_unknown_fields_are_dropped_under_warn_and_ignore_with_a_warning_under_warn(
    api: httpx2.AsyncClient, mode: str, warned: bool
) -> None:
    body = config()
    body["spec"]["colour"] = "blue"
    body["spec"]["discoveryHandler"]["flavour"] = "x"
    body["extra"] = 1
    response = await api.post(CONFIGS, params={"fieldValidation": mode}, json=body)
    assert response.status_code == 201, response.text
    stored = (await api.get(f"{CONFIGS}/cam")).json()
    assert "colour" not in stored["spec"]
    assert "extra" not in stored
    assert stored["spec"]["discoveryHandler"] == {"name": "debugEcho"}
    warnings = response.headers.get_list("warning")
    if warned:
        assert sorted(warnings) == [
            '299 - "unknown field \\"extra\\""',
            '299 - "unknown field \\"spec.colour\\""',
            '299 - "unknown field \\"spec.discoveryHandler.flavour\\""',
        ]
    else:
        assert warnings == []


async def test_dropping_unknown_fields_still_refuses_what_is_invalid(api: httpx2.AsyncClient) -> None:
    body = config(capacity=0)
    body["spec"]["colour"] = "blue"
    response = await api.post(CONFIGS, params={"fieldValidation": "Ignore"}, json=body)
    assert response.status_code == 422
    assert [c["field"] for c in response.json()["details"]["causes"]] == ["spec.capacity"]
