"""The remote backend's credentials from a kubeconfig and a token: which context serves which store URL, merged
KUBECONFIG lists, relative paths, and the refusals (pure file reading; the HTTP side is in tests/server)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
import yaml

from devplace import errors
from devplace.store import open_store
from devplace.store.remote import Credentials, RemoteStore, kubeconfig_server


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


def test_the_context_naming_the_store_url_gives_the_credentials(tmp_path: Path) -> None:
    path = kubeconfig(
        tmp_path / "config",
        {
            "prod": ("https://k8s.example:6443", {"token": "prod-token"}),
            "dev": ("http://127.0.0.1:8080/", {"token": "dev"}),
        },
        current="prod",
    )
    assert Credentials.for_server("http://127.0.0.1:8080", kubeconfig=str(path)).token == "dev"
    assert Credentials.for_server("HTTP://127.0.0.1:8080/", kubeconfig=str(path)).token == "dev"
    assert Credentials.for_server("https://k8s.example", kubeconfig=str(path)) == Credentials()  # port 443 is not 6443
    assert Credentials.for_server("https://K8S.example:6443", kubeconfig=str(path)).token == "prod-token"
    assert Credentials.for_server("http://127.0.0.1:9090", kubeconfig=str(path)) == Credentials()
    assert Credentials.for_server("http://127.0.0.1:8080", token="mine", kubeconfig=str(path)).token == "mine"
    assert Credentials.for_server("http://127.0.0.1:8080", token="mine") == Credentials(token="mine")


def test_the_current_context_wins_when_several_name_the_server(tmp_path: Path) -> None:
    contexts = {"a": ("http://h:1", {"token": "a"}), "b": ("http://h:1", {"token": "b"})}
    assert Credentials.for_server("http://h:1", kubeconfig=str(kubeconfig(tmp_path / "c", contexts, "b"))).token == "b"
    assert Credentials.for_server("http://h:1", kubeconfig=str(kubeconfig(tmp_path / "d", contexts))).token == "a"


def test_a_kubeconfig_list_is_merged_the_first_file_winning(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "first", {"x": ("http://h:1", {"token": "first"})}, current="x")
    second = kubeconfig(tmp_path / "second", {"x": ("http://h:2", {"token": "second"}), "y": ("http://h:3", {})}, "y")
    paths = f"{first}:{tmp_path / 'missing'}:{second}"
    assert Credentials.for_server("http://h:1", kubeconfig=paths).token == "first"
    assert Credentials.for_server("http://h:2", kubeconfig=paths) == Credentials()  # context x is the first file's
    assert kubeconfig_server(paths) == "http://h:1"


def test_files_named_in_a_kubeconfig_are_relative_to_it_and_data_is_base64(tmp_path: Path) -> None:
    (tmp_path / "auth").mkdir()
    (tmp_path / "auth" / "token").write_text("from-file\n")
    user = {"tokenFile": "auth/token", "client-certificate": "auth/c.pem", "client-key": "/abs/k.pem"}
    path = kubeconfig(tmp_path / "config", {"x": ("https://h:1", user)}, "x")
    found = Credentials.for_server("https://h:1", kubeconfig=str(path))
    assert found.token == "from-file"
    assert found.cert_file == str(tmp_path / "auth" / "c.pem")
    assert found.key_file == "/abs/k.pem"
    pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
    encoded = base64.b64encode(pem.encode()).decode()
    doc = yaml.safe_load(path.read_text())
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = encoded
    doc["users"][0]["user"] = {"client-certificate-data": encoded, "client-key-data": encoded}
    path.write_text(yaml.safe_dump(doc))
    found = Credentials.for_server("https://h:1", kubeconfig=str(path))
    assert (found.ca_data, found.cert_data, found.key_data) == (pem, pem, pem)


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
def test_credentials_a_kubeconfig_cannot_give_are_refused_naming_the_field(
    tmp_path: Path, user: dict[str, Any], field: str
) -> None:
    path = kubeconfig(tmp_path / "config", {"x": ("http://h:1", user)}, "x")
    with pytest.raises(errors.Invalid) as caught:
        Credentials.for_server("http://h:1", kubeconfig=str(path))
    assert caught.value.fields[0].path == field


def test_a_kubeconfig_without_a_current_server_names_no_store(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "config", {"x": ("http://h:1", {})})
    with pytest.raises(errors.Invalid, match="no current context"):
        kubeconfig_server(str(path))
    (tmp_path / "broken").write_text("clusters: [")
    with pytest.raises(errors.Invalid, match="is not YAML"):
        kubeconfig_server(str(tmp_path / "broken"))


def test_open_store_hands_the_credentials_to_the_remote_backend(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path / "config", {"x": ("http://h:1", {"token": "t"})}, "x")
    store = open_store("http://h:1", kubeconfig=str(path))
    assert isinstance(store, RemoteStore)
    assert store.credentials.token == "t"
    assert isinstance(open_store("http://h:1", token="u"), RemoteStore)


def test_unreadable_tls_material_is_refused_naming_the_credentials(tmp_path: Path) -> None:
    with pytest.raises(errors.Invalid) as caught:
        Credentials(ca_file=str(tmp_path / "missing.pem")).ssl_context()
    assert caught.value.fields[0].path == "credentials"
    with pytest.raises(errors.Invalid):
        Credentials(cert_data="not a pem", key_data="not a pem").ssl_context()


def test_a_kubeconfig_that_is_a_yaml_alias_bomb_is_refused_before_it_is_expanded(tmp_path: Path) -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for level in range(1, 9):
        refs = ",".join([f"*{chr(96 + level)}"] * 9)
        lines.append(f"{chr(97 + level)}: &{chr(97 + level)} [{refs}]")
    bomb = tmp_path / "bomb.kubeconfig"
    bomb.write_text("\n".join(lines) + "\n")
    with pytest.raises(errors.Invalid, match="kubeconfig") as info:
        kubeconfig_server(str(bomb))
    assert "alias" in info.value.message
