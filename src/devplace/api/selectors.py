"""Selectors (placeholder: being written)."""

from __future__ import annotations

__all__ = ["requirement_problem"]


def requirement_problem(key: str, operator: str, values: list[str]) -> str | None:
    return None


class _Everything:
    def matches(self, labels: object) -> bool:
        return True


def parse_label_selector(text: str) -> _Everything:
    return _Everything()
