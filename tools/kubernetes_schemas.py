"""Write (or check) the Kubernetes definitions devplace's OpenAPI serves for the built-in kinds.

Usage: ``python tools/kubernetes_schemas.py`` rewrites ``src/devplace/api/kubernetes-definitions.json``;
``python tools/kubernetes_schemas.py --check`` exits 1 if the committed file differs from a fresh one
(tests/kubeapi/test_openapis.py runs the check).

Kubernetes' own schemas (with their field docs and the `x-kubernetes-patch-*` facts kubectl relies on) come from the
`kubernetes-validate` dev dependency, which ships them as JSON Schema per Kubernetes version. Only the definitions
reachable from the kinds devplace serves from the core, apps and batch groups (and the meta types every API uses) are
kept, turned back into the Swagger 2.0 form the apiserver serves: `type: [X, "null"]` becomes `type: X`, the
`oneOf` forms of Quantity and IntOrString become `type: string` (IntOrString with `format: int-or-string`),
`#/$defs/` references become `#/definitions/`, and the `enum` openapi2jsonschema adds to a kind's `apiVersion` and
`kind` is dropped. The server then needs no copy of kubernetes-validate at run time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "devplace" / "api" / "kubernetes-definitions.json"
KUBERNETES_VERSION = "1.32.0"

_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
ROOTS = (
    *(
        f"io.k8s.api.core.v1.{kind}{suffix}"
        for kind in ("Pod", "Service", "ConfigMap", "Secret", "Node", "Namespace")
        for suffix in ("", "List")
    ),
    "io.k8s.api.apps.v1.Deployment",
    "io.k8s.api.apps.v1.DeploymentList",
    "io.k8s.api.batch.v1.Job",
    "io.k8s.api.batch.v1.JobList",
    "io.k8s.api.autoscaling.v1.Scale",
    *(
        f"io.k8s.api.{group}.v1.{kind}{suffix}"
        for group, kind in (
            ("core", "Event"),
            ("core", "ServiceAccount"),
            ("events", "Event"),
            ("rbac", "Role"),
            ("rbac", "ClusterRole"),
            ("rbac", "RoleBinding"),
            ("rbac", "ClusterRoleBinding"),
        )
        for suffix in ("", "List")
    ),
    *(_META + name for name in ("Status", "DeleteOptions", "Patch", "WatchEvent", "ListMeta", "ObjectMeta")),
)
"""Every built-in kind devplace serves (Namespace, Event, ServiceAccount and the RBAC kinds among them), their lists,
the Scale subresource and the meta types the paths use; their references are followed."""

_SHORT_DOCS = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": (
        "Quantity is a fixed-point representation of a number, written as a string such as `100m`, `2`, `1.5Gi` "
        "or `1e3` (an integer is accepted too)."
    ),
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": (
        "IntOrString holds an integer or a string (e.g. `8080` or `http`)."
    ),
}


def _schemas_dir() -> Path:
    import kubernetes_validate  # dev dependency; only this tool and the tests use it

    return Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{KUBERNETES_VERSION}-local"


def _references(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = []
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                found.append(value.rsplit("/", 1)[1])
            else:
                found.extend(_references(value))
        return found
    if isinstance(node, list):
        return [ref for item in node for ref in _references(item)]
    return []


def to_swagger(node: Any) -> Any:
    """One JSON Schema node of kubernetes-validate in the apiserver's Swagger 2.0 form (see the module docstring)."""
    if isinstance(node, list):
        return [to_swagger(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "type" and isinstance(value, list):
            kept = [t for t in value if t != "null"]
            out["type"] = kept[0] if len(kept) == 1 else kept
        elif key == "$ref":
            out["$ref"] = "#/definitions/" + value.rsplit("/", 1)[1]
        elif key == "oneOf":
            types = {t for branch in value for t in (branch.get("type") or []) if t != "null"}
            out["type"] = "string"
            if types == {"string", "integer"}:
                out["format"] = "int-or-string"
        else:
            out[key] = to_swagger(value)
    return out


def build() -> dict[str, Any]:
    """The kept definitions, keyed by Kubernetes' names, in Swagger 2.0 form."""
    source = json.loads((_schemas_dir() / "_definitions.json").read_text())["$defs"]
    kept: dict[str, Any] = {}
    pending = list(ROOTS)
    while pending:
        name = pending.pop()
        if name in kept:
            continue
        kept[name] = source[name]
        pending.extend(_references(source[name]))
    out = {}
    for name in sorted(kept):
        schema = to_swagger(kept[name])
        if "x-kubernetes-group-version-kind" in schema:
            for field in ("apiVersion", "kind"):
                schema.get("properties", {}).get(field, {}).pop("enum", None)
        if name in _SHORT_DOCS:
            schema["description"] = _SHORT_DOCS[name]
        out[name] = schema
    return {"kubernetesVersion": KUBERNETES_VERSION, "definitions": out}


def render() -> str:
    return json.dumps(build(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if the committed file differs from a fresh one")
    ns = parser.parse_args()
    fresh = render()
    if ns.check:
        if not OUT.exists() or OUT.read_text() != fresh:
            print(
                f"error: {OUT.relative_to(ROOT)} is out of date; run python tools/kubernetes_schemas.py",
                file=sys.stderr,
            )
            return 1
        print(f"kubernetes definitions: {OUT.relative_to(ROOT)} up to date")
        return 0
    OUT.write_text(fresh)
    print(f"kubernetes definitions: wrote {len(json.loads(fresh)['definitions'])} to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
