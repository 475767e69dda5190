"""`devplace render --akri-values values.yaml [--set key=value ...]`: the devplace manifests an Akri Helm install gives.

    devplace render --akri-values values.yaml > akri.yaml
    devplace render --akri-values values.yaml --set udev.configuration.enabled=true \\
        --set 'udev.configuration.discoveryDetails.udevRules[0]=KERNEL=="video[0-9]*"'
    devplace render --set debugEcho.configuration.enabled=true            # the chart's defaults, and a --set

The values file (several may be given; later ones win, as with `helm -f`) is merged over Akri's chart defaults
(`devplace.cli._akrivalues.DEFAULTS`), then each `--set` (and `--set-string`) is applied, in Helm's order and grammar
(`devplace.cli._helmvalues`). The output is one YAML stream: the Configurations, each validated as `devplace apply`
validates it (so a values file that would install a Configuration devplace refuses fails here, naming it), then the
strategic-merge patches of devplace's agent DaemonSet and controller Deployment (deploy/kubernetes; kustomize's
`patches:` applies them), then the PodMonitors when `prometheus.enabled`. A bad file or `--set` is one `error:` line
and exit code 1; nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from devplace.cli._resources import fail, validate_document


def _load_values(path: Path) -> dict[str, Any]:
    from devplace import errors

    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise errors.Invalid.field(str(path), e.strerror or str(e)) from e
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise errors.Malformed(f"{path}: not YAML: {e}") from e
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise errors.Invalid.field(str(path), f"expected a map of values, got {type(loaded).__name__}")
    return loaded


def rendered(values_files: list[Path], sets: list[str], set_strings: list[str]) -> list[dict[str, Any]]:
    """The documents `devplace render` writes (module docstring); devplace's errors name what is wrong."""
    from devplace import errors
    from devplace.cli._akrivalues import DEFAULTS, render
    from devplace.cli._helmvalues import apply_sets, merge

    values: dict[str, Any] = dict(DEFAULTS)
    for path in values_files:
        values = merge(values, _load_values(path))
    values = merge(values, apply_sets({}, sets))
    values = merge(values, apply_sets({}, set_strings, as_string=True))
    documents = list(render(values))
    for document in documents:
        if document.get("kind") == "Configuration":
            try:
                validate_document(document)
            except errors.Invalid as e:
                raise errors.Invalid(f"Configuration {document['metadata']['name']}: {e.message}", e.fields) from e
    return documents


def render_command(
    akri_values: Annotated[
        list[Path] | None,
        typer.Option("--akri-values", "-f", help="An Akri Helm chart values file (repeatable; later ones win)"),
    ] = None,
    sets: Annotated[
        list[str] | None,
        typer.Option("--set", help="Set a value as `helm --set` does: a.b.c=v, a[0]=v, a={x,y} (repeatable)"),
    ] = None,
    set_strings: Annotated[
        list[str] | None, typer.Option("--set-string", help="As --set, every value a string (repeatable)")
    ] = None,
) -> None:
    """Print the devplace manifests an Akri Helm install with these values gives (Configurations, patches)."""
    from devplace import errors

    try:
        documents = rendered(akri_values or [], sets or [], set_strings or [])
    except errors.DevplaceError as e:
        raise fail(e.message) from None
    typer.echo(
        "".join("---\n" + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120) for doc in documents),
        nl=False,
    )


def register(app: typer.Typer) -> None:
    app.command("render")(render_command)
