"""Lists as Kubernetes serves them: paging with limit/continue, resourceVersion semantics; pure parts, then HTTP."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.server import _lists as lists
from devplace.server._app import create_app
from devplace.store import EncodedObject, EncodedPage, MemoryStore
from tests.servers import serve_app

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
ALL_CONFIGMAPS = "/api/v1/configmaps"


def configmap(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"k": name},
    }


# -- pure -----------------------------------------------------------------------------------------------------------


@given(st.integers(0, 2**63 - 1), st.text(max_size=20), st.text(min_size=1, max_size=40))
def test_a_continue_token_names_the_revision_and_key_it_was_made_for(revision: int, ns: str, name: str) -> None:
    token = lists.encode_continue(revision, ns, name)
    assert lists.decode_continue(token) == lists.Continue(revision, ns, name)
    assert token.isascii()


@pytest.mark.parametrize(
    "token",
    ["garbage!", "e30", "bm90IGpzb24", lists.encode_continue(1, "a", "b")[:-3], '{"v":1}', "eyJ2IjoyfQ"],
)
def test_a_token_this_server_did_not_issue_is_malformed_naming_continue(token: str) -> None:
    with pytest.raises(errors.Malformed) as caught:
        lists.decode_continue(token)
    assert caught.value.fields[0].path == "continue"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": "-1"}, "limit"),
        ({"limit": "ten"}, "limit"),
        ({"resourceVersionMatch": "Newest", "resourceVersion": "1"}, "resourceVersionMatch"),
        ({"resourceVersionMatch": "Exact"}, "resourceVersionMatch"),
        ({"resourceVersionMatch": "Exact", "resourceVersion": "0"}, "resourceVersionMatch"),
        ({"continue": lists.encode_continue(3, "", "a"), "resourceVersion": "3"}, "resourceVersion"),
        ({"resourceVersion": "x"}, "resourceVersion"),
    ],
)
def test_list_options_refuse_what_kubernetes_refuses_naming_the_field(query: dict[str, str], field: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        lists.list_options(query)
    assert caught.value.fields[0].path == field


def test_limit_zero_or_none_or_too_large_asks_for_the_servers_own_page_size() -> None:
    for query in ({"limit": "0"}, {}, {"limit": str(lists.MAX_LIST_ITEMS + 1)}):
        assert lists.list_options(query).limit == lists.MAX_LIST_ITEMS
    assert lists.list_options({"limit": "7"}).limit == 7


def encoded_page(revision: int, last: tuple[str, str] | None, remaining: int) -> EncodedPage:
    items = [] if last is None else [EncodedObject(*last, b"{}")]
    return EncodedPage(items, revision, last, remaining)


def test_a_page_with_more_to_come_carries_a_token_and_the_count_of_what_remains() -> None:
    first = lists.list_metadata(encoded_page(9, ("a", "y"), 3), lists.ListOptions(limit=2), selected=False)
    assert first == {"resourceVersion": "9", "continue": first["continue"], "remainingItemCount": 3}
    token = lists.decode_continue(first["continue"])
    assert token == lists.Continue(9, "a", "y")
    options = lists.ListOptions(limit=2, continue_from=token)
    assert lists.after(options) == ("a", "y")
    second = lists.list_metadata(encoded_page(12, ("c", "z"), 1), options, selected=False)
    assert second["resourceVersion"] == "9"  # every page says the first page's revision
    assert lists.decode_continue(second["continue"]) == lists.Continue(9, "c", "z")
    assert lists.list_metadata(encoded_page(12, ("c", "zz"), 0), options, selected=False) == {"resourceVersion": "9"}


def test_a_selected_page_leaves_the_remaining_count_out_as_kubernetes_does() -> None:
    metadata = lists.list_metadata(encoded_page(4, ("a", "b"), 7), lists.ListOptions(limit=1), selected=True)
    assert set(metadata) == {"resourceVersion", "continue"}


@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "a-b", "b"]), st.text("xyz", min_size=1, max_size=3), st.integers(0, 3000)),
        unique_by=lambda t: t[:2],
    ),
    st.integers(1, 4),
    st.integers(1, 8000),
)
def test_paging_through_an_unchanged_list_by_count_and_bytes_yields_every_object_once_in_order(
    objects: list[tuple[str, str, int]], limit: int, max_bytes: int
) -> None:
    async def page_through() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        store = MemoryStore()
        for ns, name, size in objects:
            await store.create({**configmap(name, ns), "data": {"k": "x" * size}})
        seen: list[dict[str, Any]] = []
        options = lists.ListOptions(limit=limit)
        for _ in range(len(objects) + 1):
            page = await store.list_page("ConfigMap", after=lists.after(options), limit=limit, max_bytes=max_bytes)
            assert len(page.items) == 1 or sum(len(item.body) for item in page.items) <= max_bytes
            seen.extend(json.loads(item.body) for item in page.items)
            metadata = lists.list_metadata(page, options, selected=False)
            if "continue" not in metadata:
                break
            options = lists.ListOptions(limit=limit, continue_from=lists.decode_continue(metadata["continue"]))
        return seen, (await store.list("ConfigMap")).items

    seen, listed = asyncio.run(page_through())
    assert seen == listed


@pytest.mark.parametrize(
    ("query", "current", "error"),
    [
        ({"resourceVersion": "11"}, 10, errors.ResourceVersionTooLarge),
        ({"resourceVersion": "11", "resourceVersionMatch": "NotOlderThan"}, 10, errors.ResourceVersionTooLarge),
        ({"resourceVersion": "9", "resourceVersionMatch": "Exact"}, 10, errors.Gone),
        ({"resourceVersion": "10", "resourceVersionMatch": "Exact"}, 10, None),
        ({"resourceVersion": "3"}, 10, None),
        ({"resourceVersion": "0"}, 10, None),
    ],
)
def test_a_list_at_a_revision_is_served_at_the_current_state_when_that_satisfies_it(
    query: dict[str, str], current: int, error: type[Exception] | None
) -> None:
    options = lists.list_options(query)
    if error is None:
        lists.check_revision(options, current)
    else:
        with pytest.raises(error):
            lists.check_revision(options, current)


# -- over HTTP ------------------------------------------------------------------------------------------------------


@pytest.fixture
async def api(memory_store: MemoryStore) -> AsyncIterator[httpx2.AsyncClient]:
    async with (
        serve_app(create_app(memory_store, fleet_api=False)) as url,
        httpx2.AsyncClient(base_url=url, timeout=10) as client,
    ):
        yield client


async def page_through(
    api: httpx2.AsyncClient, path: str, limit: int, headers: dict[str, str] | None = None, **params: str
) -> list[dict[str, Any]]:
    pages = []
    query: dict[str, str] = {"limit": str(limit), **params}
    for _ in range(50):
        response = await api.get(path, params=query, headers=headers)
        assert response.status_code == 200, response.text
        pages.append(response.json())
        token = response.json()["metadata"].get("continue")
        if not token:
            return pages
        query = {"limit": str(limit), "continue": token, **params}
    raise AssertionError("paging did not end")


async def test_five_objects_by_twos_come_in_three_pages_at_the_first_pages_revision(api: httpx2.AsyncClient) -> None:
    for name in ("a", "b", "c", "d", "e"):
        await api.post(CONFIGMAPS, json=configmap(name))
    pages = await page_through(api, CONFIGMAPS, 2)
    assert [[o["metadata"]["name"] for o in p["items"]] for p in pages] == [["a", "b"], ["c", "d"], ["e"]]
    assert [p["metadata"].get("remainingItemCount") for p in pages] == [3, 1, None]
    assert {p["metadata"]["resourceVersion"] for p in pages} == {"5"}


def big(name: str, size: int = 10_000) -> dict[str, Any]:
    return {**configmap(name), "data": {"blob": name[-1] * size}}


async def test_a_list_over_the_byte_bound_comes_in_pages_holding_each_object_once_as_stored(
    api: httpx2.AsyncClient, memory_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lists, "MAX_LIST_BYTES", 25_000)  # two objects of 10 kB a page, not three
    for i in range(7):
        assert (await api.post(CONFIGMAPS, json=big(f"cm-{i}"))).status_code == 201
    pages = await page_through(api, CONFIGMAPS, 500)
    assert [[o["metadata"]["name"] for o in p["items"]] for p in pages] == [
        ["cm-0", "cm-1"],
        ["cm-2", "cm-3"],
        ["cm-4", "cm-5"],
        ["cm-6"],
    ]
    assert [lists.decode_continue(p["metadata"]["continue"]) for p in pages[:-1]] == [
        lists.Continue(7, "default", name) for name in ("cm-1", "cm-3", "cm-5")
    ]
    assert [p["metadata"].get("remainingItemCount") for p in pages] == [5, 3, 1, None]
    assert {(p["kind"], p["apiVersion"], p["metadata"]["resourceVersion"]) for p in pages} == {
        ("ConfigMapList", "v1", "7")
    }
    stored = (await memory_store.list("ConfigMap", "default")).items
    assert [o for p in pages for o in p["items"]] == stored  # what the list gave before it was streamed
    monkeypatch.setattr(lists, "MAX_LIST_BYTES", 1 << 20)
    whole = (await api.get(CONFIGMAPS)).json()
    assert whole["items"] == stored
    assert whole["metadata"] == {"resourceVersion": "7"}


async def test_a_table_list_over_the_byte_bound_pages_its_rows_each_page_a_whole_table(
    api: httpx2.AsyncClient, memory_store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        await api.post(CONFIGMAPS, json=big(f"cm-{i}"))
    table = {"Accept": "application/json;as=Table;g=meta.k8s.io;v=v1"}
    whole = (await api.get(CONFIGMAPS, headers=table, params={"includeObject": "Object"})).json()
    monkeypatch.setattr(lists, "MAX_LIST_BYTES", 25_000)
    pages = await page_through(api, CONFIGMAPS, 500, headers=table, includeObject="Object")
    assert [[row["cells"][0] for row in p["rows"]] for p in pages] == [["cm-0", "cm-1"], ["cm-2", "cm-3"], ["cm-4"]]
    assert [(p["kind"], p["apiVersion"]) for p in pages] == [("Table", "meta.k8s.io/v1")] * 3
    assert all(p["columnDefinitions"] == whole["columnDefinitions"] != [] for p in pages)
    assert [row for p in pages for row in p["rows"]] == whole["rows"]
    stored = (await memory_store.list("ConfigMap", "default")).items
    assert [row["object"] for row in whole["rows"]] == stored


async def test_a_list_paged_while_objects_change_then_watched_from_its_revision_ends_current(
    api: httpx2.AsyncClient,
) -> None:
    for name in ("a", "b", "c", "d"):
        await api.post(CONFIGMAPS, json=configmap(name))
    first = (await api.get(CONFIGMAPS, params={"limit": "2"})).json()
    await api.post(CONFIGMAPS, json=configmap("aa"))  # sorts before the boundary: not in the pages
    await api.delete(f"{CONFIGMAPS}/c")  # after it: gone from the pages
    rest = (await api.get(CONFIGMAPS, params={"limit": "5", "continue": first["metadata"]["continue"]})).json()
    state = {o["metadata"]["name"]: o for o in first["items"] + rest["items"]}
    assert sorted(state) == ["a", "b", "d"]
    since = rest["metadata"]["resourceVersion"]
    assert since == first["metadata"]["resourceVersion"] == "4"
    params = {"watch": "1", "resourceVersion": since}
    async with api.stream("GET", CONFIGMAPS, params=params, headers={"Accept": "application/x-ndjson"}) as response:
        lines = response.aiter_lines()
        for _ in range(2):
            event = json.loads(await anext(lines))
            if event["type"] == "DELETED":
                state.pop(event["object"]["metadata"]["name"], None)  # c: already gone from the pages
            else:
                state[event["object"]["metadata"]["name"]] = event["object"]
    assert sorted(state) == ["a", "aa", "b", "d"]


async def test_pages_follow_label_selectors_and_span_namespaces_at_the_cluster_path(api: httpx2.AsyncClient) -> None:
    for ns in ("default", "team"):
        for name in ("a", "b", "c"):
            await api.post(
                f"/api/v1/namespaces/{ns}/configmaps", json=configmap(name, ns, keep="yes" if name != "b" else "no")
            )
    pages = await page_through(api, ALL_CONFIGMAPS, 3, labelSelector="keep=yes")
    keys = [(o["metadata"]["namespace"], o["metadata"]["name"]) for p in pages for o in p["items"]]
    assert keys == [("default", "a"), ("default", "c"), ("team", "a"), ("team", "c")]


async def test_a_continue_token_from_a_compacted_revision_is_410_expired(
    api: httpx2.AsyncClient, memory_store: MemoryStore
) -> None:
    for name in ("a", "b", "c"):
        await api.post(CONFIGMAPS, json=configmap(name))
    first = (await api.get(CONFIGMAPS, params={"limit": "1"})).json()
    await api.post(CONFIGMAPS, json=configmap("d"))
    await memory_store.compact(4)
    response = await api.get(CONFIGMAPS, params={"limit": "1", "continue": first["metadata"]["continue"]})
    assert response.status_code == 410, response.text
    assert (response.json()["reason"], response.json()["code"]) == ("Expired", 410)
    assert "continue parameter is too old" in response.json()["message"]


async def test_a_garbled_continue_token_is_400_naming_continue(api: httpx2.AsyncClient) -> None:
    response = await api.get(CONFIGMAPS, params={"limit": "1", "continue": "not-a-token"})
    assert response.status_code == 400, response.text
    assert response.json()["reason"] == "BadRequest"
    assert response.json()["details"]["causes"][0]["field"] == "continue"


async def test_a_list_at_a_future_revision_is_504_and_at_a_reached_one_is_the_current_state(
    api: httpx2.AsyncClient,
) -> None:
    await api.post(CONFIGMAPS, json=configmap("a"))
    ahead = await api.get(CONFIGMAPS, params={"resourceVersion": "5"})
    assert ahead.status_code == 504, ahead.text
    assert ahead.json()["reason"] == "Timeout"
    behind = await api.get(CONFIGMAPS, params={"resourceVersion": "1", "resourceVersionMatch": "NotOlderThan"})
    assert [o["metadata"]["name"] for o in behind.json()["items"]] == ["a"]
    exact = await api.get(CONFIGMAPS, params={"resourceVersion": "1", "resourceVersionMatch": "Exact"})
    assert exact.json()["metadata"]["resourceVersion"] == "1"


async def test_bad_list_options_are_422_naming_the_parameter(api: httpx2.AsyncClient) -> None:
    response = await api.get(CONFIGMAPS, params={"resourceVersionMatch": "Exact"})
    assert response.status_code == 422, response.text
    assert response.json()["details"]["causes"][0]["field"] == "resourceVersionMatch"
