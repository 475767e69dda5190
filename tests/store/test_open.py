"""`open_store(url)`: which backend a URL opens, and what a sqlite URL that cannot be opened says."""

from __future__ import annotations

from pathlib import Path

import pytest

from devplace import errors
from devplace.store import SqliteStore, open_store


async def test_three_slashes_are_relative_and_four_are_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    relative = open_store("sqlite:///sub/x.db")
    absolute = open_store(f"sqlite:///{tmp_path}/y.db")  # tmp_path starts with "/": four slashes in all
    try:
        assert isinstance(relative, SqliteStore)
        assert isinstance(absolute, SqliteStore)
        assert (relative.path, absolute.path) == ("sub/x.db", f"{tmp_path}/y.db")
    finally:
        await relative.close()
        await absolute.close()


def test_a_relative_path_whose_directory_is_missing_names_it_and_the_four_slash_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(errors.Unavailable) as caught:
        open_store("sqlite:///tmp/x.db")
    assert caught.value.message == (
        f"cannot open sqlite store tmp/x.db ({tmp_path}/tmp/x.db): unable to open database file: directory "
        f"{tmp_path}/tmp does not exist (sqlite:///tmp/x.db is relative to the working directory; for /tmp/x.db "
        "write sqlite:////tmp/x.db)"
    )
    assert not (tmp_path / "tmp").exists()


def test_an_absolute_path_whose_directory_is_missing_names_the_directory(tmp_path: Path) -> None:
    with pytest.raises(errors.Unavailable) as caught:
        open_store(f"sqlite:///{tmp_path}/nowhere/x.db")
    assert caught.value.message == (
        f"cannot open sqlite store {tmp_path}/nowhere/x.db: unable to open database file: directory "
        f"{tmp_path}/nowhere does not exist"
    )


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///", "sqlite:x.db", "postgres://h/db"])
def test_a_url_open_store_cannot_read_is_invalid_naming_the_store(url: str) -> None:
    with pytest.raises(errors.Invalid) as caught:
        open_store(url)
    assert caught.value.fields[0].path == "store"
