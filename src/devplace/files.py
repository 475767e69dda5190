"""Files replaced whole: a reader sees the old content or the new, never a part (the one atomic write of devplace).

`write_atomically` writes a temporary file in the target's directory (same file system, so the rename is atomic),
flushes it to disk, and renames it over the target; a failure part-way removes the temporary file and leaves the
target as it was. The temporary file is created 0600 (`tempfile.mkstemp`), so a secret (a kubeconfig with a token)
is never readable by others, even for a moment; `mode` sets another mode before the rename. `sync`: "file" (the
default) flushes the content to disk before the rename; "all" also the directory, so the rename itself survives a
power loss (the CDI specs a runtime reads after a node reboot); "none" neither (state rewritten often whose loss
costs a redo, never a wrong answer).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Literal

__all__ = ["write_atomically"]


def write_atomically(
    path: Path, data: bytes | str, *, mode: int | None = None, sync: Literal["none", "file", "all"] = "file"
) -> None:
    """Replace `path` with `data` (text is written as UTF-8); its directory must exist (`FileNotFoundError`)."""
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
            if sync != "none":
                out.flush()
                os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    if sync == "all":
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
