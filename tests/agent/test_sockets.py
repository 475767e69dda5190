"""Directory watches: kubelet.sock coming and going wakes the agent; without inotify it polls."""

from __future__ import annotations

import asyncio
import os
import struct
from pathlib import Path

from devplace.agent import _sockets as sockets


def event(mask: int, name: str) -> bytes:
    raw = name.encode() + b"\0" * (16 - len(name)) if name else b""
    return struct.pack("iIII", 1, mask, 0, len(raw)) + raw


def test_inotify_events_are_parsed_into_masks_and_names() -> None:
    data = event(sockets.IN_CREATE, "kubelet.sock") + event(sockets.IN_DELETE, "dp-a.sock") + event(0x400, "")
    assert sockets.parse_events(data) == [
        (sockets.IN_CREATE, "kubelet.sock"),
        (sockets.IN_DELETE, "dp-a.sock"),
        (0x400, ""),
    ]


async def test_creating_and_deleting_a_watched_name_wakes_the_waiter(tmp_path: Path) -> None:
    watch = sockets.DirectoryWatch(tmp_path, {"kubelet.sock"})
    watch.start()
    try:
        assert watch.inotify
        waiter = asyncio.create_task(watch.wait())
        await asyncio.sleep(0)
        assert not waiter.done()
        (tmp_path / "kubelet.sock").write_text("")
        await asyncio.wait_for(waiter, 10)  # a bound for a broken build, not a timing assertion
        waiter = asyncio.create_task(watch.wait())
        os.unlink(tmp_path / "kubelet.sock")
        await asyncio.wait_for(waiter, 10)
    finally:
        watch.close()


async def test_a_poke_wakes_the_waiter(tmp_path: Path) -> None:
    watch = sockets.DirectoryWatch(tmp_path, {"kubelet.sock"})
    watch.start()
    try:
        waiter = asyncio.create_task(watch.wait())
        await asyncio.sleep(0)
        watch.poke()
        await asyncio.wait_for(waiter, 10)
    finally:
        watch.close()


async def test_without_inotify_the_watch_falls_back_to_polling(tmp_path: Path) -> None:
    watch = sockets.DirectoryWatch(tmp_path / "missing", {"kubelet.sock"}, fallback_poll=0.001)
    watch.start()  # inotify_add_watch fails on a missing directory
    assert not watch.inotify
    await asyncio.wait_for(watch.wait(), 10)  # returns after the fallback period, though nothing happened
    watch.close()
