"""What EMCO's multipart file parts carry, read into plain data. Pure (bytes in, data or `errors.Invalid` out).

- An app's Helm chart archive (`.tgz`, `.tar.gz` or `.tar`): the chart is the directory holding `Chart.yaml` (the
  shallowest one; an archive without one may still hold a `templates/` directory). Its plain manifests under
  `templates/` (`.yaml`, `.yml`, `.json`, in name order; partials `_*.tpl` and `NOTES.txt` are not manifests, and
  subcharts under `charts/` are not read) are the app's manifests. devplace has no Helm: a template that needs Helm's
  engine (any `{{`) is refused naming the file and line, and `values.yaml` is not applied.
- A cluster's kubeconfig: the `server` of the current context's cluster (or of the only cluster) becomes the
  cluster's API endpoint, read for live inventories and given the instantiated objects. Credentials are not kept.

The archive is read in memory and capped (`MAX_CHART_BYTES` unpacked), so a small archive cannot unpack into
gigabytes.
"""

from __future__ import annotations

import io
import posixpath
import re
import tarfile
from typing import Any

import yaml

from devplace import errors
from devplace.api import parse_documents, yaml_value
from devplace.placement._bodies import check_manifests

MAX_CHART_BYTES = 16 * 1024 * 1024
_MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


def _invalid(reason: str) -> errors.Invalid:
    return errors.Invalid.field("file", reason)


def _chart_root(files: list[str]) -> str | None:
    """The directory of the shallowest Chart.yaml, else the parent of the shallowest `templates` directory."""
    charts = sorted((f for f in files if posixpath.basename(f) == "Chart.yaml"), key=lambda f: (f.count("/"), f))
    if charts:
        return posixpath.dirname(charts[0])
    roots = sorted(
        {f.split("/templates/")[0] if not f.startswith("templates/") else "" for f in files if "templates/" in f},
        key=lambda r: (r.count("/"), r),
    )
    return roots[0] if roots else None


def _is_template(name: str, root: str) -> bool:
    prefix = f"{root}/templates/" if root else "templates/"
    if not name.startswith(prefix):
        return False
    rest = name[len(prefix) :]
    base = posixpath.basename(rest)
    return base.endswith(_MANIFEST_SUFFIXES) and not base.startswith(("_", "."))


def chart_manifests(data: bytes, filename: str = "chart") -> list[dict[str, Any]]:
    """The plain manifests under the chart's `templates/`; `Invalid` naming `file` (and the template) otherwise."""
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")  # noqa: SIM115 (closed by the `with` below)
    except (tarfile.TarError, EOFError, OSError) as e:
        raise _invalid(f"{filename} is not a chart archive (.tgz, .tar.gz or .tar): {e}") from e
    with archive:
        members = {m.name.lstrip("./"): m for m in archive.getmembers() if m.isfile()}
        root = _chart_root(sorted(members))
        if root is None:
            raise _invalid(f"{filename} holds no chart (no Chart.yaml and no templates/ directory)")
        templates = sorted(name for name in members if _is_template(name, root))
        total = 0
        docs: list[Any] = []
        origin: list[str] = []
        for name in templates:
            member = members[name]
            total += member.size
            if total > MAX_CHART_BYTES:
                raise _invalid(f"{filename}: the templates unpack to more than {MAX_CHART_BYTES} bytes")
            extracted = archive.extractfile(member)
            raw = extracted.read() if extracted is not None else b""
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _invalid(f"{name}: not UTF-8 text") from e
            engine = re.search(r"\{\{", text)
            if engine is not None:
                line = text.count("\n", 0, engine.start()) + 1
                raise _invalid(
                    f"{name} needs Helm's template engine ('{{{{' on line {line}); devplace reads charts of plain "
                    "manifests only: render the chart (helm template) and register the result"
                )
            try:
                found = parse_documents(text)
            except errors.Invalid as e:
                raise _invalid(f"{name}: {e.message}") from e
            docs.extend(found)
            origin.extend(f"{name} document {i + 1}" for i in range(len(found)))
    if not docs:
        raise _invalid(f"{filename}: no manifests under {root + '/' if root else ''}templates/")
    try:
        check_manifests(docs, lambda i: origin[i])
    except ValueError as e:
        raise _invalid(str(e)) from e
    return docs


def kubeconfig_server(data: bytes) -> str:
    """The API server a kubeconfig points at (current context's cluster, else the only one)."""
    try:
        config = yaml_value(data.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as e:
        raise _invalid(f"not a kubeconfig (YAML): {e}") from e
    except errors.Invalid as e:
        raise _invalid(f"not a kubeconfig: {e.message}") from e
    if not isinstance(config, dict):
        raise _invalid("not a kubeconfig: expected a mapping with clusters and contexts")
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or [] if isinstance(c, dict)}
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or [] if isinstance(c, dict)}
    current = config.get("current-context")
    if current:
        if current not in contexts:
            raise _invalid(f"kubeconfig: current-context {current!r} is not among its contexts")
        name = contexts[current].get("cluster")
        if name not in clusters:
            raise _invalid(f"kubeconfig: context {current!r} names cluster {name!r}, which it does not define")
        cluster = clusters[name]
    elif len(clusters) == 1:
        cluster = next(iter(clusters.values()))
    else:
        raise _invalid("kubeconfig: no current-context, and not exactly one cluster to choose")
    server = cluster.get("server") if isinstance(cluster, dict) else None
    if not isinstance(server, str) or not re.match(r"^https?://[^\s/]+(/\S*)?$", server):
        raise _invalid(f"kubeconfig: the cluster's server {server!r} is not an http(s) URL")
    return server
