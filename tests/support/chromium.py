"""Open a dashboard page in headless Chromium (Debian's ``chromium``) and check what rendered.

:func:`check_rendered` loads the page, saves a screenshot and reports per figure whether plotly
drew it (:func:`rendered_figures` on the dumped DOM); :func:`screenshot_ink_fraction` tells a
blank screenshot apart (decoded with Pillow).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterable
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from helpers.errors import DashboardError

__all__ = ["check_rendered", "find_chromium", "rendered_figures", "screenshot_ink_fraction"]

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
            "--headless",
            "--no-sandbox",  # required as root; the page is our own local file
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
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=127.0.0.1:9",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--virtual-time-budget=5000",
            f"--screenshot={shot}",
            "--dump-dom",
            page.as_uri(),
        ]
        env = {**os.environ, "HOME": profile, "XDG_CONFIG_HOME": profile, "XDG_CACHE_HOME": profile}
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
