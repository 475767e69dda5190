"""Open a store from a URL: `memory`, `sqlite:///path/to.db`, `etcd://host:2379[,host:2379...]`, `http://host:port`.

`sqlite:///x.db` and `sqlite:///./x.db` are relative to the working directory, `sqlite:////abs/x.db` is absolute
(SQLAlchemy's rule): `sqlite:///tmp/x.db` is `tmp/x.db`, so a file that cannot be opened is reported with the path it
resolved to and, for such a relative path, the four-slash spelling of the absolute one.

etcd URLs take TLS and authentication options as query parameters, e.g.
`etcd://10.0.0.1:2379,10.0.0.2:2379?cacert=/etc/etcd/ca.pem&cert=client.pem&key=client-key.pem&user=devplace&
password_file=/etc/devplace/etcd-password` (`etcds://` for TLS with the system's CA roots; the full list is in
`devplace.store._etcd.parse_url`). `http://` and `https://` open the remote backend (a devplace API server).
`kube://` opens the Kubernetes backend: the pod's service account, else `KUBECONFIG`, else ~/.kube/config;
`kube:///path/to/kubeconfig?context=NAME` names the file (options in `devplace.store._kube.parse_url`).
"""

from __future__ import annotations

import os

from devplace import errors
from devplace.clocks import Clock
from devplace.store._base import Store


def open_store(
    url: str, *, clock: Clock | None = None, token: str | None = None, kubeconfig: str | None = None
) -> Store:
    """The store at `url`. `token` and `kubeconfig` (a path, or a `KUBECONFIG`-style list) authenticate the remote
    backend to its server (`devplace.store._remote.RemoteStore.from_url`); other backends ignore them."""
    if url in ("memory", "memory://"):
        from devplace.store._memory import MemoryStore

        return MemoryStore(clock=clock)
    if url.startswith("sqlite://"):
        from devplace.store._sqlite import SqliteStore

        path = _sqlite_path(url)
        try:
            return SqliteStore(path, clock=clock)
        except errors.Unavailable as e:
            if os.path.isabs(path) or path.startswith("."):
                raise
            # sqlite:///tmp/x.db reads as /tmp/x.db to most people; it is tmp/x.db here (SQLAlchemy's rule)
            raise errors.Unavailable(
                f"{e.message} ({url} is relative to the working directory; for /{path} write sqlite:////{path})"
            ) from e
    if url.startswith(("etcd://", "etcds://")):
        from devplace.store._etcd import EtcdStore

        return EtcdStore(url, clock=clock)
    if url.startswith(("http://", "https://")):
        from devplace.store._remote import RemoteStore

        return RemoteStore.from_url(url, clock=clock, token=token, kubeconfig=kubeconfig)
    if url.startswith("kube://"):
        from devplace.store._kube import KubeStore

        return KubeStore.from_url(url, clock=clock)
    raise errors.Invalid.field(
        "store",
        f"unsupported store URL {url!r} (memory, sqlite:///PATH, etcd(s)://HOST:PORT, http(s)://HOST:PORT, kube://)",
    )


def _sqlite_path(url: str) -> str:
    """`sqlite:///./x.db` and `sqlite:///x.db` are relative; `sqlite:////abs/x.db` is absolute (SQLAlchemy's rule)."""
    rest = url.removeprefix("sqlite://")
    if not rest.startswith("/") or rest == "/":
        raise errors.Invalid.field("store", f"{url!r}: expected sqlite:///PATH")
    path = rest[1:]
    if not path:
        raise errors.Invalid.field("store", f"{url!r}: the database path is empty")
    return path
