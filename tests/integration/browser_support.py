"""Real headless Chromium driven over the DevTools protocol on a loopback websocket.

``Browser`` starts ``chromium`` (the Debian package; ``.ci/run`` installs it when missing) with a
fresh profile, no network services and a DevTools port chosen by Chromium itself on 127.0.0.1,
then opens one page target. ``Page.load`` navigates and waits for the load event, collecting
console errors, uncaught exceptions, log errors and every network request the page makes.
No mocks: this is the browser a reader would open the report in.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from websockets.sync.client import ClientConnection, connect

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
    "--window-size=1280,900",
)
_LISTENING = re.compile(r"DevTools listening on (ws://127\.0\.0\.1:\d+/\S+)")


@dataclass
class Loaded:
    """What one page load produced."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)


class Browser:
    """One headless Chromium process with one page, closed on exit."""

    def __init__(self, profile: Path, *, timeout_s: float = 30.0) -> None:
        assert CHROMIUM is not None
        self._timeout = timeout_s
        self._ids = itertools.count(1)
        self._stack = contextlib.ExitStack()
        profile.mkdir(parents=True, exist_ok=True)
        # Chromium logs a lot to stderr; a file never fills up and blocks it like a pipe can.
        self._log = profile.parent / f"{profile.name}.stderr"
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(
                [CHROMIUM, *_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        try:
            url = self._devtools_url()
            # Typed through the connection itself: websockets 16 types __enter__ as its base.
            self._ws: ClientConnection = connect(url, max_size=None, open_timeout=timeout_s)
            self._stack.enter_context(self._ws)
            target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
            attached = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})
            self._session = attached["sessionId"]
            for domain in ("Page", "Runtime", "Log", "Network"):
                self.call(f"{domain}.enable")
        except BaseException:
            self._stop()
            raise

    def _devtools_url(self) -> str:
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            found = _LISTENING.search(self._log.read_text(errors="replace"))
            if found:
                return found.group(1)
            if self._proc.poll() is not None:
                break
            time.sleep(0.05)
        text = self._log.read_text(errors="replace")
        raise RuntimeError(f"chromium did not open its DevTools port: {text[-2000:]}")

    def _stop(self) -> None:
        self._stack.close()
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()

    def _send(self, method: str, params: dict[str, Any] | None, session: str | None) -> int:
        message: dict[str, Any] = {"id": next(self._ids), "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        self._ws.send(json.dumps(message))
        return int(message["id"])

    def _wait(self, wanted: int, sink: Loaded | None = None, event: str | None = None) -> Any:
        deadline = time.monotonic() + self._timeout
        result: Any = None
        got_result = False
        got_event = event is None
        while not (got_result and got_event):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer to DevTools message {wanted}")
            message = json.loads(self._ws.recv(timeout=left))
            if message.get("id") == wanted:
                if "error" in message:
                    raise RuntimeError(f"DevTools error: {message['error']}")
                result, got_result = message.get("result"), True
                continue
            method = message.get("method")
            if sink is not None:
                _collect(method, message.get("params", {}), sink)
            if method == event:
                got_event = True
        return result

    def _call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return self._wait(self._send(method, params, None))

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One DevTools command on the page; its result."""
        return self._wait(self._send(method, params, self._session))

    def load(self, path: Path, *, javascript: bool) -> Loaded:
        """Navigate to ``path`` with JavaScript on or off; wait for the load event."""
        self.call("Emulation.setScriptExecutionDisabled", {"value": not javascript})
        sink = Loaded()
        sent = self._send("Page.navigate", {"url": path.as_uri()}, self._session)
        self._wait(sent, sink, event="Page.loadEventFired")
        if javascript:
            # Let the page's own script run its first pass and flush console messages.
            self.evaluate("new Promise(r => setTimeout(r, 200))", sink=sink, await_promise=True)
        return sink

    def evaluate(
        self, expression: str, *, sink: Loaded | None = None, await_promise: bool = False
    ) -> Any:
        """The JSON value of ``expression`` evaluated in the page."""
        sent = self._send(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": await_promise},
            self._session,
        )
        answer = self._wait(sent, sink)
        if "exceptionDetails" in answer:
            raise RuntimeError(f"evaluation failed: {answer['exceptionDetails']}")
        return answer["result"].get("value")

    def screenshot(self) -> bytes:
        """A PNG of the whole page."""
        data = self.call("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        return base64.b64decode(data["data"])

    def __enter__(self) -> Browser:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()


def _collect(method: str | None, params: dict[str, Any], sink: Loaded) -> None:
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        sink.errors.append(f"console: {params.get('args')}")
    elif method == "Runtime.exceptionThrown":
        sink.errors.append(f"exception: {params.get('exceptionDetails')}")
    elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
        sink.errors.append(f"log: {params['entry'].get('text')}")
    elif method == "Network.requestWillBeSent":
        sink.requests.append(str(params.get("request", {}).get("url")))


def install_hint() -> str:
    """Why the browser tests cannot run here."""
    return "Chromium is not installed (.ci/run installs the Debian package 'chromium')"


def which_chromium() -> str | None:
    """The browser binary, or None."""
    return CHROMIUM


def pillow_pixels(png: bytes) -> tuple[int, int, int]:
    """(width, height, distinct colours in a 64x64 thumbnail) of a PNG, via Pillow."""
    import io

    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        width, height = image.size
        small = image.convert("RGB").resize((64, 64))
        colours = len(small.getcolors(maxcolors=64 * 64) or ())
    return width, height, colours
