"""`devplace crds`: the CustomResourceDefinitions of devplace's kinds, for a Kubernetes cluster (`--store kube://`).

    devplace crds                               # every CRD, as one YAML stream on stdout
    devplace crds -o deploy/kubernetes/crds     # one file per CRD (<plural>.<group>.yaml) and a kustomization.yaml
    devplace crds --device-classes cams.yaml    # and a DRA DeviceClass per Configuration in cams.yaml

The CRDs come from the models (`kubeapi.crds`); their short names and categories from the API discovery `devplace
server` serves (`server.discoveries`), so a cluster and devplace's own server name things alike.
`deploy/kubernetes/crds` is this command's output, and tests/deploy fails when the models drift from it.

`--device-classes FILE` (repeatable) adds, per Configuration in the manifest files, the DRA DeviceClass that selects its
devices as the devplace.io driver publishes them (`api.compile_configuration`, what `devplace explain configuration`
prints): on a cluster with DRA, claims name it. They follow the CRDs on stdout, or go to `deviceclasses.yaml` beside
them with `-o` (not in the kustomization: a cluster without resource.k8s.io/v1 refuses them). A file that cannot be
read or a Configuration that does not validate is refused naming the file and the document; nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from devplace import errors
from devplace.cli._resources import fail, register_fleet_kinds


def definitions() -> list[dict[str, Any]]:
    """Every CRD, named as devplace's discovery names the kinds."""
    from devplace.kubeapi import crd_group_versions, custom_resource_definitions
    from devplace.server import api_resource_list

    register_fleet_kinds()

    discovered = {gv: api_resource_list(gv)["resources"] for gv in crd_group_versions()}
    return custom_resource_definitions(discovered)


def device_classes(paths: list[Path]) -> list[dict[str, Any]]:
    """The DeviceClass of every Configuration in the manifest files `paths`, in file and document order."""
    from devplace.api import compile_configuration, load_documents

    out: list[dict[str, Any]] = []
    for path in paths:
        try:
            documents = load_documents(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise fail(f"--device-classes {path}: {e.strerror or e}") from None
        except errors.DevplaceError as e:
            raise fail(f"--device-classes {path}: {e}") from None
        for document in documents:
            if document.error is not None:
                raise fail(f"--device-classes {path}, document {document.index}: {document.error}")
            if document.obj is not None and document.obj.get("kind") == "Configuration":
                out.append(compile_configuration(document.obj))
    return out


def crds_command(
    out_dir: Annotated[
        Path | None,
        typer.Option("--output-dir", "-o", help="Write one file per CRD and a kustomization.yaml into this directory"),
    ] = None,
    classes_from: Annotated[
        list[Path] | None,
        typer.Option(
            "--device-classes",
            help="Also a DRA DeviceClass (driver devplace.io) per Configuration in this manifest file (repeatable)",
        ),
    ] = None,
) -> None:
    """Print the CustomResourceDefinitions of devplace's kinds (akri.sh ones compatible with Akri's), or write them."""
    from devplace.cli._output import to_yaml
    from devplace.kubeapi import crd_yaml, file_name, kustomization_yaml

    found = definitions()
    classes = device_classes(classes_from or [])
    class_yaml = "".join(f"---\n{to_yaml(c)}\n" for c in classes)
    if out_dir is None:
        typer.echo("---\n".join(crd_yaml(crd) for crd in found) + class_yaml, nl=False)
        return
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for crd in found:
            (out_dir / file_name(crd)).write_text(crd_yaml(crd), encoding="utf-8")
        (out_dir / "kustomization.yaml").write_text(kustomization_yaml(found), encoding="utf-8")
        if classes:
            (out_dir / "deviceclasses.yaml").write_text(class_yaml, encoding="utf-8")
    except OSError as e:
        raise fail(f"{out_dir}: {e.strerror or e}") from None
    typer.echo(f"wrote {len(found)} CustomResourceDefinitions and kustomization.yaml to {out_dir}", err=True)


def register(app: typer.Typer) -> None:
    app.command("crds")(crds_command)
