"""Authentication: who a request comes from, by bearer token or TLS client certificate, as kube-apiserver does it.

Bearer tokens come from a tokens file in kube-apiserver's `--token-auth-file` format: CSV lines
`token,user,uid[,"group1,group2"]` (blank lines and lines starting with `#` are skipped). A line with an empty token or
user, fewer than three columns, or a token given twice is refused at startup, naming the line. Tokens are kept only
as SHA-256 digests and looked up by digest, so a lookup's timing says nothing about a token's characters.

Client certificates: with `--client-ca-file` the server asks every TLS client for a certificate (optional: a client
may use a token instead) and verifies it against that CA; the user is the certificate's subject CN, its groups the
subject's O values (Kubernetes' rule). Uvicorn does not put the TLS peer into the ASGI scope, so the server's HTTP
protocol class (`server.connections`) tells `PeerCertificates` of each connection: it records the verified peer
certificate's identity by the connection's client address, which is what `scope["client"]` carries, and forgets it
when the connection closes. Proxy headers are off (`uvicorn_options`), so a request cannot claim another
connection's address.

A request with an `Authorization: Bearer` header is that token's identity, or refused (401) when the token is unknown;
else it is the connection's certificate identity, if any; else it is anonymous, and only /healthz, /livez, /readyz and
/version answer it (`server.guards`). Roles are derived from the identity by `server.authz.role_of`.
"""

from __future__ import annotations

import asyncio
import csv
import hashlib
import io
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devplace import errors
from devplace.server._authz import Identity
from devplace.server._connections import KEEP_ALIVE_TIMEOUT, ConnectionLimits, connection_protocol


@dataclass(frozen=True)
class Tokens:
    """A tokens file: identities by the SHA-256 digest of their token, and each user's first token (in file order,
    for writing a kubeconfig)."""

    by_digest: Mapping[bytes, Identity]
    first_token: Mapping[str, str]

    @classmethod
    def parse(cls, text: str, source: str = "tokens file") -> Tokens:
        """kube-apiserver's CSV format (module docstring); `errors.Invalid` naming `source:line` for a bad line."""
        by_digest: dict[bytes, Identity] = {}
        first: dict[str, str] = {}
        lines = text.splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            where = f"{source}:{number}"
            try:
                row = next(csv.reader(io.StringIO(line), skipinitialspace=True))
            except csv.Error as e:
                raise errors.Invalid.field(where, f"not a CSV line: {e}") from e
            if len(row) < 3:
                raise errors.Invalid.field(where, 'expected token,user,uid[,"group1,group2"]')
            token, user, uid = row[0].strip(), row[1].strip(), row[2].strip()
            if not token or not user:
                raise errors.Invalid.field(where, "the token and the user must not be empty")
            groups = tuple(g.strip() for g in (row[3] if len(row) > 3 else "").split(",") if g.strip())
            digest = _digest(token)
            if digest in by_digest:
                raise errors.Invalid.field(where, "this token is already given on an earlier line")
            by_digest[digest] = Identity(user, groups, uid)
            first.setdefault(user, token)
        return cls(by_digest, first)

    @classmethod
    def load(cls, path: Path) -> Tokens:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise errors.Invalid.field("--token-auth-file", f"cannot read {path}: {e}") from e
        return cls.parse(text, str(path))

    def identity(self, token: str) -> Identity | None:
        return self.by_digest.get(_digest(token))


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()


def identity_of_certificate(cert: Mapping[str, Any] | None) -> Identity | None:
    """The identity of a verified peer certificate as `ssl.SSLSocket.getpeercert()` decodes it: CN user, O groups."""
    if not cert:
        return None
    names: list[str] = []
    groups: list[str] = []
    for rdn in cert.get("subject") or ():
        for key, value in rdn:
            if key == "commonName":
                names.append(str(value))
            elif key == "organizationName":
                groups.append(str(value))
    if not names or not names[0]:
        return None
    return Identity(names[0], tuple(groups))


class PeerCertificates:
    """Identities of the open TLS connections' verified client certificates, by client address (module docstring)."""

    def __init__(self) -> None:
        self._by_peer: dict[tuple[str, int], Identity] = {}

    @staticmethod
    def _peer(transport: asyncio.BaseTransport) -> tuple[str, int] | None:
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple) and len(peer) >= 2:
            return str(peer[0]), int(peer[1])
        return None

    def connected(self, transport: asyncio.BaseTransport) -> tuple[str, int] | None:
        """Record the connection's certificate identity; returns the key to forget it by (a closed transport no
        longer knows its peer)."""
        peer = self._peer(transport)
        if peer is None:
            return None
        ssl_object = transport.get_extra_info("ssl_object")
        identity = identity_of_certificate(ssl_object.getpeercert()) if ssl_object is not None else None
        if identity is None:
            self._by_peer.pop(peer, None)
        else:
            self._by_peer[peer] = identity
        return peer

    def disconnected(self, peer: tuple[str, int] | None) -> None:
        if peer is not None:
            self._by_peer.pop(peer, None)

    def identity(self, client: Any) -> Identity | None:
        """The certificate identity of the connection whose client address is `client` (the ASGI scope's)."""
        if not isinstance(client, list | tuple) or len(client) < 2:
            return None
        return self._by_peer.get((str(client[0]), int(client[1])))

    def __len__(self) -> int:
        return len(self._by_peer)


@dataclass(frozen=True)
class TlsFiles:
    """The server's certificate and key (PEM), and the CA that client certificates must be signed by (optional)."""

    cert_file: str
    key_file: str
    client_ca_file: str | None = None


@dataclass
class Auth:
    """What the server authenticates with: a tokens file, client certificates (over TLS), or both.

    `peers` holds the connections' certificate identities when client certificates are on."""

    tokens: Tokens | None = None
    client_certificates: bool = False
    peers: PeerCertificates = field(default_factory=PeerCertificates)

    def authenticate(self, headers: list[tuple[bytes, bytes]], client: Any) -> Identity | None:
        """The identity of a request (module docstring): None when it offers no credentials; `Unauthenticated` when it
        offers bad ones."""
        for key, value in headers:
            if key.lower() == b"authorization":
                return self._bearer(value)
        if self.client_certificates:
            return self.peers.identity(client)
        return None

    def _bearer(self, value: bytes) -> Identity:
        scheme, _, token = value.decode("latin-1").strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise errors.Unauthenticated("the Authorization header is not 'Bearer <token>'")
        if self.tokens is None:
            raise errors.Unauthenticated("this server takes no bearer tokens")
        identity = self.tokens.identity(token.strip())
        if identity is None:
            raise errors.Unauthenticated("invalid bearer token")
        return identity


def uvicorn_options(
    tls: TlsFiles | None, auth: Auth | None, connections: ConnectionLimits | None = ConnectionLimits()
) -> dict[str, Any]:
    """`uvicorn.Config` keyword arguments for serving with `tls` (None: plain HTTP), `auth` and `connections`: the
    HTTP protocol class that enforces them (`server.connections`) and the keep-alive timeout that goes with them;
    None: uvicorn's own h11 protocol and timeout, unbounded (for comparison: bench/hostile.py), unless client
    certificates need recording."""
    peers = None
    if tls is not None and tls.client_ca_file and auth is not None and auth.client_certificates:
        peers = auth.peers
    options: dict[str, Any] = {"proxy_headers": False, "ws": "none", "http": "h11"}
    if connections is not None or peers is not None:
        options["http"] = connection_protocol(connections or ConnectionLimits.unlimited(), peers)
    if connections is not None:
        options["timeout_keep_alive"] = KEEP_ALIVE_TIMEOUT
    if tls is None:
        return options
    options.update(ssl_certfile=tls.cert_file, ssl_keyfile=tls.key_file)
    if tls.client_ca_file:
        options.update(ssl_ca_certs=tls.client_ca_file, ssl_cert_reqs=ssl.CERT_OPTIONAL)
    return options
