"""Headless Chromium (Debian's ``chromium``) driven over the DevTools protocol, for page tests.

:func:`open_page` loads a URL in a fresh profile, records every request the page
makes (``Network.requestWillBeSent`` of the page's own target, so Chromium's
background traffic is not counted), evaluates a script and takes a full-page
PNG screenshot. The protocol runs over ``--remote-debugging-pipe`` (file
descriptors 3 and 4, NUL-separated JSON): no port, no extra Python package.

Nothing leaves the machine: every proxied request goes to a closed port on
127.0.0.1 and no host name is resolved, so a page that tried to fetch a CDN
would fail locally — and still show up in ``requests``.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import pytest

WIDTH = 1280
MAX_HEIGHT = 4000


def chromium_binary() -> str:
    """The Chromium binary; a test fails (never skips) with the command that installs it."""
    found = shutil.which("chromium")
    if found is None:
        pytest.fail("chromium not found: run `python -m tests.support.system_deps` (apt-get install chromium)")
    return found


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PageResult:
    requests: list[str]
    """URLs the page asked for, its own document included."""
    value: Any
    """What the script evaluated to."""
    png: bytes


class _Pipe:
    def __init__(self, write_fd: int, read_fd: int) -> None:
        self._write, self._read = write_fd, read_fd
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self._read, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None, timeout: float = 60
    ) -> dict[str, Any]:
        self._next += 1
        ident = self._next
        body: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            body["sessionId"] = session
        os.write(self._write, json.dumps(body).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._message(deadline)
            if message.get("id") == ident:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self.events.append(message)

    def wait_for(self, method: str, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for event in self.events:
            if event.get("method") == method:
                return event
        while True:
            message = self._message(deadline)
            self.events.append(message)
            if message.get("method") == method:
                return message


def open_page(url: str, script: str = "null") -> PageResult:
    """Load ``url``, run ``script`` in it, screenshot it; see the module docstring."""
    binary = chromium_binary()
    to_browser_r, to_browser_w = os.pipe()
    from_browser_r, from_browser_w = os.pipe()

    def wire() -> None:  # runs in the child: fd 3 reads commands, fd 4 writes answers
        # via fds above 9 first: the pipe's own fds may be 3 or 4, and dup2 onto itself keeps close-on-exec
        commands, answers = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
        os.dup2(commands, 3)
        os.dup2(answers, 4)

    with tempfile.TemporaryDirectory(prefix="noe-chromium-") as profile:
        proc = subprocess.Popen(
            [
                binary,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-default-apps",
                "--disable-extensions",
                "--no-pings",
                "--disable-domain-reliability",
                f"--proxy-server=http://127.0.0.1:{_closed_port()}",
                "--proxy-bypass-list=<-loopback>",
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,  # noqa: PLW1509 - the pipe must land on fds 3 and 4
            close_fds=False,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        pipe = _Pipe(to_browser_w, from_browser_r)
        try:
            target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Network.enable", "Page.enable"):
                pipe.call(domain, session=session)
            pipe.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": WIDTH, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
            pipe.call("Page.navigate", {"url": url}, session=session)
            pipe.wait_for("Page.loadEventFired")
            time.sleep(0.5)  # let late fetches (fonts, images) start, so they are seen
            value = pipe.call("Runtime.evaluate", {"expression": script, "returnByValue": True}, session=session)[
                "result"
            ].get("value")
            height = pipe.call("Page.getLayoutMetrics", session=session)["cssContentSize"]["height"]
            pipe.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": WIDTH, "height": min(int(height), MAX_HEIGHT), "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
            shot = pipe.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
            requests = [
                event["params"]["request"]["url"]
                for event in pipe.events
                if event.get("method") == "Network.requestWillBeSent" and event.get("sessionId") == session
            ]
            with contextlib.suppress(RuntimeError, TimeoutError):  # it may close the pipe before answering
                pipe.call("Browser.close", timeout=10)
        finally:
            os.close(to_browser_w)
            os.close(from_browser_r)
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
    return PageResult(requests, value, base64.b64decode(shot))
