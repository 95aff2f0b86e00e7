"""The standalone HTML dashboard: every figure in one page, plotly.js inlined (no server, no network)."""

from __future__ import annotations

import datetime as dt
import html
import os
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path

import plotly.graph_objects as go
import plotly.io as pio

from helpers.errors import DashboardError

__all__ = ["write_dashboard"]

_DIV_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em 2em; color: #222; background: #fff; }}
section {{ margin-bottom: 1.5em; }}
.figure {{ height: 480px; }}
footer {{ color: #666; font-size: 0.85em; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p>{subtitle}</p>
{sections}
<footer>Generated {generated} UTC. Standalone page: plotly.js is included, no network needed.</footer>
</body>
</html>
"""


def write_dashboard(
    figures: Mapping[str, go.Figure], path: str | os.PathLike[str], title: str, subtitle: str = ""
) -> Path:
    """Write the figures into one standalone HTML page (plotly.js inlined once), atomically.

    The page is written to a hidden temporary file in the target folder, flushed to disk and
    renamed over ``path``, so a reader sees either the previous page or the complete new one.

    Args:
        figures: Figures by div id (``[A-Za-z][A-Za-z0-9_-]*``), in page order.
        path: Target file (its folder is created if needed).
        title: Page title and heading.
        subtitle: A line under the heading (plain text).

    Returns:
        The path written.

    Raises:
        DashboardError: when there is no figure or a key is not a valid div id.
    """
    if not figures:
        raise DashboardError(f"Failed to write dashboard {path}: no figures")
    bad = [key for key in figures if not _DIV_ID.match(key)]
    if bad:
        raise DashboardError(
            f"Failed to write dashboard {path}: invalid div id(s) {bad}; use letters, digits, '-' and '_'"
        )
    sections = []
    for index, (key, fig) in enumerate(figures.items()):
        div = pio.to_html(
            fig,
            include_plotlyjs=index == 0,
            full_html=False,
            div_id=key,
            default_height="100%",
            config={"displaylogo": False, "responsive": True},
        )
        sections.append(f'<section id="section-{key}"><div class="figure">{div}</div></section>')
    page = _PAGE.format(
        title=html.escape(title),
        subtitle=html.escape(subtitle),
        sections="\n".join(sections),
        generated=dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%S"),
    )
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(page)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
