"""devplace's errors: one tree for every layer.

DevplaceError
 +-- Invalid          bad input; names the field path and the reason (HTTP 422, gRPC INVALID_ARGUMENT)
 |    +-- Malformed    the input does not parse at all: not JSON/YAML, not UTF-8, empty (HTTP 400; EMCO 422)
 |    +-- TooLarge     the input is over a size limit (HTTP 413)
 +-- NotFound         the object (or a parent of it) does not exist (404, NOT_FOUND)
 +-- AlreadyExists    an object of that name exists (409, ALREADY_EXISTS)
 +-- Conflict         stale resourceVersion: somebody wrote first; or an apply that would change fields other
 |                    managers own, listed in `fields` (409, ABORTED)
 +-- Gone             watch revision compacted, or beyond the store's; relist and watch again (410, OUT_OF_RANGE)
 |    +-- ResourceVersionTooLarge  a list at a revision the store has not reached, e.g. a store that was reset
 |                                 (504 Timeout with a ResourceVersionTooLarge cause, as Kubernetes; OUT_OF_RANGE)
 +-- Refused          a rule said no, e.g. a slot held elsewhere, a parent with children (409, FAILED_PRECONDITION)
 +-- Unauthenticated  credentials offered and not good, or none where they are required (401, UNAUTHENTICATED)
 +-- Forbidden        not allowed, e.g. a node writing another node's slot (403, PERMISSION_DENIED)
 +-- Unavailable      a backend or peer did not answer (503, UNAVAILABLE)
 |    +-- TooManyRequests  over a per-client limit, e.g. open watches; retry later (429, RESOURCE_EXHAUSTED)
 +-- UnsupportedMediaType  a body in a format the route does not read, e.g. an unknown patch type (415)

`Invalid` is also a `ValueError`, so parsers (quantities, selectors) behave like Python expects.
The HTTP mapping lives in `devplace.server._statuses` and the gRPC one in `devplace.deviceplugin._errors`;
nothing else translates errors. Chain with ``raise ... from e`` so the cause survives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "AlreadyExists",
    "Conflict",
    "DevplaceError",
    "FieldError",
    "Forbidden",
    "Gone",
    "Invalid",
    "Malformed",
    "NotFound",
    "Refused",
    "ResourceVersionTooLarge",
    "TooLarge",
    "Unavailable",
    "UnsupportedMediaType",
]


class DevplaceError(Exception):
    """Root of every error devplace raises on purpose."""

    reason: str = "InternalError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class FieldError:
    """One reason a field was refused: `path` is dotted (`spec.capacity`, `spec.nodes[2]`)."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}" if self.path else self.reason


class Invalid(DevplaceError, ValueError):
    """Bad input. `fields` lists every refused field with its reason (may be empty for whole-input errors)."""

    reason = "Invalid"

    def __init__(self, message: str, fields: Sequence[FieldError] = ()) -> None:
        super().__init__(message)
        self.fields: tuple[FieldError, ...] = tuple(fields)

    @classmethod
    def field(cls, path: str, reason: str) -> Invalid:
        """The common case: one field, one reason; the message reads `path: reason`."""
        err = FieldError(path, reason)
        return cls(str(err), [err])


class Malformed(Invalid):
    reason = "BadRequest"


class TooLarge(Invalid):
    reason = "RequestEntityTooLarge"


class NotFound(DevplaceError):
    reason = "NotFound"


class AlreadyExists(DevplaceError):
    reason = "AlreadyExists"


class Conflict(DevplaceError):
    """`fields` (optional) names each field in conflict and with whom (server-side apply's field manager conflicts)."""

    reason = "Conflict"

    def __init__(self, message: str, fields: Sequence[FieldError] = ()) -> None:
        super().__init__(message)
        self.fields: tuple[FieldError, ...] = tuple(fields)


class Gone(DevplaceError):
    reason = "Expired"


class ResourceVersionTooLarge(Gone):
    """A read at a revision beyond the store's current one. Kubernetes answers a list so with 504 `Timeout` (its
    watch cache did not catch up in time); client-go then relists from scratch, as for `Gone`, hence the base class.
    A watch from such a revision raises plain `Gone` (410), as Kubernetes does."""

    reason = "Timeout"

    @classmethod
    def at(cls, requested: int, current: int) -> ResourceVersionTooLarge:
        return cls(f"Too large resource version: {requested}, current: {current}")


class Refused(DevplaceError):
    reason = "Refused"


class Unauthenticated(DevplaceError):
    reason = "Unauthorized"


class Forbidden(DevplaceError):
    reason = "Forbidden"


class Unavailable(DevplaceError):
    reason = "ServiceUnavailable"


class TooManyRequests(Unavailable):
    """Over a per-client limit; `retry_after` seconds is a hint (the HTTP `Retry-After` header)."""

    reason = "TooManyRequests"

    def __init__(self, message: str, retry_after: int = 1) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class UnsupportedMediaType(DevplaceError):
    reason = "UnsupportedMediaType"
