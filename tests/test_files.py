"""The one atomic file write: all or nothing, private from its creation, the target untouched on failure."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from devplace.files import write_atomically


def test_a_file_is_replaced_whole_and_is_private_unless_a_mode_is_given(tmp_path: Path) -> None:
    target = tmp_path / "config"
    write_atomically(target, "first")
    write_atomically(target, "second")
    assert target.read_text() == "second"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    write_atomically(target, b"\x00third", mode=0o644, sync="all")
    assert target.read_bytes() == b"\x00third"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in target.parent.iterdir()) == ["config"]  # no temporary file left


def test_a_private_file_stays_readable_by_its_owner_only_whatever_the_umask(tmp_path: Path) -> None:
    target = tmp_path / "config"
    target.write_text("old")
    target.chmod(0o644)
    old_umask = os.umask(0)  # even a permissive umask must not make it readable by others
    try:
        write_atomically(target, "new")
    finally:
        os.umask(old_umask)
    assert target.read_text() == "new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_a_failed_write_leaves_the_target_as_it_was_and_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "config"
    target.write_text("kept")
    with pytest.raises(TypeError):
        write_atomically(target, 42)  # type: ignore[arg-type]
    assert target.read_text() == "kept"
    assert [p.name for p in tmp_path.iterdir()] == ["config"]
