"""Exports and imports between backends: every object moves with its identity; only revisions are the target's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devplace import errors
from devplace.clocks import FakeClock
from devplace.store import MemoryStore, Store, export_objects, format_dump, import_objects, parse_dump
from devplace.store._sqlite import SqliteStore
from tests import etcds
from tests.servers import remote_backend
from tests.store.samples import configmap, node, pod, rv


async def _fill(store: Store) -> None:
    """Objects of several kinds, scopes and histories: updated, labelled, with status and managed fields."""
    gpu = await store.create(node("gpu", labels={"zone": "a"}, spec={"cpu": 4, "zones": ["a"]}))
    gpu["spec"]["cpu"] = 8
    gpu["status"] = {"load": 0.5, "ok": True, "none": None}
    await store.update(gpu)
    await store.create(configmap("café", x="ünïcode", y=""))
    await store.create(configmap("other", "kube-system", labels={"app": "x"}))
    await store.create(pod("p", node_name="gpu"))
    doomed = await store.create(configmap("doomed"))
    await store.delete("ConfigMap", "doomed", "default", resource_version=str(rv(doomed)))
    await store.create(
        {"apiVersion": "akri.sh/v0", "kind": "Configuration", "metadata": {"name": "c", "namespace": "default",
         "annotations": {"a": "b"}, "finalizers": ["x"]}, "spec": {"capacity": 2}}
    )  # fmt: skip


async def test_export_from_sqlite_import_into_etcd_and_export_again_is_identical(
    tmp_path: Path, clock: FakeClock
) -> None:
    if etcds.BINARY is None:
        pytest.skip(etcds.ABSENT)
    source = SqliteStore(str(tmp_path / "store.db"), clock=clock)
    try:
        await _fill(source)
        exported = format_dump(await export_objects(source))
        source_objects = (await source.dump())[1]
    finally:
        await source.close()
    async with etcds.etcd_backend(tmp_path, FakeClock(start=5_000_000)) as target:
        assert await import_objects(target, parse_dump(exported)) == 5
        again = format_dump(await export_objects(target))
        moved = (await target.dump())[1]
        assert await target.revision() == 5  # one revision per object, in dump order
    assert again == exported
    assert [rv(obj) for obj in moved] == [1, 2, 3, 4, 5]  # the target's revisions, in dump order
    assert len(exported.splitlines()) == 5
    for before, after in zip(source_objects, moved, strict=True):
        before_meta, after_meta = before.pop("metadata"), after.pop("metadata")
        assert before == after
        assert {k: v for k, v in before_meta.items() if k != "resourceVersion"} == {
            k: v for k, v in after_meta.items() if k != "resourceVersion"
        }


@pytest.mark.parametrize("fmt", ["json", "yaml"])
async def test_a_dump_moves_between_memory_and_sqlite_and_back_unchanged(tmp_path: Path, fmt: Any) -> None:
    memory = MemoryStore(clock=FakeClock())
    await _fill(memory)
    dumped = format_dump(await export_objects(memory), fmt)
    sqlite = SqliteStore(str(tmp_path / "store.db"))
    try:
        await import_objects(sqlite, parse_dump(dumped))
        back = MemoryStore()
        await import_objects(back, parse_dump(format_dump(await export_objects(sqlite), fmt)))
        assert format_dump(await export_objects(back), fmt) == dumped
        gpu = await sqlite.get("Node", "gpu")
        # the Node comes after the Configuration and the 2 ConfigMaps in dump order
        assert (gpu["metadata"]["generation"], gpu["metadata"]["resourceVersion"]) == (2, "4")
        gpu["spec"]["cpu"] = 16  # the stored identity keeps working: generation bumps from the imported one
        assert (await sqlite.update(gpu))["metadata"]["generation"] == 3
    finally:
        await sqlite.close()


async def test_an_import_into_a_store_holding_one_of_the_objects_is_refused_and_writes_nothing() -> None:
    source = MemoryStore()
    await _fill(source)
    target = MemoryStore()
    await target.create(configmap("café"))
    with pytest.raises(errors.AlreadyExists) as refused:
        await import_objects(target, await export_objects(source))
    assert refused.value.message == "the store already holds ConfigMap default/café: nothing was imported"
    assert await target.revision() == 1


async def test_a_client_backend_cannot_export_or_import(tmp_path: Path, clock: FakeClock) -> None:
    async with remote_backend(tmp_path, clock) as remote:
        with pytest.raises(errors.Invalid, match=r"^store: export needs a memory, sqlite or etcd store, not Remote"):
            await export_objects(remote)
        with pytest.raises(errors.Invalid, match=r"^store: import needs"):
            await import_objects(remote, [])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"kind":"ConfigMap","metadata":{"name":"a"}}\n{"kind":', "line 2: not a JSON object"),
        ('{"kind":"ConfigMap","metadata":{}}\n', "line 1: metadata.name: required"),
        ('{"metadata":{"name":"a"}}\n', "line 1: kind: required"),
        ('{"kind":"C","metadata":{"name":"a"}}\n\n{"kind":"C","metadata":{"name":"a"}}', "line 3: C a is also line 1"),
        ("---\nkind: C\nmetadata: {name: a}\n---\n- a list\n", "document 2: expected an object, got list"),
        ("kind: [unclosed\n", "not JSON lines nor YAML documents"),
    ],
)
def test_a_bad_dump_is_refused_naming_the_line_or_document(text: str, message: str) -> None:
    with pytest.raises(errors.Invalid) as refused:
        parse_dump(text)
    assert refused.value.message.startswith(message)


_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=8))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)
_objects = st.lists(
    st.builds(
        lambda name, data: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data},
        st.text("abcxyz-", min_size=1, max_size=6),
        st.dictionaries(st.text(max_size=5), _values, max_size=3),
    ),
    max_size=4,
    unique_by=lambda obj: obj["metadata"]["name"],
)


@given(_objects, st.sampled_from(["json", "yaml"]))
def test_parsing_a_formatted_dump_gives_the_objects_back(objects: list[dict[str, Any]], fmt: Any) -> None:
    assert parse_dump(format_dump(objects, fmt)) == objects
