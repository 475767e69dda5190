"""Fleet objects (placeholder: being written by the placement work)."""

from __future__ import annotations

__all__: list[str] = []
