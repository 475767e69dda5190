"""Where a Kubernetes-style API server is and how to log in to it: kubeconfig files and the pod's service account.

The one reader for every caller: the `remote` backend (`credentials_for_server`: the credentials of the context that
names a devplace server), the `kube` backend (`find`: the service account, a named file, `KUBECONFIG`,
`~/.kube/config`; a context by name), and the CLI (`current_server`: the store of `devplace --kubeconfig`).

Hostile input: a kubeconfig is YAML a user may have been handed, so it is read by devplace's hostile-input reader
(`api.manifests.yaml_value`: bounded nesting, no duplicate keys, no aliases, so an alias bomb is refused before it
is expanded). Entries that are not mappings are skipped; values are checked for their type where they are used.

Files: a `KUBECONFIG`-style list (`os.pathsep`-separated) is merged as kubectl merges it: files that do not exist
are skipped, and the first file that names a cluster, a user or a context, or sets `current-context`, wins. `find`
reads one file, which must exist. Paths inside a kubeconfig (`certificate-authority`, `client-certificate`,
`client-key`, `tokenFile`) are relative to the file that holds them; `*-data` fields are base64 PEM, decoded (and
so checked) when the credentials are read.

Contexts: `find` takes the context asked for, else the current one, and refuses one whose cluster or user is not
defined or whose cluster has no http(s) `server`. `credentials_for_server` takes the current context when its
cluster's `server` is the given URL, else the first context whose cluster's is (scheme, host and port compared, the
default port filled in, so `https://h` is not `https://h:6443`); a kubeconfig that names no such server gives no
credentials: they are never sent to another server.

Credentials (`restclients.Credentials`): a `token`, or the `tokenFile`'s (read at once; the client re-reads it on a
401); the client certificate and key; the cluster's CA or `insecure-skip-tls-verify`; an `exec` plugin (its
`apiVersion` one of `restclients.EXEC_API_VERSIONS`); `username` and `password`. `auth-provider` plugins are refused,
and a caller may refuse more (`unsupported`): devplace's server checks tokens and certificates only.

The pod's service account, by client-go's rule: `KUBERNETES_SERVICE_HOST` and `KUBERNETES_SERVICE_PORT` set and a
`token` file in the account's directory. The server is `https://host:port`, trusted through the account's `ca.crt`,
and the token is re-read from its file on a 401 (the kubelet rotates it).

Refusals are `Invalid` naming the field (`kubeconfig`, `kubeconfig.user.exec`, `kubeconfig.client-key-data`,
`serviceaccount`, ...) and saying which file and why.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from devplace import errors
from devplace.api import yaml_value
from devplace.store._restclients import EXEC_API_VERSIONS, Credentials, ExecPlugin

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_KUBECONFIG = "~/.kube/config"
_AUTH_FIELDS = ("exec", "auth-provider", "username", "password")  # checked in this order

_Entry = tuple[Path, dict[str, Any]]  # a kubeconfig entry with the file that holds it


@dataclass(frozen=True)
class ServerConfig:
    """An API server and how to reach it: what a kubeconfig's context or the pod's service account comes to."""

    server: str
    credentials: Credentials = field(default_factory=Credentials)
    context: str = ""  # the kubeconfig context it was read from ("" for a service account or a bare server)


class Kubeconfig:
    """One or more kubeconfig files, merged (module docstring)."""

    def __init__(self, files: Iterable[tuple[Path, Mapping[str, Any]]]) -> None:
        self.files = [(path, dict(doc)) for path, doc in files]
        self.clusters = _named(self.files, "clusters", "cluster")
        self.users = _named(self.files, "users", "user")
        self.contexts = _named(self.files, "contexts", "context")
        current = next((doc["current-context"] for _, doc in self.files if doc.get("current-context")), None)
        self.current_context: str | None = current if isinstance(current, str) else None

    @classmethod
    def read(cls, paths: str) -> Kubeconfig:
        """The files of a `KUBECONFIG`-style list that exist, merged; `Invalid` naming a file that does not parse."""
        files = []
        for raw in paths.split(os.pathsep):
            if not raw:
                continue
            path = Path(raw).expanduser()
            try:
                text = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                continue
            except (OSError, UnicodeDecodeError) as e:
                raise errors.Invalid.field("kubeconfig", f"cannot read {path}: {e}") from e
            files.append((path, _parse(text, path)))
        return cls(files)

    @classmethod
    def read_file(cls, name: str) -> Kubeconfig:
        """The one kubeconfig file `name` (`~` expanded), which must exist."""
        path = Path(name).expanduser()
        if not path.is_file():
            raise errors.Invalid.field("kubeconfig", f"{name} not found")
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise errors.Invalid.field("kubeconfig", f"cannot read {path}: {e}") from e
        return cls([(path, _parse(text, path))])

    def _origin(self) -> str:
        return os.pathsep.join(str(path) for path, _ in self.files) or "the kubeconfig"

    def context(self, name: str | None = None) -> ServerConfig:
        """The server and credentials of context `name`, else of the current context (module docstring)."""
        name = self.current_context if name is None else name
        if name is None:
            raise errors.Invalid.field("kubeconfig", f"{self._origin()} has no current-context: name a context")
        found = self.contexts.get(name)
        if found is None:
            raise errors.Invalid.field("kubeconfig", f"Context {name!r} not found in {self._origin()}")
        context = found[1]
        cluster_name = str(context.get("cluster"))
        cluster = self.clusters.get(cluster_name)
        if cluster is None:
            raise errors.Invalid.field(
                "kubeconfig", f"context {name!r} names cluster {cluster_name!r}, which {found[0]} does not define"
            )
        user: _Entry | None = None
        if context.get("user"):
            user_name = str(context["user"])
            user = self.users.get(user_name)
            if user is None:
                raise errors.Invalid.field(
                    "kubeconfig", f"context {name!r} names user {user_name!r}, which {found[0]} does not define"
                )
        server = cluster[1].get("server")
        if not isinstance(server, str) or not server.startswith(("http://", "https://")):
            raise errors.Invalid.field(
                "kubeconfig", f"cluster {cluster_name!r} of context {name!r} has no http(s) server: {server!r}"
            )
        return ServerConfig(server, credentials_of(cluster, user), name)

    def entry(self, url: str | None) -> tuple[_Entry, _Entry | None] | None:
        """The (cluster, user) entries of the context for the server at `url` (module docstring), or of the current
        context when `url` is None; None when there is no such context (a missing user gives None for it)."""
        current = self.current_context
        order = ([current] if current in self.contexts else []) + [n for n in self.contexts if n != current]
        for name in order:
            context = self.contexts[name][1]
            cluster = self.clusters.get(str(context.get("cluster")))
            if cluster is None:
                continue
            server = str(cluster[1].get("server") or "")
            wanted = name == current if url is None else _normalized(server) == _normalized(url)
            if wanted:
                return cluster, self.users.get(str(context.get("user")))
        return None


def _parse(text: str, path: Path) -> dict[str, Any]:
    try:  # under the hostile-input rules (nesting, aliases, duplicate keys) like every YAML devplace reads
        doc = yaml_value(text) or {}
    except yaml.YAMLError as e:
        raise errors.Invalid.field("kubeconfig", f"{path} is not YAML: {e}") from e
    except errors.Invalid as e:
        raise errors.Invalid.field("kubeconfig", f"{path}: {e.message}") from e
    if not isinstance(doc, dict):
        raise errors.Invalid.field("kubeconfig", f"{path} is not a kubeconfig (a mapping)")
    return doc


def _named(files: list[tuple[Path, dict[str, Any]]], section: str, entry: str) -> dict[str, _Entry]:
    """`clusters`/`users`/`contexts` by name across files, the first file's entry winning, with its file."""
    found: dict[str, _Entry] = {}
    for path, doc in files:
        items = doc.get(section)
        for item in items if isinstance(items, list) else []:
            if isinstance(item, dict) and isinstance(item.get("name"), str) and isinstance(item.get(entry), dict):
                found.setdefault(item["name"], (path, item[entry]))
    return found


def _normalized(url: str) -> tuple[str, str, int | None, str]:
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port, parts.path.rstrip("/")


# -- credentials ----------------------------------------------------------------------------------------------------


def credentials_of(cluster: _Entry, user: _Entry | None, *, unsupported: Iterable[str] = ()) -> Credentials:
    """The credentials of a cluster entry and a user entry (module docstring); `Invalid` naming the field of one
    the caller cannot use (`unsupported`: names among `exec`, `username`, `password`) or that does not read."""
    cluster_file, c = cluster
    user_file, u = user if user is not None else (cluster_file, {})
    refused = {"auth-provider", *unsupported}
    for name in _AUTH_FIELDS:
        if u.get(name) and name in refused:
            raise errors.Invalid.field(f"kubeconfig.user.{name}", "is not supported: use a token or a certificate")
    token = u.get("token")
    token_file = _path(user_file, u.get("tokenFile"))
    if not token and token_file:
        try:
            token = Path(token_file).read_text(encoding="utf-8").strip()
        except OSError as e:
            raise errors.Invalid.field("kubeconfig.user.tokenFile", f"cannot read {token_file}: {e}") from e
    return Credentials(
        token=str(token) if token else None,
        token_file=token_file,
        ca_file=_path(cluster_file, c.get("certificate-authority")),
        ca_data=_data(c.get("certificate-authority-data"), "certificate-authority-data"),
        cert_file=_path(user_file, u.get("client-certificate")),
        key_file=_path(user_file, u.get("client-key")),
        cert_data=_data(u.get("client-certificate-data"), "client-certificate-data"),
        key_data=_data(u.get("client-key-data"), "client-key-data"),
        insecure_skip_verify=bool(c.get("insecure-skip-tls-verify")),
        username=_str(u.get("username"), "username"),
        password=_str(u.get("password"), "password"),
        exec_plugin=_exec_plugin(u["exec"]) if u.get("exec") else None,
    )


def _path(base: Path, value: Any) -> str | None:
    if not value:
        return None
    path = Path(str(value)).expanduser()
    return str(path if path.is_absolute() else base.parent / path)


def _data(value: Any, what: str) -> str | None:
    if not value:
        return None
    try:
        return base64.b64decode(str(value), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError) as e:
        raise errors.Invalid.field(f"kubeconfig.{what}", "is not base64-encoded PEM") from e


def _str(value: Any, what: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise errors.Invalid.field(f"kubeconfig.user.{what}", "is not a string")
    return value


def _exec_plugin(value: Any) -> ExecPlugin:
    """A `user.exec` entry: `apiVersion`, `command`, optional `args` and `env` (a list of `name`/`value`)."""

    def refuse(part: str, reason: str) -> errors.Invalid:
        return errors.Invalid.field(f"kubeconfig.user.exec{part}", reason)

    if not isinstance(value, dict):
        raise refuse("", "is not a mapping")
    api_version = value.get("apiVersion")
    if api_version not in EXEC_API_VERSIONS:
        raise refuse(".apiVersion", f"{api_version!r} is not supported (supported: {', '.join(EXEC_API_VERSIONS)})")
    command = value.get("command")
    if not isinstance(command, str) or not command:
        raise refuse(".command", "is required: the plugin to run")
    args = value.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise refuse(".args", "is not a list of strings")
    env = value.get("env") or []
    pairs = []
    for item in env if isinstance(env, list) else [None]:
        name, text = (item.get("name"), item.get("value")) if isinstance(item, dict) else (None, None)
        if not isinstance(name, str) or not isinstance(text, str):
            raise refuse(".env", "is not a list of name/value pairs")
        pairs.append((name, text))
    return ExecPlugin(str(api_version), command, tuple(args), tuple(pairs))


# -- finding the configuration --------------------------------------------------------------------------------------


def credentials_for_server(
    url: str, *, token: str | None = None, kubeconfig: str | None = None, unsupported: Iterable[str] = ()
) -> Credentials:
    """The credentials for the server at `url`: the kubeconfig's (a path list) for it (module docstring); `token`,
    when given, replaces the kubeconfig's token."""
    found = Kubeconfig.read(kubeconfig).entry(url) if kubeconfig else None
    credentials = Credentials() if found is None else credentials_of(*found, unsupported=unsupported)
    return dataclasses.replace(credentials, token=token, token_file=None) if token else credentials


def current_server(paths: str) -> str:
    """The server of the current context of a kubeconfig (a path list); `Invalid` naming `kubeconfig` when there is
    none, or it is not an http(s) URL."""
    found = Kubeconfig.read(paths).entry(None)
    server = str(found[0][1].get("server") or "") if found else ""
    if not server.startswith(("http://", "https://")):
        raise errors.Invalid.field("kubeconfig", f"{paths}: no current context with an http(s) server")
    return server


def find(
    kubeconfig: str | None = None, context: str | None = None, *, service_account: str = SERVICE_ACCOUNT
) -> ServerConfig:
    """The API server to use, as client-go finds it: in a pod the service account (unless a file or a context is
    named: a context names a kubeconfig's entry), else the file `kubeconfig`, else `kubeconfig_from_env()`; of a
    file, the context `context`, else its current one."""
    if kubeconfig is None and context is None and in_cluster(service_account):
        return service_account_config(service_account)
    return Kubeconfig.read_file(kubeconfig or kubeconfig_from_env()).context(context)


def in_cluster(service_account: str = SERVICE_ACCOUNT) -> bool:
    """client-go's rule: a token file and the API server's address in the environment."""
    has_address = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and bool(os.environ.get("KUBERNETES_SERVICE_PORT"))
    return has_address and (Path(service_account) / "token").is_file()


def service_account_config(service_account: str = SERVICE_ACCOUNT) -> ServerConfig:
    """The pod's API server and service account (module docstring); `Invalid` naming `serviceaccount` outside a
    pod or when the token cannot be read."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST", "")
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise errors.Invalid.field("serviceaccount", "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are unset")
    account = Path(service_account)
    token_file = account / "token"
    try:
        token = token_file.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise errors.Invalid.field("serviceaccount", f"cannot read {token_file}: {e}") from e
    if ":" in host:  # IPv6
        host = f"[{host}]"
    credentials = Credentials(token=token or None, token_file=str(token_file), ca_file=str(account / "ca.crt"))
    return ServerConfig(f"https://{host}:{port}", credentials)


def kubeconfig_from_env() -> str:
    """The first existing file named by `KUBECONFIG` (a path list), else its first, else `~/.kube/config`."""
    listed = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    for candidate in listed:
        if Path(candidate).expanduser().is_file():
            return candidate
    return listed[0] if listed else DEFAULT_KUBECONFIG
