"""The one place devplace errors become gRPC status codes, and gRPC failures become devplace errors.

| error         | gRPC status         |
|---------------|---------------------|
| Invalid       | INVALID_ARGUMENT    |
| NotFound      | NOT_FOUND           |
| AlreadyExists | ALREADY_EXISTS      |
| Conflict      | ABORTED             |
| Gone          | OUT_OF_RANGE        |
| Refused       | FAILED_PRECONDITION |
| Unauthenticated | UNAUTHENTICATED   |
| Forbidden     | PERMISSION_DENIED   |
| Unavailable   | UNAVAILABLE         |
| TooManyRequests | RESOURCE_EXHAUSTED |
| UnsupportedMediaType | INVALID_ARGUMENT |

Servicers raise devplace errors internally and call `abort(context, err)` at the edge; clients wrap calls and turn
`grpc.aio.AioRpcError` into devplace errors with `from_rpc_error`, so no other module compares status codes.
Transport failures that are not a peer's decision (DEADLINE_EXCEEDED, CANCELLED) read back as `Unavailable`: the
caller retries or gives up, exactly as for a peer that did not answer. Codes with no devplace meaning (UNKNOWN,
INTERNAL, ...) read back as the root `DevplaceError`, keeping the peer's message.
"""

from __future__ import annotations

from typing import Any, NoReturn

import grpc
import grpc.aio

from devplace import errors

_CODES: dict[type[errors.DevplaceError], grpc.StatusCode] = {
    errors.Invalid: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.AlreadyExists: grpc.StatusCode.ALREADY_EXISTS,
    errors.Conflict: grpc.StatusCode.ABORTED,
    errors.Gone: grpc.StatusCode.OUT_OF_RANGE,
    errors.Refused: grpc.StatusCode.FAILED_PRECONDITION,
    errors.Unauthenticated: grpc.StatusCode.UNAUTHENTICATED,
    errors.Forbidden: grpc.StatusCode.PERMISSION_DENIED,
    errors.TooManyRequests: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
    errors.UnsupportedMediaType: grpc.StatusCode.INVALID_ARGUMENT,
}

_ERRORS: dict[grpc.StatusCode, type[errors.DevplaceError]] = {}
for _cls, _code in _CODES.items():
    _ERRORS.setdefault(_code, _cls)  # a code shared by several errors reads back as the first listed
_ERRORS[grpc.StatusCode.DEADLINE_EXCEEDED] = errors.Unavailable
_ERRORS[grpc.StatusCode.CANCELLED] = errors.Unavailable


def grpc_code(err: errors.DevplaceError) -> grpc.StatusCode:
    """The status code for `err` (subclasses map like their nearest listed base; the bare root is UNKNOWN)."""
    for cls in type(err).__mro__:
        code = _CODES.get(cls)
        if code is not None:
            return code
    return grpc.StatusCode.UNKNOWN


async def abort(context: grpc.aio.ServicerContext[Any, Any], err: errors.DevplaceError) -> NoReturn:
    """End the current RPC with `err`'s status code and message. Never returns (grpc raises to unwind the handler)."""
    await context.abort(grpc_code(err), err.message)
    raise AssertionError("grpc.aio ServicerContext.abort returned")  # pragma: no cover - abort always raises


def from_rpc_error(e: grpc.aio.AioRpcError) -> errors.DevplaceError:
    """The devplace error a failed call stands for; raise it ``from e`` to keep the transport cause."""
    code = e.code()
    details = e.details() or ""
    cls = _ERRORS.get(code, errors.DevplaceError)
    name = code.name if code is not None else "UNKNOWN"
    message = details or f"gRPC call failed with {name}"
    if cls is errors.DevplaceError:
        message = f"{name}: {message}"
    return cls(message)
