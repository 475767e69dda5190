"""Every option of every command from `DEVPLACE_<OPTION>` and from `--config FILE`: flag > environment > file >
default; an unknown key in the file is refused, naming it, before anything runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from devplace.cli import app
from devplace.cli._configs import env_name, long_name

WIDE = {"COLUMNS": "200"}


def invoke(args: list[str], env: dict[str, str] | None = None) -> Any:
    return CliRunner(env={**WIDE, **(env or {})}).invoke(app, args)


def scheduler_args(tmp_path: Path, *more: str) -> list[str]:
    return ["scheduler", "--store", f"sqlite:///{tmp_path}/x.db", *more]


def refused_strategy(result: Any) -> str:
    """Which --strategy value won: the scheduler refuses an unknown one, naming it, before it starts."""
    assert result.exit_code == 2, result.output
    prefix = "Invalid value for --strategy: '"
    line = next(line for line in result.stderr.splitlines() if prefix in line)
    return line.split(prefix)[1].split("'")[0]


@pytest.mark.parametrize(
    ("flag", "env", "file", "winner"),
    [
        ("from-flag", "from-env", "from-file", "from-flag"),
        (None, "from-env", "from-file", "from-env"),
        (None, None, "from-file", "from-file"),
        ("from-flag", None, "from-file", "from-flag"),
    ],
)
def test_an_option_comes_from_the_flag_then_the_environment_then_the_file(
    tmp_path: Path, flag: str | None, env: str | None, file: str | None, winner: str
) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text(f"strategy: {file}\n")
    args = scheduler_args(tmp_path, "--config", str(config), *(["--strategy", flag] if flag else []))
    result = invoke(args, {"DEVPLACE_STRATEGY": env} if env else None)
    assert refused_strategy(result) == winner
    assert not (tmp_path / "x.db").exists()


def test_a_file_sets_options_by_their_long_names_and_an_option_without_any_keeps_its_default(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text("leader-elect: true\nleader-elect-namespace: Kube_System\nlog-level: debug\n")
    result = invoke(scheduler_args(tmp_path, "--config", str(config)))
    assert result.exit_code == 2
    assert "Invalid value for --leader-elect-namespace: 'Kube_System' is not a namespace name" in result.stderr


def test_an_unknown_key_in_the_file_is_refused_naming_the_key_and_nothing_runs(tmp_path: Path) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text("strategy: binpack\nstrateggy: spread\n")
    result = invoke(scheduler_args(tmp_path, "--config", str(config)))
    assert result.exit_code == 2
    assert f"Invalid value for --config: {config}: unknown key 'strateggy': `devplace scheduler` has no option " in (
        " ".join(result.stderr.split())
    )
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a\n- b\n", "expected a mapping of option names to values, got list"),
        ("strategy: [binpack, spread]\n", "key 'strategy' takes one value, not ['binpack', 'spread']"),
        ("strategy: [unclosed\n", "is not YAML"),
    ],
)
def test_a_file_that_is_not_a_mapping_of_single_values_is_refused(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "scheduler.yaml"
    config.write_text(text)
    result = invoke(scheduler_args(tmp_path, "--config", str(config)))
    assert result.exit_code == 2
    assert message in " ".join(result.stderr.split())


@pytest.mark.parametrize("where", ["flag", "env"])
def test_the_root_store_flag_and_devplace_store_beat_a_commands_store_from_its_file(tmp_path: Path, where: str) -> None:
    from tests.cli.test_daemons import NODE, seed

    url = f"sqlite:///{tmp_path}/real.db"
    seed(url, NODE)
    config = tmp_path / "get.yaml"
    config.write_text("store: bogus://from-file\n")
    root, env = (["--store", url], None) if where == "flag" else ([], {"DEVPLACE_STORE": url})
    result = invoke([*root, "get", "nodes", "-o", "name", "--config", str(config)], env)
    assert result.exit_code == 0, result.output
    assert result.stdout == "nodes/node-a\n"
    alone = invoke(["get", "nodes", "--config", str(config)])
    assert alone.exit_code == 1
    assert "unsupported store URL 'bogus://from-file'" in alone.stderr


def test_each_option_of_the_long_running_commands_has_its_environment_variable_shown_in_help() -> None:
    group: Any = typer.main.get_command(app)
    for path in (["server"], ["agent"], ["scheduler"], ["controller"], ["kubelet-sim"]):
        command = group.commands[path[0]]
        result = invoke([*path, "--help"])
        assert result.exit_code == 0
        help_text = " ".join(result.stdout.split())
        for param in command.params:
            name = long_name(param)
            if name in (None, "help", "config", "store") or param.param_type_name != "option":
                continue
            variable = env_name(name)
            assert variable in (param.envvar if isinstance(param.envvar, list) else [param.envvar]), (path, name)
            assert variable in help_text.replace("- ", "-").replace(" _", "_"), (path, variable)
        assert "--config" in help_text


def test_an_option_that_read_akris_variables_reads_devplaces_first() -> None:
    group: Any = typer.main.get_command(app)
    node = next(p for p in group.commands["agent"].params if long_name(p) == "node")
    assert node.envvar == ["DEVPLACE_NODE", "AGENT_NODE_NAME", "NODE_NAME"]
    assert env_name("leader-elect-lease-duration") == "DEVPLACE_LEADER_ELECT_LEASE_DURATION"


def test_a_boolean_flag_comes_from_the_environment_and_the_file(tmp_path: Path) -> None:
    """`--leader-elect` off by default; on from the variable or the file, which both lead to its checks."""
    bad = ["--leader-elect-renew-deadline", "20"]
    by_env = invoke(scheduler_args(tmp_path, *bad), {"DEVPLACE_LEADER_ELECT": "true"})
    assert by_env.exit_code == 2
    assert "Invalid value for --leader-elect-renew-deadline" in by_env.stderr
    config = tmp_path / "c.yaml"
    config.write_text("leader-elect: true\n")
    by_file = invoke(scheduler_args(tmp_path, *bad, "--config", str(config)))
    assert by_file.exit_code == 2
    assert "Invalid value for --leader-elect-renew-deadline" in by_file.stderr
