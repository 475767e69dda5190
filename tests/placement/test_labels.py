"""Cluster labels: the pure label edits, and EMCO's /labels operations as CAS writes on every store backend."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from devplace import errors
from devplace.placement._catalog import Catalog
from devplace.placement._labels import ClusterLabels, label_added, label_removed, labels_of
from devplace.store import Store
from tests.placement.samples import build_seed

CLUSTER = {"spec": {"emco": {"metadata": {"name": "c1", "labels": {"gpu": "true"}}, "spec": {}}}}
WHERE = 'cluster "c1"'


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("edge", {"gpu": "true", "edge": ""}),
        ("zone=east", {"gpu": "true", "zone": "east"}),
        ("example.com/qat=2", {"gpu": "true", "example.com/qat": "2"}),
    ],
)
def test_an_added_label_lands_in_the_cluster_labels_and_the_input_is_untouched(
    text: str, labels: dict[str, str]
) -> None:
    before = copy.deepcopy(CLUSTER)
    assert labels_of(label_added(CLUSTER, text, WHERE)) == labels
    assert before == CLUSTER


def test_a_cluster_stored_without_labels_takes_one() -> None:
    bare: dict[str, Any] = {"spec": {"emco": {"metadata": {"name": "c1"}}}}
    assert labels_of(label_added(bare, "edge", WHERE)) == {"edge": ""}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu=true", "Cluster Label already exists"),  # EMCO's text
        ("gpu", 'cluster "c1" already has label "gpu=true" for gpu'),
        ("gpu=false", 'cluster "c1" already has label "gpu=true" for gpu'),
    ],
)
def test_adding_a_label_whose_key_is_taken_is_already_exists(text: str, message: str) -> None:
    with pytest.raises(errors.AlreadyExists) as caught:
        label_added(CLUSTER, text, WHERE)
    assert caught.value.message == message


@pytest.mark.parametrize(("text", "removed"), [("gpu", True), ("gpu=true", True), ("gpu=false", False), ("x", False)])
def test_a_label_is_removed_by_key_or_by_key_and_its_value(text: str, removed: bool) -> None:
    if removed:
        assert labels_of(label_removed(CLUSTER, text, WHERE)) == {}
    else:
        with pytest.raises(errors.NotFound) as caught:
            label_removed(CLUSTER, text, WHERE)
        assert caught.value.message == f'cluster "c1" has no label "{text}"'
    assert labels_of(CLUSTER) == {"gpu": "true"}


async def test_concurrent_label_writes_all_land_and_a_duplicate_lands_once(any_store: Store) -> None:
    catalog = Catalog(any_store)
    await build_seed(catalog)
    labels = ClusterLabels(catalog)
    path = ("edge", "cluster-1")
    before = await labels.list_all(path)
    added = [f"rack-{i}" for i in range(6)]
    outcomes = await asyncio.gather(
        *(labels.add(path, {"clusterLabel": t}) for t in [*added, "twin", "twin"]), return_exceptions=True
    )
    assert outcomes[:6] == [{"clusterLabel": t} for t in added]
    twins = outcomes[6:]
    assert sorted(type(o).__name__ for o in twins) == ["AlreadyExists", "dict"]
    after = {x["clusterLabel"] for x in await labels.list_all(path)}
    assert after == {x["clusterLabel"] for x in before} | set(added) | {"twin"}


async def test_label_writes_on_a_missing_cluster_are_not_found_and_write_nothing(any_store: Store) -> None:
    catalog = Catalog(any_store)
    await build_seed(catalog)
    revision = await any_store.revision()
    with pytest.raises(errors.NotFound) as caught:
        await ClusterLabels(catalog).add(("edge", "nope"), {"clusterLabel": "x"})
    assert caught.value.message == 'cluster "nope" not found'
    assert await any_store.revision() == revision
