"""Debian's chromium, headless, driven over the DevTools protocol (CDP) on loopback.

No WebDriver and no browser download: the system ``chromium`` is started with
``--remote-debugging-port=0`` and a throwaway profile, and one page is driven through its
websocket (``websockets``' sync client, already an Airflow dependency). Enough for what the UI
tests need: a cookie, navigation, ``Runtime.evaluate`` to read the DOM, waiting for a condition,
and PNG screenshots.
"""

from __future__ import annotations

import base64
import itertools
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Self

from websockets.sync.client import connect

__all__ = ["Browser", "BrowserError", "chromium_path"]


class BrowserError(RuntimeError):
    pass


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    def __init__(self, width: int = 1600, height: int = 1000, timeout: float = 60.0) -> None:
        binary = chromium_path()
        if binary is None:
            raise BrowserError("chromium is not installed (apt-get install chromium)")
        self.profile = Path(tempfile.mkdtemp(prefix="noetlc-chromium-"))
        self.process = subprocess.Popen(
            [
                binary,
                "--headless=new",
                "--no-sandbox",  # tests run as root in CI; the pages are our own loopback stack
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                "--remote-debugging-address=127.0.0.1",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._ids = itertools.count(1)
        try:
            port = self._port(timeout)
            targets = json.loads(
                urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10).read()
            )
            page = next(t for t in targets if t.get("type") == "page")
            self.ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout)
            self.call("Page.enable")
            self.call("Runtime.enable")
            self.call("Network.enable")
        except BaseException:
            self.close()
            raise

    def _port(self, timeout: float) -> int:
        marker = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise BrowserError(f"chromium exited with {self.process.returncode}")
            if marker.exists():
                first = marker.read_text().splitlines()
                if first and first[0].isdigit():
                    return int(first[0])
            time.sleep(0.1)
        raise BrowserError("chromium did not open its DevTools port")

    def call(self, method: str, timeout: float = 60.0, **params: Any) -> dict[str, Any]:
        ident = next(self._ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError(f"{method}: no answer in {timeout} s")
            message = json.loads(self.ws.recv(timeout=left))
            if message.get("id") == ident:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                return message.get("result", {})

    def set_cookie(self, name: str, value: str, url: str) -> None:
        if not self.call("Network.setCookie", name=name, value=value, url=url).get("success"):
            raise BrowserError(f"cookie {name} refused for {url}")

    def evaluate(self, expression: str) -> Any:
        result = self.call(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]}: {result['exceptionDetails'].get('text')}")
        return result.get("result", {}).get("value")

    def goto(self, url: str, timeout: float = 60.0) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete'", timeout)

    def wait_for(self, expression: str, timeout: float = 60.0, interval: float = 0.3) -> Any:
        """Poll ``expression`` until it is truthy; its value. Raises with the page text."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except BrowserError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                text = self.evaluate("document.body ? document.body.innerText : ''") or ""
                raise BrowserError(f"never true: {expression}\npage text:\n{text[:2000]}")
            time.sleep(interval)

    def text(self) -> str:
        return self.evaluate("document.body ? document.body.innerText : ''") or ""

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            if getattr(self, "ws", None) is not None:
                self.ws.close()
        finally:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait(10)
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
