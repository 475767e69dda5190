"""How the kubelet's gRPC protocols are carried: real gRPC over unix sockets, or in process (a simulation at scale).

A `Transport` makes servers and channels with grpc.aio's shapes: `server()` (`add_insecure_port`, `start`, `stop`, and
the generated `add_*Servicer_to_server` functions register on it) and `channel(target)` (the generated `*Stub`
classes call `unary_unary` / `unary_stream` on it; `close`; `async with`). Agents, plugins and the simulated kubelet
take one and never call `grpc.aio.server` or `grpc.aio.insecure_channel` themselves for these protocols.

- `UNIX` (the default, and what a real node uses): grpc.aio itself, a server per socket file.
- `InProcessTransport()`: for a simulated fleet of hundreds of nodes, where a gRPC server per plugin per node (tens
  of thousands of sockets, file descriptors and poller wake-ups) is what the simulation would spend its time on. One
  transport object per fleet is the "network": a server bound to `unix://<path>` is found there by path. What stays
  the same is everything the parts can observe:
  * the same protobuf messages, each request and response serialized with the stub's serializer and parsed with the
    servicer's deserializer (and back), so a message that would not survive the wire does not survive here;
  * the same calls in the same order (Register, GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation,
    Allocate, PreStartContainer, PodResources List), the same servicer objects, the same status codes: a servicer's
    `context.abort(code, details)` reaches the caller as `grpc.aio.AioRpcError` with that code and details, an
    unexpected exception as UNKNOWN, a deadline as DEADLINE_EXCEEDED, no server at the path as UNAVAILABLE (or, with
    `wait_for_ready`, a wait until one starts, bounded by the timeout);
  * the socket files: a server creates its file when the port is added (a plain file; a file this transport made
    there before is replaced, as grpc replaces a socket file, any other file refuses the port as bind does) and
    removes it when it stops, so code that watches kubelet.sock's identity (inode, ctime) or
    checks that a plugin's socket still exists sees what it would see with sockets;
  * a ListAndWatch stream ends when its server stops: the caller's iteration raises UNAVAILABLE ("Cancelling all
    calls", as grpc.aio says it), and the servicer's generator is closed (its `finally` runs); a caller that cancels
    its task closes the generator the same way.
  What differs: a channel finds its server at every call (a socket connection made before the file was replaced
  would keep reaching the old server until it closes); a server-streaming call runs the servicer's generator in the
  caller's task, one message per `__anext__` (no buffering: the next message is computed when the caller asks for
  it), and no bytes cross a socket.
  `context` offers what devplace's servicers use: `abort`, `add_done_callback` (run once the call ended, whatever the
  ending), `cancelled`, `done`, `set_code`, `set_details`, `invocation_metadata`, `peer`, `time_remaining`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterable
from types import TracebackType
from typing import Any, Literal, Protocol, Self

import grpc
import grpc.aio

TransportName = Literal["unix", "inprocess"]


class Transport(Protocol):
    """Makes grpc.aio-shaped servers and channels (module docstring)."""

    name: TransportName

    def server(self) -> Any: ...

    def channel(self, target: str) -> Any: ...


class UnixTransport:
    """grpc.aio over unix sockets: `grpc.aio.server()` and `grpc.aio.insecure_channel(target)`."""

    name: TransportName = "unix"

    def server(self) -> grpc.aio.Server:
        return grpc.aio.server()

    def channel(self, target: str) -> grpc.aio.Channel:
        return grpc.aio.insecure_channel(target)


UNIX = UnixTransport()


def _path_of(target: str) -> str:
    for prefix in ("unix://", "unix:"):
        if target.startswith(prefix):
            return target[len(prefix) :]
    raise ValueError(f"the in-process transport serves unix targets only, not {target!r}")


def _error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details, None)


class _Abort(Exception):
    """Raised by `_Context.abort` to unwind the servicer, as grpc.aio's AbortError does."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class _Context:
    """The servicer's side of one in-process call."""

    def __init__(self, deadline: float | None, metadata: Iterable[tuple[str, str]] | None) -> None:
        self._deadline = deadline
        self._metadata = tuple(metadata or ())
        self._callbacks: list[Callable[[Any], None]] = []
        self._done = False
        self._cancelled = False
        self.code: grpc.StatusCode | None = None
        self.details: str | None = None

    async def abort(self, code: grpc.StatusCode, details: str = "", trailing_metadata: Any = ()) -> None:
        raise _Abort(code, details)

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return "inprocess:"

    def time_remaining(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - asyncio.get_running_loop().time())

    def cancelled(self) -> bool:
        return self._cancelled

    def done(self) -> bool:
        return self._done

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        if self._done:
            raise RuntimeError("the call has ended")
        self._callbacks.append(callback)

    def finish(self, cancelled: bool = False) -> None:
        if self._done:
            return
        self._done = True
        self._cancelled = cancelled
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(self)


class _Server:
    """A grpc.aio.Server look-alike registered in an `InProcessTransport` under its socket path."""

    def __init__(self, transport: InProcessTransport) -> None:
        self._transport = transport
        self._methods: dict[str, Any] = {}  # grpc.RpcMethodHandler (its stubs type the sync shape)
        self._paths: list[tuple[str, tuple[int, int] | None]] = []
        self._streams: set[_StreamCall] = set()
        self.running = False

    def add_generic_rpc_handlers(self, handlers: Iterable[Any]) -> None:
        """Accepted for the generated code's sake; the methods come from `add_registered_method_handlers`."""

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        for method, handler in handlers.items():
            self._methods[f"/{service}/{method}"] = handler

    def add_insecure_port(self, target: str) -> int:
        path = _path_of(target)
        made = self._transport._files.get(path)
        if made is not None and made == _identity(path):
            os.unlink(path)  # a socket file of ours: grpc unlinks a socket file before it binds
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except OSError as e:
            raise RuntimeError(f"Failed to bind to address {target}: {e.strerror or e}") from e
        os.close(fd)
        identity = _identity(path)
        self._paths.append((path, identity))
        if identity is not None:
            self._transport._files[path] = identity
        return 0

    async def start(self) -> None:
        self.running = True
        for path, identity in self._paths:
            self._transport._bind(path, self, identity)

    async def stop(self, grace: float | None) -> None:
        self.running = False
        for path, _ in self._paths:
            self._transport._unbind(path, self)
            with contextlib.suppress(FileNotFoundError):  # as grpc does, whoever's file is there now
                os.unlink(path)
            self._transport._files.pop(path, None)
        self._paths = []
        for stream in list(self._streams):
            stream.server_gone()

    async def wait_for_termination(self, timeout: float | None = None) -> bool:
        return not self.running

    def method(self, name: str) -> Any:
        return self._methods.get(name)


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_ctime_ns)


class _UnaryUnary:
    def __init__(self, channel: _Channel, method: str, serializer: Any, deserializer: Any) -> None:
        self._channel = channel
        self._method = method
        self._serialize = serializer
        self._deserialize = deserializer

    async def __call__(
        self,
        request: Any,
        *,
        timeout: float | None = None,
        metadata: Any = None,
        wait_for_ready: bool | None = None,
        **_: Any,
    ) -> Any:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        try:
            async with asyncio.timeout_at(deadline):
                handler = await self._channel.handler(self._method, bool(wait_for_ready))
                if handler.unary_unary is None:
                    raise _error(grpc.StatusCode.UNIMPLEMENTED, f"{self._method} is not a unary method")
                context = _Context(deadline, metadata)
                message = handler.request_deserializer(self._serialize(request))
                try:
                    response = await handler.unary_unary(message, context)
                    wire = handler.response_serializer(response)
                except _Abort as e:
                    raise _error(e.code, e.details) from None
                except grpc.aio.AioRpcError:
                    raise
                except Exception as e:
                    raise _error(context.code or grpc.StatusCode.UNKNOWN, context.details or repr(e)) from e
                finally:
                    context.finish(cancelled=False)
                return self._deserialize(wire)
        except TimeoutError:
            raise _error(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from None


class _StreamCall:
    """One server-streaming call: async-iterable by the caller, driving the servicer's generator (module docstring)."""

    def __init__(
        self, channel: _Channel, method: str, request: bytes, deserializer: Any, wait: bool, metadata: Any
    ) -> None:
        self._channel = channel
        self._method = method
        self._request = request
        self._deserialize = deserializer
        self._wait = wait
        self._metadata = metadata
        self._generator: AsyncIterator[Any] | None = None
        self._serialize_response: Callable[[Any], bytes] | None = None
        self._server: _Server | None = None
        self._context: _Context | None = None
        self._waiting: asyncio.Task[Any] | None = None
        self._gone = False

    def __aiter__(self) -> Self:
        return self

    async def _open(self) -> None:
        handler = await self._channel.handler(self._method, self._wait)
        if handler.unary_stream is None:
            raise _error(grpc.StatusCode.UNIMPLEMENTED, f"{self._method} is not a server-streaming method")
        self._server = self._channel.transport.server_at(self._channel.path)
        assert self._server is not None
        self._context = _Context(None, self._metadata)
        self._generator = handler.unary_stream(handler.request_deserializer(self._request), self._context)
        self._serialize_response = handler.response_serializer
        self._server._streams.add(self)

    async def __anext__(self) -> Any:
        if self._gone:
            raise _error(grpc.StatusCode.UNAVAILABLE, "Cancelling all calls")
        self._waiting = asyncio.current_task()
        try:
            if self._generator is None:
                await self._open()
            assert self._generator is not None
            assert self._serialize_response is not None
            message = await self._generator.__anext__()
            return self._deserialize(self._serialize_response(message))
        except StopAsyncIteration:
            await self._close()
            raise
        except asyncio.CancelledError:
            await self._close()
            task = asyncio.current_task()
            if self._gone and task is not None and task.uncancel() == 0:
                raise _error(grpc.StatusCode.UNAVAILABLE, "Cancelling all calls") from None
            raise
        except _Abort as e:
            await self._close()
            raise _error(e.code, e.details) from None
        except grpc.aio.AioRpcError:
            await self._close()
            raise
        except Exception as e:
            await self._close()
            raise _error(grpc.StatusCode.UNKNOWN, repr(e)) from e
        finally:
            self._waiting = None

    def server_gone(self) -> None:
        """The server stopped: the call ends with CANCELLED (at once when the caller is waiting for a message)."""
        self._gone = True
        if self._waiting is not None:
            self._waiting.cancel()

    def cancel(self) -> bool:
        self._gone = True
        if self._waiting is not None:
            self._waiting.cancel()
        return True

    async def _close(self) -> None:
        generator, self._generator = self._generator, None
        if self._server is not None:
            self._server._streams.discard(self)
        closer = getattr(generator, "aclose", None)
        if closer is not None:
            with contextlib.suppress(Exception):
                await closer()
        if self._context is not None:
            self._context.finish(cancelled=self._gone)


class _UnaryStream:
    def __init__(self, channel: _Channel, method: str, serializer: Any, deserializer: Any) -> None:
        self._channel = channel
        self._method = method
        self._serialize = serializer
        self._deserialize = deserializer

    def __call__(
        self,
        request: Any,
        *,
        timeout: float | None = None,
        metadata: Any = None,
        wait_for_ready: bool | None = None,
        **_: Any,
    ) -> _StreamCall:
        return _StreamCall(
            self._channel, self._method, self._serialize(request), self._deserialize, bool(wait_for_ready), metadata
        )


class _Channel:
    """A grpc.aio.Channel look-alike: finds its server by path at every call, as a channel reconnects."""

    def __init__(self, transport: InProcessTransport, target: str) -> None:
        self.transport = transport
        self.path = _path_of(target)
        self._closed = False

    def unary_unary(
        self, method: str, request_serializer: Any = None, response_deserializer: Any = None, **_: Any
    ) -> _UnaryUnary:
        return _UnaryUnary(self, method, request_serializer, response_deserializer)

    def unary_stream(
        self, method: str, request_serializer: Any = None, response_deserializer: Any = None, **_: Any
    ) -> _UnaryStream:
        return _UnaryStream(self, method, request_serializer, response_deserializer)

    async def handler(self, method: str, wait: bool) -> Any:
        if self._closed:
            raise _error(grpc.StatusCode.CANCELLED, "the channel is closed")
        server = self.transport.server_at(self.path)
        while server is None:
            if not wait:
                raise _error(grpc.StatusCode.UNAVAILABLE, f"failed to connect to all addresses: unix:{self.path}")
            await self.transport._started(self.path)
            server = self.transport.server_at(self.path)
        found = server.method(method)
        if found is None:
            raise _error(grpc.StatusCode.UNIMPLEMENTED, f"Method not found: {method}")
        return found

    async def close(self, grace: float | None = None) -> None:
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()


class InProcessTransport:
    """The in-process "network" of one simulated fleet: servers by socket path (module docstring)."""

    name: TransportName = "inprocess"

    def __init__(self) -> None:
        self._servers: dict[str, tuple[_Server, tuple[int, int] | None]] = {}
        self._files: dict[str, tuple[int, int]] = {}
        """The socket files servers made, by path (their identity when made)."""
        self._waiters: dict[str, list[asyncio.Future[None]]] = {}

    def server(self) -> _Server:
        return _Server(self)

    def channel(self, target: str) -> _Channel:
        return _Channel(self, target)

    def server_at(self, path: str) -> _Server | None:
        """The server listening on the file now at `path`: a caller reaches a socket by its file, so a server whose
        file was removed or replaced is out of reach, as with sockets."""
        bound = self._servers.get(path)
        if bound is None or _identity(path) != bound[1]:
            return None
        return bound[0]

    def _bind(self, path: str, server: _Server, identity: tuple[int, int] | None) -> None:
        self._servers[path] = (server, identity)
        for waiter in self._waiters.pop(path, []):
            if not waiter.done():
                waiter.set_result(None)

    def _unbind(self, path: str, server: _Server) -> None:
        bound = self._servers.get(path)
        if bound is not None and bound[0] is server:
            del self._servers[path]

    async def _started(self, path: str) -> None:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.setdefault(path, []).append(waiter)
        try:
            await waiter
        finally:
            waiters = self._waiters.get(path)
            if waiters is not None and waiter in waiters:
                waiters.remove(waiter)


def transport_named(name: TransportName) -> Transport:
    """`unix` (the shared grpc.aio transport) or a fresh `InProcessTransport` (one per simulated fleet)."""
    if name == "unix":
        return UNIX
    if name == "inprocess":
        return InProcessTransport()
    raise ValueError(f"unknown transport {name!r}: unix or inprocess")
