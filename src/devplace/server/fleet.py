"""The EMCO-style fleet API under /v2 (placeholder: being written by the placement work)."""

from __future__ import annotations

from fastapi import APIRouter

from devplace.store import Store

__all__ = ["router"]


def router(store: Store) -> APIRouter:
    return APIRouter()
