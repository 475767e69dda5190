"""`devplace store backup | restore | export | import` as an operator types them."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from devplace.cli import app

CONFIGMAP = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\ndata: {a: b}\n"


@pytest.fixture
def in_tmp(tmp_path: Path) -> Iterator[Path]:
    """Run in `tmp_path`, so relative sqlite URLs land there."""
    old = os.getcwd()
    os.chdir(tmp_path)
    (tmp_path / "cm.yaml").write_text(CONFIGMAP)
    yield tmp_path
    os.chdir(old)


def devplace(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), prog_name="devplace", env={"DEVPLACE_STORE": ""})
    return result.exit_code, result.stdout, result.stderr


def test_backup_then_restore_round_trips_a_store(in_tmp: Path) -> None:
    assert devplace("apply", "-f", "cm.yaml", "--store", "sqlite:///live.db")[0] == 0
    assert devplace("store", "backup", "--store", "sqlite:///live.db", "b.db") == (
        0,
        "",
        "backed up live.db to b.db: 1 objects at revision 1, schema version 1\n",
    )
    code, _, err = devplace("store", "restore", "b.db", "--store", "sqlite:///new.db")
    assert (code, err) == (0, "restored b.db into new.db: 1 objects at revision 1, schema version 1\n")
    code, out, _ = devplace("get", "configmap", "settings", "-o", "json", "--store", "sqlite:///new.db")
    assert (code, json.loads(out)["data"]) == (0, {"a": "b"})


def test_export_then_import_moves_every_object_with_its_uid(in_tmp: Path) -> None:
    devplace("apply", "-f", "cm.yaml", "--store", "sqlite:///a.db")
    code, out, err = devplace("store", "export", "--store", "sqlite:///a.db")
    assert (code, err) == (0, "exported 1 objects from sqlite:///a.db\n")
    (in_tmp / "dump.jsonl").write_text(out)
    assert devplace("store", "import", "dump.jsonl", "--store", "sqlite:///b.db")[0] == 0
    assert devplace("store", "export", "--store", "sqlite:///b.db")[1] == out
    code, _, err = devplace("store", "import", "dump.jsonl", "--store", "sqlite:///b.db")
    assert (code, err) == (1, "error: the store already holds ConfigMap default/settings: nothing was imported\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["store", "backup", "--store", "memory", "x.db"], "error: store: 'memory': backups and restores are of"),
        (["store", "backup", "--store", "sqlite:///absent.db", "x.db"], "error: sqlite store absent.db ("),
        (["store", "import", "bad.jsonl", "--store", "memory"], "error: bad.jsonl: line 1: kind: required"),
        (["store", "export", "--format", "toml", "--store", "memory"], "Invalid value for --format: 'toml' is not"),
    ],
)
def test_bad_store_commands_fail_with_one_clear_line(in_tmp: Path, args: list[str], message: str) -> None:
    (in_tmp / "bad.jsonl").write_text('{"metadata": {"name": "x"}}\n')
    code, _, err = devplace(*args)
    assert code != 0
    assert message in err
    assert not (in_tmp / "x.db").exists()
