"""Headless Chromium (Debian's ``chromium``): check a dashboard page, or drive a page.

:func:`check_rendered` loads the page, saves a screenshot and reports per figure whether plotly
drew it (:func:`rendered_figures` on the dumped DOM); :func:`screenshot_ink_fraction` tells a
blank screenshot apart (decoded with Pillow). :func:`devtools_page` starts Chromium with the
DevTools protocol on 127.0.0.1 and yields a :class:`DevToolsPage` that navigates, evaluates
JavaScript, clicks and types (trusted input events), e.g. to run notebook cells in JupyterLab.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import requests
import websocket
from PIL import Image, UnidentifiedImageError

from helpers.errors import BrowserError, DashboardError
from helpers.poll import wait_until

__all__ = [
    "DevToolsPage",
    "check_rendered",
    "devtools_page",
    "find_chromium",
    "rendered_figures",
    "screenshot_ink_fraction",
]

_CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium(browser: str | None = None) -> str:
    """Locate the Chromium executable.

    Args:
        browser: An explicit executable name or path; default: ``chromium`` (Debian),
            ``chromium-browser`` or ``google-chrome`` on ``PATH``.

    Returns:
        The executable's path.

    Raises:
        DashboardError: naming the Debian package to install, when none is found.
    """
    for name in (browser,) if browser else _CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return found
    raise DashboardError(
        f"Failed to find Chromium: no {browser or ' / '.join(_CHROMIUM_NAMES)} executable on PATH; "
        "install the Debian package 'chromium' (apt-get install chromium, or run "
        "WORKBOOK_WITH_CHROMIUM=1 scripts/bootstrap.sh)"
    )


def _hardened_flags() -> list[str]:
    """Headless, no sandbox (root), and no network but loopback: host names resolve to nothing,
    other traffic goes to a closed local proxy port (loopback bypasses it), and background
    services (updates, sync, QUIC) are off."""
    return [
        "--headless",
        "--no-sandbox",  # required as root; the pages are our own (local file or loopback server)
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-extensions",
        "--disable-breakpad",
        "--hide-scrollbars",
        "--mute-audio",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--proxy-server=127.0.0.1:9",
    ]


def _profile_env(profile: str) -> dict[str, str]:
    """Chromium's environment: its home, caches and temporary files (``TMPDIR``: the folder of its
    single-instance socket, which a killed browser leaves behind) all in the throw-away profile."""
    return {
        **os.environ,
        "HOME": profile,
        "XDG_CONFIG_HOME": profile,
        "XDG_CACHE_HOME": profile,
        "TMPDIR": profile,
    }


class _PlotScanner(HTMLParser):
    """Counts ``.main-svg`` and ``.trace`` elements inside each ``div.js-plotly-plot`` of interest."""

    _VOID = frozenset(
        {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
    )

    def __init__(self, ids: Iterable[str]) -> None:
        super().__init__(convert_charrefs=True)
        self.wanted = set(ids)
        self.depth = 0
        self.open: list[tuple[str, int]] = []  # (figure id, depth of its div)
        self.found: dict[str, dict[str, int]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        classes = (values.get("class") or "").split()
        for figure, _ in self.open:
            counts = self.found[figure]
            counts["main_svg"] += "main-svg" in classes
            counts["trace"] += "trace" in classes
        if tag in self._VOID:
            return
        self.depth += 1
        ident = values.get("id")
        if tag == "div" and ident in self.wanted and "js-plotly-plot" in classes:
            self.found.setdefault(ident, {"main_svg": 0, "trace": 0})
            self.open.append((ident, self.depth))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        for figure, _ in self.open:
            self.found[figure]["main_svg"] += "main-svg" in classes
            self.found[figure]["trace"] += "trace" in classes

    def handle_endtag(self, tag: str) -> None:
        if tag in self._VOID:
            return
        while self.open and self.open[-1][1] >= self.depth:
            self.open.pop()
        self.depth -= 1


def rendered_figures(dom: str, expected_ids: Iterable[str]) -> dict[str, bool]:
    """Per expected div id (in order): whether its ``div.js-plotly-plot`` holds a ``.main-svg`` and a
    ``.trace`` element, in a DOM dumped by Chromium."""
    ids = list(expected_ids)
    scanner = _PlotScanner(ids)
    scanner.feed(dom)
    scanner.close()
    return {
        ident: bool(
            (counts := scanner.found.get(ident)) is not None
            and counts["main_svg"] > 0
            and counts["trace"] > 0
        )
        for ident in ids
    }


def check_rendered(
    html_path: str | os.PathLike[str],
    expected_ids: Iterable[str],
    screenshot_path: str | os.PathLike[str],
    *,
    timeout_s: float = 120.0,
    window_size: tuple[int, int] | None = None,
    browser: str | None = None,
) -> dict[str, bool]:
    """Open a page in headless Chromium, save a screenshot, and report which figures rendered.

    One Chromium process loads the page from ``file://`` with a fresh, temporary profile, takes a
    full-window screenshot and dumps the DOM after the page settled (virtual time budget). A
    figure rendered when its ``div.js-plotly-plot`` (id = the expected id) holds at least one
    ``.main-svg`` and one ``.trace`` element. Chromium cannot reach the network: host names
    resolve to nothing, other traffic goes to a closed local proxy port, and background
    services (updates, sync, QUIC) are off.

    Args:
        html_path: The page.
        expected_ids: Div ids of the figures that must render (e.g. ``helpers.dashboard.figures.FIGURE_IDS``).
        screenshot_path: Where to write the PNG screenshot.
        timeout_s: Chromium is killed (with its child processes) after this long.
        window_size: ``(width, height)`` in CSS pixels; default 1400 wide and tall enough for
            every expected figure (540 px each).
        browser: Chromium executable (default: :func:`find_chromium`).

    Returns:
        ``{div id: rendered}`` for every expected id, in the given order.

    Raises:
        DashboardError: when Chromium is missing (naming the Debian package), times out, fails,
            or writes no screenshot.
    """
    executable = find_chromium(browser)
    page = Path(html_path).resolve()
    if not page.is_file():
        raise DashboardError(f"Failed to check dashboard {page}: no such file")
    ids = list(expected_ids)
    width, height = window_size or (1400, 300 + 540 * max(1, len(ids)))
    shot = Path(screenshot_path).resolve()
    shot.parent.mkdir(parents=True, exist_ok=True)
    shot.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="workbook-chromium-") as profile:
        argv = [
            executable,
            *_hardened_flags(),
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--virtual-time-budget=5000",
            f"--screenshot={shot}",
            "--dump-dom",
            page.as_uri(),
        ]
        env = _profile_env(profile)
        proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # its own process group, killed as a whole on timeout
        )
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise DashboardError(
                f"Failed to check dashboard {page} in Chromium: no result within {timeout_s:.0f} s"
            ) from None
        finally:
            if proc.poll() is None:  # pragma: no cover - only on an unexpected exception
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-5:]
        raise DashboardError(
            f"Failed to check dashboard {page} in Chromium: exit status {proc.returncode}: "
            + " | ".join(tail)
        )
    if not shot.is_file() or shot.stat().st_size == 0:
        raise DashboardError(f"Failed to check dashboard {page} in Chromium: no screenshot written to {shot}")
    return rendered_figures(out.decode("utf-8", errors="replace"), ids)


def screenshot_ink_fraction(png_path: str | os.PathLike[str], white_threshold: int = 245) -> float:
    """Fraction of a screenshot's pixels that are not (near) white: 0.0 for a blank page.

    Args:
        png_path: The PNG file (any mode Pillow reads; alpha is ignored).
        white_threshold: A pixel counts as ink when any colour channel is below this value.

    Returns:
        Ink pixels / all pixels.

    Raises:
        DashboardError: when the file is not a PNG.
    """
    try:
        with Image.open(png_path) as image:
            if image.format != "PNG":
                raise DashboardError(f"Failed to read screenshot {png_path}: not a PNG file ({image.format})")
            pixels = np.asarray(image.convert("RGB"))
    except UnidentifiedImageError as exc:
        raise DashboardError(f"Failed to read screenshot {png_path}: not a PNG file") from exc
    ink = (pixels < white_threshold).any(axis=2)
    return float(ink.mean()) if ink.size else 0.0


class DevToolsPage:
    """One tab of a headless Chromium, driven over the DevTools protocol (one websocket).

    Input goes through ``Input.*`` (trusted events, as from a user); :meth:`evaluate` reads the
    page's state. Calls wait for their own reply and skip the protocol's events.
    """

    def __init__(self, connection: websocket.WebSocket) -> None:
        self._ws = connection
        self._last_id = 0

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one protocol command and return its result.

        Raises:
            BrowserError: the browser answered with an error, or not within the socket's timeout.
        """
        self._last_id += 1
        ident = self._last_id
        try:
            self._ws.send(json.dumps({"id": ident, "method": method, "params": params}))
            while True:
                message = json.loads(self._ws.recv())
                if message.get("id") == ident:
                    break
        except (websocket.WebSocketException, OSError) as exc:
            raise BrowserError(f"Failed to call {method} in Chromium: {exc!r}") from exc
        if "error" in message:
            raise BrowserError(f"Failed to call {method} in Chromium: {message['error']}")
        result: dict[str, Any] = message.get("result", {})
        return result

    def navigate(self, url: str) -> None:
        """Load ``url`` in the tab (returns once the navigation started; wait on the DOM after)."""
        result = self.call("Page.navigate", url=url)
        if result.get("errorText"):
            raise BrowserError(f"Failed to open a page in Chromium: {result['errorText']}")

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page (promises are awaited).

        Raises:
            BrowserError: the expression threw.
        """
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise BrowserError(f"Failed to evaluate JavaScript in Chromium: {text}")
        return result.get("result", {}).get("value")

    def click(self, selector: str) -> None:
        """A left click in the middle of the first element matching the CSS ``selector``."""
        box = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)}); if (!e) return null;"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + Math.min(r.height / 2, 10)]; })()"
        )
        if not box:
            raise BrowserError(f"Failed to click in Chromium: no element matches {selector!r}")
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def press(self, key: str, *, code: str, key_code: int, modifiers: int = 0) -> None:
        """A key stroke (down, up) with ``modifiers`` (1 Alt, 2 Ctrl, 4 Meta, 8 Shift), e.g.
        ``press("Enter", code="Enter", key_code=13, modifiers=8)`` for Shift+Enter."""
        keys = {"key": key, "code": code, "windowsVirtualKeyCode": key_code, "modifiers": modifiers}
        self.call("Input.dispatchKeyEvent", type="rawKeyDown", **keys)
        self.call("Input.dispatchKeyEvent", type="keyUp", **keys)

    def insert_text(self, text: str) -> None:
        """Type ``text`` into the focused element (as an input method would commit it)."""
        self.call("Input.insertText", text=text)

    def screenshot(self, path: str | os.PathLike[str]) -> None:
        """Save the tab's viewport as a PNG file."""
        data = self.call("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))


@contextlib.contextmanager
def devtools_page(
    *, timeout_s: float = 60.0, window_size: tuple[int, int] = (1400, 1000), browser: str | None = None
) -> Iterator[DevToolsPage]:
    """Start a headless Chromium on ``about:blank`` and yield its tab as a :class:`DevToolsPage`.

    The DevTools endpoint listens on 127.0.0.1 on a port Chromium picks (read from the profile's
    ``DevToolsActivePort``); the network is cut but for loopback (see :func:`_hardened_flags`).
    Pass secrets (a URL with a token) with :meth:`DevToolsPage.navigate`, never on the argv.
    Chromium and its child processes (one process group) are killed on exit.

    Args:
        timeout_s: how long Chromium may take to start, and each protocol call to answer.
        window_size: ``(width, height)`` in CSS pixels.
        browser: Chromium executable (default: :func:`find_chromium`).

    Raises:
        DashboardError: when Chromium is missing (naming the Debian package).
        BrowserError: when it does not start or its tab cannot be reached.
    """
    executable = find_chromium(browser)
    with tempfile.TemporaryDirectory(prefix="workbook-chromium-") as profile:
        argv = [
            executable,
            *_hardened_flags(),
            f"--user-data-dir={profile}",
            f"--window-size={window_size[0]},{window_size[1]}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
        ]
        log = Path(profile) / "chromium.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(  # noqa: S603 - fixed argv, no shell
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=_profile_env(profile),
                start_new_session=True,  # its own process group, killed as a whole at the end
            )
        connection = None
        try:

            def endpoint() -> str | None:
                if proc.poll() is not None:
                    raise BrowserError(
                        f"Failed to start Chromium: exit status {proc.returncode}: "
                        + " | ".join(log.read_text(errors="replace").strip().splitlines()[-5:])
                    )
                port_file = Path(profile) / "DevToolsActivePort"
                lines = port_file.read_text().split() if port_file.is_file() else []
                if not lines:
                    return None
                try:
                    targets = requests.get(f"http://127.0.0.1:{lines[0]}/json/list", timeout=5).json()
                except requests.RequestException:
                    return None
                pages = [t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page"]
                return pages[0] if pages else None

            url = wait_until(endpoint, timeout_s=timeout_s, what="Chromium's DevTools endpoint")
            # no Origin header: Chromium refuses websocket clients with an unlisted origin
            connection = websocket.create_connection(url, timeout=timeout_s, suppress_origin=True)
            page = DevToolsPage(connection)
            page.call("Page.enable")
            page.call("Emulation.setFocusEmulationEnabled", enabled=True)  # focus as in a visible window
            yield page
        finally:
            if connection is not None:
                connection.close()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
