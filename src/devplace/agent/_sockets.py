"""Watching a directory for sockets that come and go (kubelet.sock), at no cost while nothing happens.

The agent must notice a kubelet that starts or restarts (it recreates `kubelet.sock`, and the agent registers every
plugin again), but polling the socket's identity costs every idle agent a wake-up per period, and a fleet of
simulated nodes in one process multiplies that. So `DirectoryWatch` asks Linux: inotify on the directory (ctypes on
libc's `inotify_init1` and `inotify_add_watch`, read through `loop.add_reader`, no dependency), and `wait` returns
when a watched name is created, deleted or moved in or out. Where inotify is unavailable (not Linux, no libc, a
file system without it, the watch limit reached) it falls back to a slow poll: `wait` then returns after
`fallback_poll` seconds (real time: the kubelet is a real peer even under a simulation's fake clock), and the caller
compares identities as before. Either way `wait` may return without a change (events are coalesced and only a hint):
callers look at the file system themselves, so nothing is lost when events overflow.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import errno
import functools
import logging
import os
import struct
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger(__name__)

IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000

_MASK = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF
_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (struct inotify_event, then `len` bytes of name)

DEFAULT_FALLBACK_POLL = 1.0


def parse_events(data: bytes) -> list[tuple[int, str]]:
    """The (mask, name) of each inotify event in `data` (a name is "" for events of the directory itself)."""
    out: list[tuple[int, str]] = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        _wd, mask, _cookie, length = _HEADER.unpack_from(data, offset)
        offset += _HEADER.size
        raw = data[offset : offset + length]
        offset += length
        out.append((mask, os.fsdecode(raw.split(b"\0", 1)[0])))
    return out


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """libc, loaded once per process: `find_library` runs a subprocess (ldconfig), which a fleet of a thousand
    agents would otherwise fork a thousand times from a large process."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6", use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    except (OSError, AttributeError):
        return None
    return libc


class DirectoryWatch:
    """Wake-ups for changes of `names` in `directory` (inotify, or a slow poll; see the module docstring)."""

    def __init__(
        self, directory: Path, names: Iterable[str] | None = None, *, fallback_poll: float = DEFAULT_FALLBACK_POLL
    ) -> None:
        self.directory = directory
        self.names = None if names is None else frozenset(names)
        self.fallback_poll = fallback_poll
        self._fd: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()

    @property
    def inotify(self) -> bool:
        """Whether changes are reported by the kernel (False: `wait` polls)."""
        return self._fd is not None

    def start(self) -> None:
        """Watch the directory (which must exist); falls back to polling when inotify cannot be had."""
        if self._fd is not None:
            return
        libc = _libc()
        if libc is None:
            log.info("inotify unavailable (no libc); looking at %s every %.1fs", self.directory, self.fallback_poll)
            return
        fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        if fd < 0:
            self._unavailable(ctypes.get_errno())
            return
        if libc.inotify_add_watch(fd, os.fsencode(self.directory), _MASK) < 0:
            err = ctypes.get_errno()
            os.close(fd)
            self._unavailable(err)
            return
        self._fd = fd
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(fd, self._readable)

    def _unavailable(self, err: int) -> None:
        log.info(
            "inotify on %s unavailable (%s); looking every %.1fs", self.directory, os.strerror(err), self.fallback_poll
        )

    def _readable(self) -> None:
        fd = self._fd
        if fd is None:
            return
        try:
            data = os.read(fd, 64 * 1024)
        except BlockingIOError:
            return
        except OSError as e:
            if e.errno != errno.EINTR:
                self._close_fd()  # broken: poll from now on
            self._changed.set()
            return
        for mask, name in parse_events(data):
            if mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED):
                self._close_fd()  # the directory itself went away: poll from now on
                self._changed.set()
            elif mask & IN_Q_OVERFLOW or self.names is None or name in self.names:
                self._changed.set()

    def poke(self) -> None:
        """Make the current or next `wait` return at once (the caller has something new to look at)."""
        self._changed.set()

    async def wait(self, timeout: float | None = None) -> None:
        """Return after a change of a watched name, or after `timeout` seconds (None: no limit), or after the
        fallback poll period when inotify is not in use; whichever comes first."""
        if self._fd is None:
            timeout = self.fallback_poll if timeout is None else min(timeout, self.fallback_poll)
        if not self._changed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)
        self._changed.clear()

    def _close_fd(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(fd)
        with contextlib.suppress(OSError):
            os.close(fd)

    def close(self) -> None:
        self._close_fd()
