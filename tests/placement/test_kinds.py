"""The stored fleet kinds (`devplace.placement._kinds`): registered, cluster-scoped, validated by the registry."""

from __future__ import annotations

import subprocess
import sys

import pytest

from devplace import errors
from devplace.api import _registry as registry
from devplace.placement import _levels as levels
from devplace.placement._kinds import API_VERSION


def test_fleet_kinds_are_registered_cluster_scoped() -> None:
    for level in levels.LEVELS:
        info = registry.lookup(level.kind)
        assert not info.namespaced
        assert info.group_versions == (API_VERSION,)


def test_a_stored_object_is_validated_by_the_registry() -> None:
    level = levels.PROJECT
    obj = {
        "apiVersion": API_VERSION,
        "kind": "Project",
        "metadata": {"name": level.store_name(("p",))},
        "spec": {"path": ["p"], "emco": {"metadata": {"name": "p"}}},
    }
    assert registry.normalize(obj)["spec"]["emco"] == {"metadata": {"name": "p"}}
    with pytest.raises(errors.Invalid, match=r"spec\.path must have 1 segments"):
        registry.normalize({**obj, "spec": {"path": [], "emco": {"metadata": {"name": "p"}}}})
    with pytest.raises(errors.Invalid, match=r"metadata\.name"):
        registry.normalize({**obj, "spec": {"path": ["p"], "emco": {"metadata": {"name": "-"}}}})


def _fresh(code: str) -> str:
    """What `code` prints in a fresh interpreter (nothing imported yet, so nothing registered yet)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _loaded_placement_modules(*packages: str) -> str:
    return _fresh(
        f"import sys, {', '.join(packages)}\n"
        "print(sorted(m for m in sys.modules if m.startswith('devplace.placement')))"
    )


def test_the_node_agent_and_the_store_build_no_emco_models() -> None:
    assert _loaded_placement_modules("devplace.api", "devplace.store", "devplace.agent") == "[]"


def test_the_cli_starts_up_without_emco_models_until_a_command_names_kinds() -> None:
    assert _loaded_placement_modules("devplace.cli._app") == "[]"


def test_importing_placement_registers_every_fleet_kind() -> None:
    found = _fresh(
        "from devplace.api import kinds\n"
        "before = {k.kind for k in kinds()}\n"
        "import devplace.placement\n"
        "print(sorted({k.kind for k in kinds()} - before))"
    )
    assert found == str(sorted(level.kind for level in levels.LEVELS))


def test_the_cli_commands_that_name_kinds_know_the_fleet_kinds() -> None:
    got = _fresh(
        "from typer.testing import CliRunner\n"
        "from devplace.cli._app import app\n"
        "from devplace.cli._crds import definitions\n"
        "r = CliRunner()\n"
        "print(r.invoke(app, ['get', 'projects', '--store', 'memory']).output.strip())\n"
        "print(r.invoke(app, ['explain', 'apps', 'x', '--store', 'memory']).output.strip())\n"
        "print(sum(c['spec']['group'] == 'fleet.devplace.io' for c in definitions()))"
    )
    assert got.splitlines() == [
        "No resources found.",
        "error: kind: only pods, resource classes and configurations are explained, not 'apps'",
        str(len(levels.LEVELS)),
    ]
