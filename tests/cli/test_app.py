"""The `devplace` application itself: `--version`, shell completion, and help that fits an 80-column terminal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from devplace import __version__
from devplace.cli import app

BACKENDS = ("memory", "sqlite:///", "sqlite:////", "etcd://", "etcds://", "http(s)://", "kube://")


def _commands() -> Iterator[tuple[list[str], Any]]:
    """Every command of the application (typer's own click), with the words that reach it (`["fleet", "plan"]`)."""

    def walk(words: list[str], command: Any) -> Iterator[tuple[list[str], Any]]:
        yield words, command
        if hasattr(command, "commands"):  # a group
            for name, child in command.commands.items():
                yield from walk([*words, name], child)

    yield from walk([], typer.main.get_command(app))


COMMANDS = list(_commands())


def test_version_option_prints_the_version_and_exits_0() -> None:
    result = CliRunner().invoke(app, ["--version"], prog_name="devplace")
    assert (result.exit_code, result.output) == (0, f"devplace {__version__}\n")


@pytest.mark.parametrize(("words", "command"), COMMANDS, ids=[" ".join(w) or "devplace" for w, _ in COMMANDS])
def test_help_at_80_columns_shows_every_option_name_whole(words: list[str], command: Any) -> None:
    result = CliRunner(env={"COLUMNS": "80"}).invoke(app, [*words, "--help"], prog_name="devplace")
    assert result.exit_code == 0, result.output
    shown = [word.rstrip(",") for word in result.output.split()]  # "-f, --filename <path>"
    for param in command.params:
        for name in (*param.opts, *param.secondary_opts):
            if name.startswith("-"):
                assert name in shown, f"{' '.join(words)} --help lost {name}:\n{result.output}"
    assert max(len(line) for line in result.output.splitlines()) <= 80


@pytest.mark.parametrize(
    "words",
    # `devplace up` takes only its own embedded stores (sqlite, memory): its help names those
    [w for w, c in COMMANDS if any("--store" in p.opts for p in c.params) and w != ["up"]],
    ids=lambda w: " ".join(w),
)
def test_store_help_names_every_backend_and_the_absolute_sqlite_spelling(words: list[str]) -> None:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, [*words, "--help"], prog_name="devplace")
    text = " ".join(result.output.split())  # help wraps lines
    for backend in BACKENDS:
        assert backend in text, f"{' '.join(words) or 'devplace'} --help does not name {backend}"
    assert "[default: " in text  # a default in brackets is printed, not read as markup and dropped


def test_shell_completion_completes_commands_and_long_options() -> None:
    def complete(words: str) -> str:
        env = {"_DEVPLACE_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split()) - 1)}
        result = CliRunner().invoke(app, [], prog_name="devplace", env=env)
        assert result.exit_code == 0, result.output
        return result.output

    assert complete("devplace ser") == "server\n"
    assert complete("devplace server --max-w") == "--max-watches-per-client\n"


def test_install_completion_writes_the_script_and_sources_it_from_bashrc(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    result = CliRunner().invoke(app, ["--install-completion", "bash"], prog_name="devplace", env=home)
    assert result.exit_code == 0, result.output
    script = tmp_path / ".bash_completions" / "devplace.sh"
    assert "_DEVPLACE_COMPLETE=complete_bash" in script.read_text()
    assert str(script.relative_to(tmp_path)) in (tmp_path / ".bashrc").read_text()
