"""Recorded USB devices in a umockdev testbed, and `devplace handler udev` processes that see them through real libudev.

`Umockdev` runs `fixtures/testbed.py` (the system python3: umockdev's GObject API needs python3-gi, which the
virtualenv lacks) under umockdev's preload and sends it one command per call; `env()` is what a child process needs
to see the testbed's /sys and /dev and its uevents (LD_PRELOAD and UMOCKDEV_DIR). `add_webcam` and `add_serial`
add what `umockdev-record` shows for a USB webcam (/dev/video0 under a usb_device with idVendor/idProduct, through its
uvcvideo interface) and a USB serial adapter (/dev/ttyUSB0 under an ftdi_sio interface). bookworm's umockdev cannot
fake the udev database, so properties are uevent properties (ENV{k} sees those) and no TAG exists.

`udev_handler_process` starts `devplace handler udev` in such an environment, registered with `registration`; the
caller stops it with `stop_child` (by its PID).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

FIXTURE = Path(__file__).parent / "fixtures" / "testbed.py"
SYSTEM_PYTHON = "/usr/bin/python3"
PRELOAD = "libumockdev-preload.so.0"
BOUND = 30.0  # seconds a command may take; guards a hung helper, not a timing assertion

WEBCAM = "/devices/pci0000:00/0000:00:14.0/usb1/1-2"
SERIAL = "/devices/pci0000:00/0000:00:14.0/usb1/1-3"
VIDEO0 = f"{WEBCAM}/1-2:1.0/video4linux/video0"
TTYUSB0 = f"{SERIAL}/1-3:1.0/ttyUSB0"


class Umockdev:
    def __init__(self, proc: asyncio.subprocess.Process, root: str) -> None:
        self.proc = proc
        self.root = root
        self.has_bus = False

    @classmethod
    async def start(cls) -> Umockdev:
        proc = await asyncio.create_subprocess_exec(
            SYSTEM_PYTHON,
            str(FIXTURE),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "LD_PRELOAD": PRELOAD},
        )
        assert proc.stdout is not None
        first = json.loads(await asyncio.wait_for(proc.stdout.readline(), BOUND))
        return cls(proc, first["root"])

    def env(self) -> dict[str, str]:
        return {**os.environ, "LD_PRELOAD": PRELOAD, "UMOCKDEV_DIR": self.root}

    async def _ask(self, **command: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write((json.dumps(command) + "\n").encode())
        await self.proc.stdin.drain()
        line = await asyncio.wait_for(self.proc.stdout.readline(), BOUND)
        answer: dict[str, Any] = json.loads(line)
        return answer

    async def add(
        self,
        subsystem: str,
        name: str,
        parent: str | None = None,
        attributes: dict[str, str] | None = None,
        properties: dict[str, str] | None = None,
        driver: str | None = None,
    ) -> str:
        """Add a device (an `add` uevent goes out); its devpath, without `/sys`."""
        answer = await self._ask(
            op="add",
            subsystem=subsystem,
            name=name,
            parent=None if parent is None else "/sys" + parent,
            attributes=attributes or {},
            properties=properties or {},
            driver=driver,
        )
        syspath: str = answer["syspath"]
        return syspath.removeprefix("/sys")

    async def remove(self, devpath: str) -> None:
        """A `remove` uevent, then the device goes."""
        await self._ask(op="remove", syspath="/sys" + devpath)

    async def change(self, devpath: str, **attributes: str) -> None:
        """Set sysfs attributes of a device, then send its `change` uevent."""
        for name, value in attributes.items():
            await self._ask(op="attribute", syspath="/sys" + devpath, name=name, value=value)
        await self._ask(op="uevent", syspath="/sys" + devpath, action="change")

    async def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), BOUND)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


async def add_usb(tb: Umockdev, port: str, vendor: str, product: str, devnum: int) -> str:
    """A usb_device at `usb1/<port>` under an xHCI controller (no node of its own in /dev here: DEVNAME only)."""
    pci = "/devices/pci0000:00/0000:00:14.0"
    if not tb.has_bus:
        tb.has_bus = True
        await tb.add("pci", "pci0000:00/0000:00:14.0", None, {"vendor": "0x8086", "class": "0x0c0330"}, {}, "xhci_hcd")
        await tb.add("usb", "usb1", pci, {"idVendor": "1d6b", "idProduct": "0002"}, {"DEVTYPE": "usb_device"}, "usb")
    return await tb.add(
        "usb",
        port,
        f"{pci}/usb1",
        {"idVendor": vendor, "idProduct": product, "busnum": "1", "devnum": str(devnum), "dev": f"189:{devnum}"},
        {"DEVTYPE": "usb_device", "DEVNAME": f"/dev/bus/usb/001/{devnum:03d}", "PRODUCT": f"{vendor}/{product}/100"},
        "usb",
    )


async def add_webcam(tb: Umockdev, port: str = "1-2", index: int = 0) -> str:
    """A UVC webcam: usb_device (046d:0825) -> interface (uvcvideo) -> video4linux/video<index>; the video devpath."""
    usb = await add_usb(tb, port, "046d", "0825", 2 + index)
    interface = await tb.add(
        "usb", f"{port}:1.0", usb, {"bInterfaceClass": "0e"}, {"DEVTYPE": "usb_interface"}, "uvcvideo"
    )
    return await tb.add(
        "video4linux",
        f"video4linux/video{index}",
        interface,
        {"dev": f"81:{index}", "name": "HD Webcam C270", "index": "0"},
        {"DEVNAME": f"/dev/video{index}", "ID_V4L_CAPABILITIES": ":capture:", "MAJOR": "81", "MINOR": str(index)},
    )


async def add_serial(tb: Umockdev, port: str = "1-3", index: int = 0) -> str:
    """An FTDI USB serial adapter: usb_device (0403:6001) -> interface (ftdi_sio) -> tty/ttyUSB<index>."""
    usb = await add_usb(tb, port, "0403", "6001", 10 + index)
    interface = await tb.add(
        "usb", f"{port}:1.0", usb, {"bInterfaceClass": "ff"}, {"DEVTYPE": "usb_interface"}, "ftdi_sio"
    )
    return await tb.add(
        "tty",
        f"ttyUSB{index}",
        interface,
        {"dev": f"188:{index}"},
        {"DEVNAME": f"/dev/ttyUSB{index}", "MAJOR": "188", "MINOR": str(index), "ID_BUS": "usb"},
    )


async def udev_handler_process(
    tb: Umockdev, registration: Path, socket_dir: Path, log: Path
) -> asyncio.subprocess.Process:
    """`devplace handler udev` seeing the testbed, registering at `registration` (output in `log`)."""
    with log.open("ab") as out:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "devplace.cli",
            "handler",
            "udev",
            "--registration-socket",
            str(registration),
            "--socket-dir",
            str(socket_dir),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=tb.env(),
        )
