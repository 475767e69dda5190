"""`devplace demo` (what `make demo` runs): the example manifests go through the API server into SQLite and back."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from devplace.cli import app


def test_the_demo_applies_the_examples_and_shows_cas_validation_and_watch(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/demo.db"
    result = CliRunner().invoke(app, ["demo", "--store", url])
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert out.startswith(f"devplace demo: store {url}, API server http://127.0.0.1:")
    for line in [
        "Configuration default/akri-debug-echo created   (akri-debug-echo.yaml, document 1)",
        "Instance default/akri-debug-echo-8be2a1 created   (cluster.yaml, document 2)",
        "ResourceClass big-gpu created   (resourceclass-big-gpu.yaml, document 1)",
        "7 unchanged",
    ]:
        assert line in out.splitlines()
    assert "409 Conflict: Configuration default/akri-debug-echo: the object has been modified" in out
    assert "error: Configuration default/Bad_Name: metadata.name: 'Bad_Name' must consist of" in out
    assert "MODIFIED  Instance default/akri-debug-echo-8be2a1" in out
    assert "2/2" in out.splitlines()[-3]  # the Instance row after node-b took the free slot
    assert (tmp_path / "demo.db").exists()


def test_the_demo_without_a_store_uses_a_temporary_sqlite_file() -> None:
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("devplace demo: store sqlite:///")
    assert "/devplace-demo-" in result.stdout.splitlines()[0]


def test_the_demo_with_a_missing_examples_directory_is_one_error_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--store", "memory", "--examples", str(tmp_path / "none")])
    assert result.exit_code == 1
    assert result.stderr.startswith("error: ")
    assert len(result.stderr.splitlines()) == 1
