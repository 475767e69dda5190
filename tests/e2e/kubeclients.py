"""Real Kubernetes clients against a real `devplace server`: the machine's kubectl (and its versioned
`kubectl.1.<minor>` binaries), the official `kubernetes` Python client and kr8s, each with nothing but the kubeconfig
the server writes for itself. Shared by the tests of issue #22's "what Kubernetes clients and a new user hit first".
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import spawn_server

KUBECTL = shutil.which("kubectl")


def versioned_kubectls() -> dict[int, str]:
    """`kubectl.1.<minor>` on PATH or beside the kubectl on PATH (or behind its symlink): minor -> path."""
    found: dict[int, str] = {}
    directories = [Path(d) for d in os.environ.get("PATH", "").split(os.pathsep) if d]
    if KUBECTL is not None:
        directories += [Path(KUBECTL).parent, Path(os.path.realpath(KUBECTL)).parent]
    for directory in directories:
        for path in directory.glob("kubectl.1.*") if directory.is_dir() else []:
            match = re.fullmatch(r"kubectl\.1\.(\d+)", path.name)
            if match and os.access(path, os.X_OK):
                found.setdefault(int(match[1]), str(path))
    return dict(sorted(found.items()))


KUBECTLS = versioned_kubectls()
MINORS = [m for m in range(27, 34) if m in KUBECTLS]


def kubectl_minor(minor: int) -> pytest.MarkDecorator:
    return pytest.mark.skipif(minor not in KUBECTLS, reason=f"kubectl.1.{minor} is not installed")


class Kubectl:
    """Runs one kubectl binary with only the environment a user of the written kubeconfig would have."""

    def __init__(self, binary: str, kubeconfig: Path, home: Path) -> None:
        self.binary = binary
        home.mkdir(parents=True, exist_ok=True)
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "KUBECONFIG": str(kubeconfig)}

    def __call__(self, *args: str, stdin: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.binary, *args], input=stdin, capture_output=True, text=True, env=self.env, timeout=90, check=False
        )
        if check:
            assert done.returncode == 0, f"{self.binary} {' '.join(args)} failed:\n{done.stderr}{done.stdout}"
        return done


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A `devplace server` on sqlite that wrote its kubeconfig; yields the kubeconfig's path."""
    directory = tmp_path_factory.mktemp("clients")
    path = directory / "kubeconfig"
    with spawn_server(f"sqlite:///{directory}/devplace.db", extra_args=("--write-kubeconfig", str(path))):
        deadline = time.monotonic() + 20
        while not (path.is_file() and path.stat().st_size) and time.monotonic() < deadline:
            time.sleep(0.05)  # the server writes it once it listens, bounded by the deadline
        yield path
