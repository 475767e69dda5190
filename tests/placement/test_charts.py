"""What EMCO's multipart file parts carry: chart archives (plain manifests only) and kubeconfigs."""

from __future__ import annotations

import io
import tarfile

import pytest

from devplace import errors
from devplace.placement._charts import chart_manifests, kubeconfig_server
from tests.placement.samples import chart_archive, kubeconfig, manifests_text, workload

DEPLOYMENT = manifests_text(workload("Deployment", "web", "main"))
SERVICE = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n"


def test_a_charts_plain_templates_are_its_manifests_in_name_order() -> None:
    chart = chart_archive(
        "web",
        {"service.yaml": SERVICE, "deployment.yml": DEPLOYMENT},
        extra={
            "templates/NOTES.txt": "{{ .Release.Name }} installed",
            "templates/_helpers.tpl": '{{- define "web.name" -}}web{{- end }}',
            "charts/sub/templates/x.yaml": "{{ .Values.x }}",  # subcharts are not read
        },
    )
    docs = chart_manifests(chart, "web.tgz")
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [("Deployment", "web"), ("Service", "web")]


def test_a_template_that_needs_helm_is_refused_naming_the_file_and_line() -> None:
    templated = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\n"
    chart = chart_archive("web", {"deployment.yaml": DEPLOYMENT, "config.yaml": templated})
    with pytest.raises(errors.Invalid) as info:
        chart_manifests(chart, "web.tgz")
    assert info.value.fields[0].path == "file"
    assert info.value.fields[0].reason.startswith(
        "web/templates/config.yaml needs Helm's template engine ('{{' on line 4)"
    )


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"not an archive", "web.tgz is not a chart archive"),
        (chart_archive("web", {}), "web.tgz: no manifests under web/templates/"),
        (chart_archive("web", {"a.yaml": "kind: Pod\n"}), "web/templates/a.yaml document 1: apiVersion: required"),
        (chart_archive("web", {"a.yaml": DEPLOYMENT, "b.yaml": DEPLOYMENT}), "b.yaml document 1: duplicate Deployment"),
        (chart_archive("web", {"a.yaml": "a: [\n"}), "web/templates/a.yaml: malformed YAML"),
    ],
)
def test_bad_chart_archives_are_refused_with_the_reason(data: bytes, reason: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        chart_manifests(data, "web.tgz")
    assert reason in info.value.fields[0].reason


def test_an_archive_without_chart_yaml_still_gives_its_templates() -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as archive:
        data = DEPLOYMENT.encode()
        info = tarfile.TarInfo("templates/deployment.yaml")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    assert [d["kind"] for d in chart_manifests(out.getvalue())] == ["Deployment"]


def test_a_kubeconfig_gives_its_current_clusters_server() -> None:
    assert kubeconfig_server(kubeconfig("https://10.0.0.1:6443").encode()) == "https://10.0.0.1:6443"
    only = "clusters: [{name: a, cluster: {server: 'http://127.0.0.1:8080'}}]\n"
    assert kubeconfig_server(only.encode()) == "http://127.0.0.1:8080"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("[", "not a kubeconfig (YAML)"),
        ("- a\n", "expected a mapping"),
        ("current-context: x\ncontexts: []\n", "current-context 'x' is not among its contexts"),
        ("clusters: []\n", "not exactly one cluster"),
        ("clusters: [{name: a, cluster: {server: 'ftp://x'}}]\n", "is not an http(s) URL"),
    ],
)
def test_bad_kubeconfigs_are_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(errors.Invalid) as info:
        kubeconfig_server(text.encode())
    assert reason in info.value.fields[0].reason
