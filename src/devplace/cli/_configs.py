"""Every option of every command from the environment and from a config file, by one mechanism.

`ConfigurableGroup` (the `devplace` group's class) walks every command once it is built and, for each option:

- gives it the environment variable `DEVPLACE_<OPTION>`, the long option name upper-cased with `-` as `_`
  (`--max-body-bytes`: `DEVPLACE_MAX_BODY_BYTES`, `--leader-elect-lease-duration`:
  `DEVPLACE_LEADER_ELECT_LEASE_DURATION`), shown in `--help` as `[env var: ...]`. An option that already read
  variables keeps them after it (`--node`: `DEVPLACE_NODE`, then Akri's `AGENT_NODE_NAME`, then `NODE_NAME`).
  A command's `--store` leaves `DEVPLACE_STORE` to `devplace --store`, which reads it already, so
  `devplace --store X cmd` still beats the variable;
- adds `--config FILE` to every command: a YAML mapping whose keys are the command's long option names without the
  dashes (`max-body-bytes: 1048576`, `leader-elect: true`, `nvml: false`), taken as the options' defaults.

So the precedence is click's: a flag, else the variable, else the file, else the option's default. A key the command
has no option for is refused before anything runs, naming the key (usage error, exit code 2), as is a file that is
not a YAML mapping, and a list given to an option that takes one value. Values are checked as the flags' are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import typer.main
import yaml
from typer.core import TyperGroup

ENV_PREFIX = "DEVPLACE_"
ROOT_OWNED = frozenset({"store"})
"""Options of `devplace` itself that commands repeat: their variable is read by `devplace`'s (module docstring)."""
_SKIPPED = frozenset({"help", "version", "install-completion", "show-completion", "config"})


def long_name(param: Any) -> str | None:
    """An option's first long name without its dashes (`--max-body-bytes` -> `max-body-bytes`)."""
    for opt in getattr(param, "opts", ()):
        if opt.startswith("--"):
            return str(opt[2:])
    return None


def env_name(option: str) -> str:
    return ENV_PREFIX + option.upper().replace("-", "_")


def _keys(command: Any) -> dict[str, Any]:
    """The config-file keys of `command` -> its option objects."""
    keys: dict[str, Any] = {}
    for param in command.params:
        name = long_name(param) if getattr(param, "param_type_name", "") == "option" else None
        if name and name not in _SKIPPED:
            keys[name] = param
    return keys


def load_config(ctx: typer.Context, path: Path | None) -> None:
    """`--config FILE`'s callback: read FILE and make its keys the command's defaults (module docstring)."""
    if path is None:
        return
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise typer.BadParameter(f"cannot read {path}: {e.strerror or e}", param_hint="--config") from None
    except yaml.YAMLError as e:
        raise typer.BadParameter(f"{path} is not YAML: {e}", param_hint="--config") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise typer.BadParameter(
            f"{path}: expected a mapping of option names to values, got {type(data).__name__}", param_hint="--config"
        )
    keys = _keys(ctx.command)
    defaults: dict[str, Any] = {}
    for key, value in data.items():
        param = keys.get(str(key))
        if param is None:
            known = ", ".join(sorted(keys))
            raise typer.BadParameter(
                f"{path}: unknown key {key!r}: `devplace {ctx.info_name}` has no option --{key} (known: {known})",
                param_hint="--config",
            )
        takes_many = bool(getattr(param, "multiple", False)) or (param.nargs not in (1, None))
        if isinstance(value, dict) or (isinstance(value, list) and not takes_many):
            raise typer.BadParameter(f"{path}: key {key!r} takes one value, not {value!r}", param_hint="--config")
        defaults[param.name] = value
    ctx.default_map = {**(ctx.default_map or {}), **defaults}


def _config_option() -> Any:
    """The `--config` option object, as typer builds it (added to every command by `configure`)."""
    template = typer.Typer()

    @template.command()
    def command(
        config: Annotated[
            Path | None,
            typer.Option(
                "--config",
                help="YAML file of option values (keys: the long option names, e.g. log-level: debug); "
                "a flag beats $DEVPLACE_<OPTION>, which beats the file",
                is_eager=True,
                expose_value=False,
                callback=load_config,
                dir_okay=False,
                show_default=False,
                show_envvar=False,
            ),
        ] = None,
    ) -> None:
        """Only here to build the option."""

    return typer.main.get_command(template).params[0]


def _with_env(param: Any, *, root: bool) -> None:
    name = long_name(param)
    if name is None or name in _SKIPPED or getattr(param, "param_type_name", "") != "option":
        return
    if not root and name in ROOT_OWNED:
        return
    env = env_name(name)
    current = param.envvar
    others = [current] if isinstance(current, str) else list(current or [])
    param.envvar = [env, *(v for v in others if v != env)] if others else env
    param.show_envvar = True


def configure(group: Any, option: Any, *, root: bool = True) -> None:
    """Give every option of `group`'s commands its variable and every command `--config` (module docstring)."""
    for param in group.params:
        _with_env(param, root=root)
    for command in group.commands.values():
        if hasattr(command, "commands"):
            configure(command, option, root=False)
            continue
        for param in command.params:
            _with_env(param, root=False)
        if not any(long_name(p) == "config" for p in command.params):
            command.params.append(option)


class ConfigurableGroup(TyperGroup):
    """The `devplace` group: every command configurable from the environment and `--config` (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        configure(self, _config_option())
