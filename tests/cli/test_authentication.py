"""Authentication on the command line: `devplace server`'s flags (tokens file, TLS, client CA, --insecure, a kubeconfig
with a token), and the global `--token` / `--kubeconfig` every command that opens a store takes."""

from __future__ import annotations

import contextlib
import os
import ssl
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import yaml
from typer.testing import CliRunner

from devplace.cli import app
from devplace.cli._servers import exposure_problem
from tests.server.certificates import Pki

TOKENS = 'admin-token,alice,1,"admin"\nreader-token,bob,2,reader\n'
NODE = "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n"


@pytest.mark.parametrize(
    ("host", "authenticated", "tls", "tokens", "problem"),
    [
        ("127.0.0.1", False, False, False, None),
        ("::1", False, False, False, None),
        ("localhost", False, False, False, None),
        ("0.0.0.0", False, False, False, "without authentication"),
        ("::", False, False, False, "without authentication"),
        ("10.1.2.3", False, True, False, "without authentication"),
        ("devplace.example", False, False, False, "without authentication"),
        ("0.0.0.0", True, False, True, "without TLS"),
        ("0.0.0.0", True, True, True, None),
        ("0.0.0.0", True, False, False, None),  # client certificates only: TLS is implied
    ],
)
def test_listening_beyond_loopback_needs_authentication_and_tokens_need_tls(
    host: str, authenticated: bool, tls: bool, tokens: bool, problem: str | None
) -> None:
    found = exposure_problem(host, authenticated=authenticated, tls=tls, tokens=tokens)
    assert (found is None) if problem is None else (problem in str(found))


@pytest.fixture
def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.csv"
    path.write_text(TOKENS)
    return path


@pytest.fixture
def cli(tmp_path: Path) -> CliRunner:
    env = {"DEVPLACE_STORE": "", "DEVPLACE_TOKEN": "", "KUBECONFIG": "", "COLUMNS": "200"}
    return CliRunner(env={k: v or None for k, v in env.items()})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "refusing to listen on 0.0.0.0 without authentication"),
        (["--host", "0.0.0.0", "--token-auth-file", "{tokens}"], "without TLS"),
        (["--kubeconfig-user", "alice"], "no token for user 'alice'"),
        (["--token-auth-file", "{tokens}", "--kubeconfig-user", "mallory"], "no token for user 'mallory'"),
        (["--token-auth-file", "{bad}"], "bad.csv:1"),
        (["--tls-cert-file", "{tokens}"], "go together"),
        (["--client-ca-file", "{tokens}"], "need TLS"),
    ],
)
def test_the_server_refuses_an_unsafe_or_inconsistent_start_before_listening(
    cli: CliRunner, tmp_path: Path, tokens_file: Path, args: list[str], message: str
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("only-a-token\n")
    filled = [a.format(tokens=tokens_file, bad=bad) for a in args]
    result = cli.invoke(app, ["server", "--store", "memory", "--port", "0", *filled])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()), result.output


@contextlib.contextmanager
def served(tmp_path: Path, *args: str, ca: Path | None = None) -> Iterator[tuple[str, Path]]:
    """`devplace server` as a child on a free loopback port; yields its URL and the kubeconfig it wrote."""
    kubeconfig = tmp_path / "kubeconfig"
    command = [
        sys.executable, "-m", "devplace.cli", "server", "--store", f"sqlite:///{tmp_path}/store.db", "--port", "0",
        "--write-kubeconfig", str(kubeconfig), *args,
    ]  # fmt: skip
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "KUBECONFIG": ""})
    try:
        for _ in range(2000):  # the child's startup (a bound only)
            assert proc.poll() is None, log.read_text()
            if kubeconfig.exists():
                break
            time.sleep(0.01)
        url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        verify = ssl.create_default_context(cafile=str(ca)) if ca else True
        for _ in range(2000):
            with contextlib.suppress(httpx2.TransportError):
                if httpx2.get(f"{url}/healthz", verify=verify, timeout=5).status_code == 200:
                    break
            time.sleep(0.01)
        yield url, kubeconfig
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_global_token_and_a_written_kubeconfig_authenticate_every_command(
    cli: CliRunner, tmp_path: Path, tokens_file: Path
) -> None:
    manifest = tmp_path / "node.yaml"
    manifest.write_text(NODE.format(name="n1"))
    with served(tmp_path, "--token-auth-file", str(tokens_file), "--kubeconfig-user", "alice") as (url, kubeconfig):
        written = yaml.safe_load(kubeconfig.read_text())
        assert written["users"][0]["user"] == {"token": "admin-token"}
        assert stat.S_IMODE(kubeconfig.stat().st_mode) == 0o600
        refused = cli.invoke(app, ["--store", url, "get", "nodes"])
        assert refused.exit_code == 1
        assert "Unauthorized" in refused.output
        assert cli.invoke(app, ["--store", url, "--token", "admin-token", "apply", "-f", str(manifest)]).exit_code == 0
        by_env = cli.invoke(app, ["--store", url, "get", "nodes", "-o", "name"], env={"DEVPLACE_TOKEN": "reader-token"})
        assert by_env.exit_code == 0, by_env.output
        assert "n1" in by_env.output
        as_reader = cli.invoke(app, ["--store", url, "--token", "reader-token", "delete", "node", "n1"])
        assert as_reader.exit_code == 1
        assert "rule reader-read-only" in as_reader.output
        by_kubeconfig = cli.invoke(app, ["--kubeconfig", str(kubeconfig), "get", "nodes", "-o", "name"])
        assert by_kubeconfig.exit_code == 0, by_kubeconfig.output
        assert "n1" in by_kubeconfig.output
        kubeconfig_env = cli.invoke(
            app, ["--store", url, "get", "nodes", "-o", "name"], env={"KUBECONFIG": str(kubeconfig)}
        )
        assert kubeconfig_env.exit_code == 0, kubeconfig_env.output


def test_a_kubeconfig_in_the_environment_neither_picks_the_store_nor_leaks_to_another_server(
    cli: CliRunner, tmp_path: Path, tokens_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere.yaml"
    elsewhere.write_text(
        yaml.safe_dump(
            {
                "clusters": [{"name": "c", "cluster": {"server": "https://kubernetes.example:6443"}}],
                "users": [{"name": "u", "user": {"token": "admin-token"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    with served(tmp_path, "--token-auth-file", str(tokens_file)) as (url, _):
        refused = cli.invoke(app, ["--store", url, "get", "nodes"], env={"KUBECONFIG": str(elsewhere)})
        assert refused.exit_code == 1
        assert "Unauthorized" in refused.output
    monkeypatch.chdir(tmp_path)  # the default store, ./devplace.db, not the kubeconfig's server
    local = cli.invoke(app, ["get", "nodes"], env={"KUBECONFIG": str(elsewhere)})
    assert local.exit_code == 0, local.output
    assert (tmp_path / "devplace.db").exists()
    missing = cli.invoke(app, ["--kubeconfig", str(tmp_path / "missing.yaml"), "get", "nodes"])
    assert missing.exit_code == 2
    assert "is not a file" in missing.output


def test_a_tls_server_with_client_certificates_writes_a_kubeconfig_that_trusts_it(
    cli: CliRunner, tmp_path: Path, tokens_file: Path
) -> None:
    pki = Pki.create(tmp_path / "pki")
    server = pki.issue("server", "127.0.0.1", server=True)
    args = [
        "--tls-cert-file", str(server.cert), "--tls-private-key-file", str(server.key),
        "--client-ca-file", str(pki.ca.cert), "--token-auth-file", str(tokens_file), "--kubeconfig-user", "bob",
    ]  # fmt: skip
    with served(tmp_path, *args, ca=pki.ca.cert) as (url, kubeconfig):
        assert url.startswith("https://127.0.0.1:")
        written = yaml.safe_load(kubeconfig.read_text())
        assert written["clusters"][0]["cluster"]["certificate-authority"] == str(pki.ca.cert.resolve())
        listed = cli.invoke(app, ["--kubeconfig", str(kubeconfig), "get", "nodes"])
        assert listed.exit_code == 0, listed.output
        node = pki.issue("node-a", "system:node:node-a", ("system:nodes",))
        with_cert = tmp_path / "node-a.kubeconfig"
        with_cert.write_text(
            yaml.safe_dump(
                {
                    "clusters": [{"name": "c", "cluster": {"server": url, "certificate-authority": str(pki.ca.cert)}}],
                    "users": [
                        {"name": "a", "user": {"client-certificate": "pki/node-a.crt", "client-key": "pki/node-a.key"}}
                    ],
                    "contexts": [{"name": "a", "context": {"cluster": "c", "user": "a"}}],
                    "current-context": "a",
                }
            )
        )
        assert node.cert.parent == tmp_path / "pki"  # the kubeconfig's relative paths are relative to its file
        manifest = tmp_path / "node.yaml"
        manifest.write_text(NODE.format(name="node-a"))
        applied = cli.invoke(app, ["--kubeconfig", str(with_cert), "apply", "-f", str(manifest)])
        assert applied.exit_code == 0, applied.output
        manifest.write_text(NODE.format(name="node-b"))
        refused = cli.invoke(app, ["--kubeconfig", str(with_cert), "apply", "-f", str(manifest)])
        assert refused.exit_code == 1
        assert "rule node-own-node" in refused.output
