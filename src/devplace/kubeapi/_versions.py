"""The Kubernetes API level devplace serves, and `/version` as Kubernetes' `version.Info` answers it.

Clients read `/version` before anything else: kubectl warns when the server is more than one minor version from it
("version difference between client (1.27) and server (0.1) exceeds the supported minor version skew of +/-1"), kr8s
warns outside the versions it supports, and the official Python client's `VersionApi` refuses an answer without every
field of `version.Info`. So the answer names the Kubernetes API level devplace serves, not devplace's own release:

- the level is 1.32 (`API_LEVEL`): the built-in kinds' schemas devplace serves are Kubernetes 1.32's
  (`tools/kubernetes_schemas.py`), and the kubectl a user most likely has is within one minor of it (1.31 to 1.33
  print no skew warning; older and newer ones work, with kubectl's warning);
- `gitVersion` is `v1.32.0+devplace.<release>`: semver build metadata carries devplace's release, which every client
  ignores when it compares versions (kubectl, kr8s and client-go parse it), and `devplace` repeats it plainly;
- the build fields say what there is to say: no git commit is known at run time (`gitCommit` and `gitTreeState`
  empty, `buildDate` the epoch, as an unstamped Kubernetes build has them), `goVersion` names the Python that runs
  the server (there is no Go), `compiler` its implementation, and `platform` is `<os>/<arch>` in Go's words.

Pure but for reading the interpreter's own facts (`platform`, `sys`).
"""

from __future__ import annotations

import platform
import sys

API_LEVEL = (1, 32)
"""The Kubernetes minor release whose API devplace serves (major, minor)."""

_ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "i686": "386", "armv7l": "arm"}


def git_version(release: str) -> str:
    """`v1.32.0+devplace.<release>`: the API level with devplace's release as semver build metadata (characters
    semver refuses in `release` separate identifiers, empty ones dropped)."""
    major, minor = API_LEVEL
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c in ".-") else "." for c in release)
    parts = [part for part in cleaned.split(".") if part]  # semver: no empty identifier
    return f"v{major}.{minor}.0+devplace.{'.'.join(parts) or '0'}"


def go_platform() -> str:
    """The machine as Go names it in `version.Info.platform`: `linux/amd64`, `darwin/arm64`."""
    machine = platform.machine().lower()
    system = sys.platform if sys.platform != "win32" else "windows"
    return f"{system}/{_ARCHES.get(machine, machine or 'unknown')}"


def version_info(release: str) -> dict[str, str]:
    """Every field of Kubernetes' `version.Info` (module docstring), and `devplace`: devplace's release."""
    major, minor = API_LEVEL
    return {
        "major": str(major),
        "minor": str(minor),
        "gitVersion": git_version(release),
        "gitCommit": "",
        "gitTreeState": "",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": f"python{platform.python_version()}",
        "compiler": platform.python_implementation().lower(),
        "platform": go_platform(),
        "devplace": release,
    }
