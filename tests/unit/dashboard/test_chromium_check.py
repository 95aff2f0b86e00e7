"""Unit tests of the browser check's pure parts (tests/support/chromium.py): the DOM check, the
screenshot's ink fraction, and the message without Chromium (no browser started)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from support.chromium import check_rendered, find_chromium, rendered_figures, screenshot_ink_fraction

from helpers.errors import DashboardError


def _plot(div_id: str, inner: str) -> str:
    return f'<div id="{div_id}" class="plotly-graph-div js-plotly-plot">{inner}</div>'


def test_dom_check_needs_main_svg_and_trace_inside_the_figure_div() -> None:
    good = '<div class="svg-container"><svg class="main-svg"><g class="trace bars"></g></svg></div>'
    dom = (
        "<html><body>"
        + _plot("fig-ok", good)
        + _plot("fig-no-trace", '<svg class="main-svg"><g class="traces"></g></svg>')
        + _plot("fig-empty", "")
        + '<div id="fig-not-plotted" class="plotly-graph-div">'
        + '<svg class="main-svg"><g class="trace"/></svg></div>'
        + '<svg class="main-svg"><g class="trace"></g></svg>'  # outside every figure
        + "<br><img src='x'>"
        + "</body></html>"
    )
    ids = ["fig-ok", "fig-no-trace", "fig-empty", "fig-not-plotted", "fig-absent"]
    assert rendered_figures(dom, iter(ids)) == {
        "fig-ok": True,
        "fig-no-trace": False,
        "fig-empty": False,
        "fig-not-plotted": False,
        "fig-absent": False,
    }


def test_without_chromium_the_debian_package_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        DashboardError, match="chromium / chromium-browser / google-chrome.*Debian package 'chromium'"
    ):
        find_chromium()
    page = tmp_path / "p.html"
    page.write_text("<html></html>")
    with pytest.raises(DashboardError, match="Debian package 'chromium'"):
        check_rendered(page, ["fig-a"], tmp_path / "p.png")
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L"])
def test_screenshot_ink_fraction_is_the_share_of_non_white_pixels(tmp_path: Path, mode: str) -> None:
    """A random image on a white background (opaque, so alpha plays no part): the ink fraction is
    exactly the share of pixels drawn, whatever the PNG's colour mode."""
    rng = np.random.default_rng(4)
    channels = len(mode)
    image = np.full((40, 33, channels), 255, dtype=np.uint8)
    ink = rng.random((40, 33)) < 0.3
    image[ink, : min(channels, 3)] = rng.integers(
        0, 200, size=(int(ink.sum()), min(channels, 3)), dtype=np.uint8
    )
    path = tmp_path / "shot.png"
    Image.fromarray(image[:, :, 0] if mode == "L" else image).save(path)
    with Image.open(path) as written:
        assert written.mode == mode
    assert screenshot_ink_fraction(path) == pytest.approx(ink.mean())


def test_screenshot_ink_fraction_of_a_blank_page_is_zero_and_other_files_fail(tmp_path: Path) -> None:
    blank = tmp_path / "blank.png"
    Image.new("RGB", (20, 20), (250, 250, 250)).save(blank)
    assert screenshot_ink_fraction(blank) == 0.0
    assert screenshot_ink_fraction(blank, white_threshold=251) == 1.0
    Image.new("RGB", (4, 4), (0, 0, 0)).save(tmp_path / "shot.gif")
    with pytest.raises(DashboardError, match=r"not a PNG file \(GIF\)"):
        screenshot_ink_fraction(tmp_path / "shot.gif")
    (tmp_path / "not.png").write_bytes(b"no image at all")
    with pytest.raises(DashboardError, match="not a PNG"):
        screenshot_ink_fraction(tmp_path / "not.png")
