"""The one kubeconfig reader (`store.kubeconfigs`): which context serves which server URL, merged KUBECONFIG lists,
relative paths and base64 data, finding the configuration as client-go does (a named file, KUBECONFIG,
~/.kube/config, the pod's service account), and the refusals, each naming the field and the reason (pure file
reading; the HTTP side is in tests/store/test_restclients.py and tests/server)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from devplace import errors
from devplace.store import _kubeconfigs as kubeconfigs
from devplace.store._kubeconfigs import Kubeconfig, ServerConfig, credentials_for_server, current_server, find
from devplace.store._restclients import Credentials, ExecPlugin


def kubeconfig(path: Path, contexts: dict[str, tuple[str, dict[str, Any]]], current: str | None = None) -> Path:
    """A kubeconfig with one cluster and one user per context: {context: (server, user entry)}."""
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": f"{n}-cluster", "cluster": {"server": s}} for n, (s, _) in contexts.items()],
        "users": [{"name": f"{n}-user", "user": u} for n, (_, u) in contexts.items()],
        "contexts": [{"name": n, "context": {"cluster": f"{n}-cluster", "user": f"{n}-user"}} for n in contexts],
    }
    if current:
        doc["current-context"] = current
    path.write_text(yaml.safe_dump(doc))
    return path


def edit(path: Path, change: Any) -> Path:
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def no_cluster_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No service account environment, no KUBECONFIG, and a HOME of our own; returns that HOME."""
    for name in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT", "KUBECONFIG"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    (home / ".kube").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    return home


# -- credentials for a server URL -----------------------------------------------------------------------------------


def test_the_context_naming_the_server_url_gives_the_credentials(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "config",
        {
            "prod": ("https://k8s.example:6443", {"token": "prod-token"}),
            "dev": ("http://127.0.0.1:8080/", {"token": "dev"}),
        },
        current="prod",
    )
    assert credentials_for_server("http://127.0.0.1:8080", kubeconfig=str(path)).token == "dev"
    assert credentials_for_server("HTTP://127.0.0.1:8080/", kubeconfig=str(path)).token == "dev"
    assert credentials_for_server("https://k8s.example", kubeconfig=str(path)) == Credentials()  # 443 is not 6443
    assert credentials_for_server("https://K8S.example:6443", kubeconfig=str(path)).token == "prod-token"
    assert credentials_for_server("http://127.0.0.1:9090", kubeconfig=str(path)) == Credentials()
    assert credentials_for_server("http://127.0.0.1:8080", token="mine", kubeconfig=str(path)).token == "mine"
    assert credentials_for_server("http://127.0.0.1:8080", token="mine") == Credentials(token="mine")


def test_the_current_context_wins_when_several_name_the_server(tmp_path: Path) -> None:
    contexts = {"a": ("http://h:1", {"token": "a"}), "b": ("http://h:1", {"token": "b"})}
    assert credentials_for_server("http://h:1", kubeconfig=str(kubeconfig(tmp_path / "c", contexts, "b"))).token == "b"
    assert credentials_for_server("http://h:1", kubeconfig=str(kubeconfig(tmp_path / "d", contexts))).token == "a"


def test_a_kubeconfig_list_is_merged_the_first_file_winning(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "first", {"x": ("http://h:1", {"token": "first"})}, current="x")
    second = kubeconfig(tmp_path / "second", {"x": ("http://h:2", {"token": "second"}), "y": ("http://h:3", {})}, "y")
    paths = f"{first}:{tmp_path / 'missing'}:{second}"
    assert credentials_for_server("http://h:1", kubeconfig=paths).token == "first"
    assert credentials_for_server("http://h:2", kubeconfig=paths) == Credentials()  # context x is the first file's
    assert current_server(paths) == "http://h:1"
    assert Kubeconfig.read(paths).current_context == "x"


def test_files_named_in_a_kubeconfig_are_relative_to_it_and_data_is_base64(tmp_path: Path) -> None:
    (tmp_path / "auth").mkdir()
    (tmp_path / "auth" / "token").write_text("from-file\n")
    user = {"tokenFile": "auth/token", "client-certificate": "auth/c.pem", "client-key": "/abs/k.pem"}
    path = kubeconfig(tmp_path / "config", {"x": ("https://h:1", user)}, "x")
    found = credentials_for_server("https://h:1", kubeconfig=str(path))
    assert found.token == "from-file"
    assert found.token_file == str(tmp_path / "auth" / "token")  # re-read on a 401
    assert found.cert_file == str(tmp_path / "auth" / "c.pem")
    assert found.key_file == "/abs/k.pem"
    pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    encoded = base64.b64encode(pem.encode()).decode()

    def with_data(doc: dict[str, Any]) -> None:
        doc["clusters"][0]["cluster"]["certificate-authority-data"] = encoded
        doc["users"][0]["user"] = {"client-certificate-data": encoded, "client-key-data": encoded}

    found = credentials_for_server("https://h:1", kubeconfig=str(edit(path, with_data)))
    assert (found.ca_data, found.cert_data, found.key_data) == (pem, pem, pem)


def test_an_explicit_token_replaces_the_kubeconfigs_token_and_its_file(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("from-file")
    path = kubeconfig(tmp_path / "config", {"x": ("http://h:1", {"tokenFile": str(tmp_path / "token")})}, "x")
    assert credentials_for_server("http://h:1", token="mine", kubeconfig=str(path)) == Credentials(token="mine")


def test_exec_plugins_and_basic_auth_are_read_unless_the_caller_refuses_them(tmp_path: Path) -> None:
    plugin = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": "aws",
        "args": ["eks", "get-token"],
        "env": [{"name": "AWS_PROFILE", "value": "edge"}],
    }
    path = kubeconfig(tmp_path / "config", {"x": ("http://h:1", {"exec": plugin, "username": "u", "password": "p"})})
    found = credentials_for_server("http://h:1", kubeconfig=str(path))
    expected = ExecPlugin(plugin["apiVersion"], "aws", ("eks", "get-token"), (("AWS_PROFILE", "edge"),))
    assert (found.exec_plugin, found.username, found.password) == (expected, "u", "p")
    with pytest.raises(errors.Invalid) as caught:
        credentials_for_server("http://h:1", kubeconfig=str(path), unsupported=("exec", "username", "password"))
    assert [f.path for f in caught.value.fields] == ["kubeconfig.user.exec"]


@pytest.mark.parametrize(
    ("user", "field"),
    [
        ({"exec": {"command": "aws"}}, "kubeconfig.user.exec"),
        ({"auth-provider": {"name": "gcp"}}, "kubeconfig.user.auth-provider"),
        ({"username": "u", "password": "p"}, "kubeconfig.user.username"),
        ({"client-certificate-data": "not base64!"}, "kubeconfig.client-certificate-data"),
        ({"tokenFile": "nowhere"}, "kubeconfig.user.tokenFile"),
    ],
)
def test_credentials_a_caller_cannot_use_are_refused_naming_the_field(
    tmp_path: Path, user: dict[str, Any], field: str
) -> None:
    path = kubeconfig(tmp_path / "config", {"x": ("http://h:1", user)}, "x")
    with pytest.raises(errors.Invalid) as caught:
        credentials_for_server("http://h:1", kubeconfig=str(path), unsupported=("exec", "username", "password"))
    assert [f.path for f in caught.value.fields] == [field]


@pytest.mark.parametrize(
    ("plugin", "field", "reason"),
    [
        ({"command": "aws"}, "kubeconfig.user.exec.apiVersion", "None is not supported"),
        ({"apiVersion": "client.authentication.k8s.io/v1beta1"}, "kubeconfig.user.exec.command", "is required"),
        (
            {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws", "args": "eks"},
            "kubeconfig.user.exec.args",
            "is not a list of strings",
        ),
        (
            {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws", "env": [{"name": "A"}]},
            "kubeconfig.user.exec.env",
            "is not a list of name/value pairs",
        ),
    ],
)
def test_an_exec_plugin_that_cannot_run_is_refused_naming_its_field(
    tmp_path: Path, plugin: dict[str, Any], field: str, reason: str
) -> None:
    path = kubeconfig(tmp_path / "config", {"x": ("http://h:1", {"exec": plugin})}, "x")
    with pytest.raises(errors.Invalid) as caught:
        credentials_for_server("http://h:1", kubeconfig=str(path))
    assert [f.path for f in caught.value.fields] == [field]
    assert reason in caught.value.fields[0].reason


def test_a_kubeconfig_without_a_current_server_names_no_store(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "config", {"x": ("http://h:1", {})})
    with pytest.raises(errors.Invalid, match="no current context"):
        current_server(str(path))
    (tmp_path / "broken").write_text("clusters: [")
    with pytest.raises(errors.Invalid, match="is not YAML"):
        current_server(str(tmp_path / "broken"))
    (tmp_path / "list").write_text("- a\n")
    with pytest.raises(errors.Invalid, match=r"is not a kubeconfig \(a mapping\)"):
        current_server(str(tmp_path / "list"))


def test_a_kubeconfig_that_is_a_yaml_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for level in range(1, 9):
        refs = ",".join([f"*{chr(96 + level)}"] * 9)
        lines.append(f"{chr(97 + level)}: &{chr(97 + level)} [{refs}]")
    bomb = tmp_path / "bomb.kubeconfig"
    bomb.write_text("\n".join(lines) + "\n")
    with pytest.raises(errors.Invalid, match="kubeconfig") as info:
        current_server(str(bomb))
    assert "alias" in info.value.message
    with pytest.raises(errors.Invalid) as found:
        find(str(bomb))
    assert [f.path for f in found.value.fields] == ["kubeconfig"]
    assert "alias" in found.value.message


# -- a context by name ----------------------------------------------------------------------------------------------


def test_a_named_kubeconfig_gives_its_current_context_or_the_one_asked_for(
    tmp_path: Path, no_cluster_env: Path
) -> None:
    path = kubeconfig(
        tmp_path / "kc", {"lab": ("https://lab:6443", {"token": "t-lab"}), "edge": ("https://edge:6443", {})}, "lab"
    )
    assert find(str(path)) == ServerConfig("https://lab:6443", Credentials(token="t-lab"), "lab")
    assert find(str(path), "edge") == ServerConfig("https://edge:6443", Credentials(), "edge")


def test_a_context_without_a_user_has_only_its_clusters_credentials(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "kc", {"x": ("https://h:1", {})}, "x")

    def no_user(doc: dict[str, Any]) -> None:
        del doc["contexts"][0]["context"]["user"]
        doc["clusters"][0]["cluster"]["certificate-authority"] = "ca.pem"

    assert Kubeconfig.read_file(str(edit(path, no_user))).context() == ServerConfig(
        "https://h:1", Credentials(ca_file=str(tmp_path / "ca.pem")), "x"
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda doc: doc.pop("current-context"), "has no current-context"),
        (lambda doc: doc.update({"current-context": "absent"}), "Context 'absent' not found"),
        (lambda doc: doc.update({"clusters": []}), "names cluster 'x-cluster', which"),
        (lambda doc: doc.update({"users": []}), "names user 'x-user', which"),
        (lambda doc: doc["clusters"][0]["cluster"].pop("server"), "has no http(s) server: None"),
        (lambda doc: doc["clusters"][0]["cluster"].update({"server": "h:1"}), "has no http(s) server: 'h:1'"),
    ],
)
def test_a_context_that_cannot_be_used_is_refused_naming_kubeconfig_and_the_reason(
    tmp_path: Path, change: Any, reason: str
) -> None:
    path = edit(kubeconfig(tmp_path / "kc", {"x": ("https://h:1", {})}, "x"), change)
    with pytest.raises(errors.Invalid) as caught:
        find(str(path))
    assert [f.path for f in caught.value.fields] == ["kubeconfig"]
    assert reason in caught.value.message


def test_a_named_kubeconfig_that_does_not_exist_is_refused(tmp_path: Path, no_cluster_env: Path) -> None:
    with pytest.raises(errors.Invalid) as caught:
        find(str(tmp_path / "nowhere"))
    assert caught.value.message == f"kubeconfig: {tmp_path / 'nowhere'} not found"


def test_without_a_path_the_first_existing_kubeconfig_file_listed_in_kubeconfig_is_used(
    tmp_path: Path, no_cluster_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    second = kubeconfig(tmp_path / "second", {"two": ("https://two:6443", {})}, "two")
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{second}")
    assert kubeconfigs.kubeconfig_from_env() == str(second)
    assert find().server == "https://two:6443"


def test_without_kubeconfig_the_home_kube_config_is_used(no_cluster_env: Path) -> None:
    kubeconfig(no_cluster_env / ".kube" / "config", {"home": ("https://home:6443", {})}, "home")
    assert kubeconfigs.kubeconfig_from_env() == "~/.kube/config"
    assert find().server == "https://home:6443"


# -- the pod's service account --------------------------------------------------------------------------------------


def service_account(directory: Path) -> Path:
    directory.mkdir()
    (directory / "token").write_text("pod-token\n")
    (directory / "namespace").write_text("devplace-system")
    (directory / "ca.crt").write_text("")
    return directory


def test_in_a_pod_the_service_account_is_used_unless_a_kubeconfig_or_context_is_named(
    tmp_path: Path, no_cluster_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = service_account(tmp_path / "serviceaccount")
    kubeconfig(no_cluster_env / ".kube" / "config", {"home": ("https://home:6443", {})}, "home")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    in_pod = find(service_account=str(account))
    assert in_pod == ServerConfig(
        "https://10.96.0.1:443",
        Credentials(token="pod-token", token_file=str(account / "token"), ca_file=str(account / "ca.crt")),
    )
    assert find(context="home", service_account=str(account)).server == "https://home:6443"
    assert find("~/.kube/config", service_account=str(account)).server == "https://home:6443"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")  # a token file alone is not a pod (client-go's rule)
    assert find(service_account=str(account)).server == "https://home:6443"


def test_an_ipv6_service_address_is_bracketed(
    tmp_path: Path, no_cluster_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = service_account(tmp_path / "serviceaccount")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    assert find(service_account=str(account)).server == "https://[fd00::1]:443"


def test_outside_a_pod_the_service_account_config_is_refused_naming_serviceaccount(no_cluster_env: Path) -> None:
    with pytest.raises(errors.Invalid) as caught:
        kubeconfigs.service_account_config("/nowhere")
    assert [f.path for f in caught.value.fields] == ["serviceaccount"]
