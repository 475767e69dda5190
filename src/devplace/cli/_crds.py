"""`devplace crds`: the CustomResourceDefinitions of devplace's kinds, for a Kubernetes cluster (`--store kube://`).

    devplace crds                               # every CRD, as one YAML stream on stdout
    devplace crds -o deploy/kubernetes/crds     # one file per CRD (<plural>.<group>.yaml) and a kustomization.yaml

The CRDs come from the models (`kubeapi.crds`); their short names and categories from the API discovery `devplace
server` serves (`server.discoveries`), so a cluster and devplace's own server name things alike.
`deploy/kubernetes/crds` is this command's output, and tests/deploy fails when the models drift from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from devplace.cli._resources import fail, register_fleet_kinds


def definitions() -> list[dict[str, Any]]:
    """Every CRD, named as devplace's discovery names the kinds."""
    from devplace.kubeapi import crd_group_versions, custom_resource_definitions
    from devplace.server import api_resource_list

    register_fleet_kinds()

    discovered = {gv: api_resource_list(gv)["resources"] for gv in crd_group_versions()}
    return custom_resource_definitions(discovered)


def crds_command(
    out_dir: Annotated[
        Path | None,
        typer.Option("--output-dir", "-o", help="Write one file per CRD and a kustomization.yaml into this directory"),
    ] = None,
) -> None:
    """Print the CustomResourceDefinitions of devplace's kinds (akri.sh ones compatible with Akri's), or write them."""
    from devplace.kubeapi import crd_yaml, file_name, kustomization_yaml

    found = definitions()
    if out_dir is None:
        typer.echo("---\n".join(crd_yaml(crd) for crd in found), nl=False)
        return
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for crd in found:
            (out_dir / file_name(crd)).write_text(crd_yaml(crd), encoding="utf-8")
        (out_dir / "kustomization.yaml").write_text(kustomization_yaml(found), encoding="utf-8")
    except OSError as e:
        raise fail(f"{out_dir}: {e.strerror or e}") from None
    typer.echo(f"wrote {len(found)} CustomResourceDefinitions and kustomization.yaml to {out_dir}", err=True)


def register(app: typer.Typer) -> None:
    app.command("crds")(crds_command)
