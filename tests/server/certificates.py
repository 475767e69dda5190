"""A throwaway certificate authority for TLS tests, made with the `openssl` command (the `cryptography` package is not
installed): a CA, a server certificate for 127.0.0.1, and client certificates with a CN (user) and O values (groups).

    pki = Pki.create(tmp_path)
    server = pki.issue("server", "127.0.0.1", server=True)
    node = pki.issue("node-a", "system:node:node-a", ("system:nodes",))
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Issued", "Pki", "write_tokens"]

_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class Issued:
    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    directory: Path
    ca: Issued

    @classmethod
    def create(cls, directory: Path, name: str = "ca") -> Pki:
        directory.mkdir(parents=True, exist_ok=True)
        ca = Issued(directory / f"{name}.crt", directory / f"{name}.key")
        _openssl(
            "req", "-x509", *_KEY, "-keyout", str(ca.key), "-out", str(ca.cert), "-days", "2",
            "-subj", f"/CN=devplace test {name}", cwd=directory,
        )  # fmt: skip
        return cls(directory, ca)

    def issue(
        self, name: str, common_name: str, organizations: tuple[str, ...] = (), *, server: bool = False
    ) -> Issued:
        """A certificate signed by this CA: for a server (127.0.0.1 and localhost) or a client (CN user, O groups)."""
        issued = Issued(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        csr = self.directory / f"{name}.csr"
        extensions = self.directory / f"{name}.ext"
        if server:
            extensions.write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        else:
            extensions.write_text("extendedKeyUsage=clientAuth\n")
        subject = "/CN=" + common_name + "".join(f"/O={o}" for o in organizations)
        _openssl(
            "req", "-new", *_KEY, "-keyout", str(issued.key), "-out", str(csr), "-subj", subject, cwd=self.directory
        )
        _openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(self.ca.cert), "-CAkey", str(self.ca.key), "-CAcreateserial",
            "-out", str(issued.cert), "-days", "2", "-extfile", str(extensions), cwd=self.directory,
        )  # fmt: skip
        return issued


def write_tokens(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
