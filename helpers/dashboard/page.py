"""Dashboards: plotly figures of the Silver zone in one standalone HTML page, checked in Chromium.

Three layers, so that the figures are testable without servers:

* **datasets** -- :func:`dashboard_datasets` runs the dashboard's SQL files through the query
  engine of :mod:`helpers.query.engines` (DuckDB locally, Athena on AWS); :func:`pipeline_health` reads
  the Hudi timelines of the Silver tables (rows per commit, source-to-Silver lag);
* **figures** -- pure builders from pandas DataFrames: :func:`revenue_share_pie`,
  :func:`quantity_vs_revenue_scatter`, :func:`sales_by_category_figure`,
  :func:`sales_by_day_figure`, :func:`pipeline_health_figures`, all assembled by
  :func:`dashboard_figures` under the ids of :data:`FIGURE_IDS`;
* **page** -- :func:`write_dashboard` writes one HTML file with plotly.js inlined (readable
  without a server or network), :func:`check_rendered` opens it in headless Chromium and reports
  per figure whether it rendered; :func:`screenshot_ink_fraction` tells a blank screenshot apart.

Column contracts of the builders (the columns of the SQL files in ``sql/``):

=========================  ==========================================================================
dataset                    columns
=========================  ==========================================================================
``customers``              ``customer_id``, ``customer_name`` (optional), ``order_count``,
                           ``avg_quantity``, ``avg_revenue``, ``total_revenue``
``sales_by_category``      ``catname``, ``catgroup`` (optional), ``tickets``, ``revenue``
``sales_by_day``           ``sale_date``, ``tickets``, ``revenue``
pipeline health            see :func:`pipeline_health`
=========================  ==========================================================================

Example:
    >>> figures = dashboard_figures(dashboard_datasets(params), pipeline_health(params))  # doctest: +SKIP
    >>> page = write_dashboard(figures, "runs/x/dashboard.html", "TICKIT dashboard")      # doctest: +SKIP
    >>> check_rendered(page, figures, "runs/x/dashboard.png")                             # doctest: +SKIP
    {'fig-revenue-share': True, ...}
"""

from __future__ import annotations

import datetime as dt
import html
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import zlib
from collections.abc import Iterable, Mapping, Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pandas as pd

from helpers.errors import DashboardError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from plotly.graph_objects import Figure

    from helpers.hudi.timeline import Instant
    from helpers.params import WorkbookParams

__all__ = [
    "DATASET_QUERIES",
    "FIGURE_IDS",
    "HEALTH_COLUMNS",
    "QueryEngineLike",
    "check_rendered",
    "dashboard_datasets",
    "dashboard_figures",
    "find_chromium",
    "pipeline_health",
    "pipeline_health_figures",
    "quantity_vs_revenue_scatter",
    "revenue_share_pie",
    "sales_by_category_figure",
    "sales_by_day_figure",
    "screenshot_ink_fraction",
    "write_dashboard",
]

#: The dashboard's datasets and the SQL file (``sql/``, Trino dialect) each comes from.
DATASET_QUERIES: dict[str, str] = {
    "customers": "order_revenue_by_customer.sql",
    "sales_by_category": "sales_by_category.sql",
    "sales_by_day": "sales_by_day.sql",
}

#: The div ids of the figures :func:`dashboard_figures` returns, in page order.
FIGURE_IDS: tuple[str, ...] = (
    "fig-revenue-share",
    "fig-quantity-vs-revenue",
    "fig-sales-by-category",
    "fig-sales-by-day",
    "fig-pipeline-lag",
    "fig-pipeline-rows",
)

#: Columns of :func:`pipeline_health`.
HEALTH_COLUMNS: tuple[str, ...] = (
    "table",
    "instant",
    "commit_time",
    "operation",
    "inserts",
    "updates",
    "deletes",
    "rows_changed",
    "records_written",
    "records_read",
    "source_time_min",
    "source_time_max",
    "lag_s",
    "newest_lag_s",
    "oldest_lag_s",
)

_DIV_ID = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


class QueryEngineLike(Protocol):
    """What :func:`dashboard_datasets` needs from :func:`helpers.query.engines.open_engine`'s engine."""

    def query(self, sql: str, parameters: Sequence[Any] = ()) -> pd.DataFrame:
        """Run a SQL text or a file of ``sql/`` and return the rows."""
        ...  # pragma: no cover - protocol


# --------------------------------------------------------------------------------------------
# Datasets


def dashboard_datasets(
    params: WorkbookParams, engine: QueryEngineLike | None = None
) -> dict[str, pd.DataFrame]:
    """Run the dashboard's SQL files (:data:`DATASET_QUERIES`) through the workbook's query engine.

    Args:
        params: Workbook parameters (which engine: DuckDB over the local Silver tables, or Athena).
        engine: An engine already open (anything with ``query(sql_file_name)``; left open);
            default: one opened with :func:`helpers.query.engines.open_engine` and closed again.

    Returns:
        One DataFrame per dataset name of :data:`DATASET_QUERIES`.

    Raises:
        DashboardError: naming the dataset and its SQL file, when a query fails.
    """
    if engine is None:
        from helpers.query.engines import open_engine

        with open_engine(params) as opened:
            return dashboard_datasets(params, opened)
    out: dict[str, pd.DataFrame] = {}
    for name, sql_file in DATASET_QUERIES.items():
        try:
            out[name] = engine.query(sql_file)
        except Exception as exc:  # noqa: BLE001 - re-raised with the dataset named
            raise DashboardError(f"Failed to query dataset {name!r} ({sql_file}): {exc}") from exc
    return out


def _instant_time(instant: str) -> pd.Timestamp:
    from helpers.instants import instant_to_datetime

    return pd.Timestamp(instant_to_datetime(instant))


def _commit_health(
    table: str, base_path: str, previous: str, instant: Instant, has_source_time: bool
) -> dict[str, Any]:
    from helpers.hudi.read import EARLIEST_INSTANT, read_incremental
    from helpers.hudi.timeline import read_commit_metadata, write_stats

    meta = read_commit_metadata(base_path, instant)
    counts = {"numInserts": 0, "numUpdateWrites": 0, "numDeletes": 0, "numWrites": 0}
    for stat in write_stats(meta):
        for key in counts:
            counts[key] += int(stat.get(key) or 0)
    commit_time = _instant_time(instant.timestamp)
    row: dict[str, Any] = {
        "table": table,
        "instant": instant.timestamp,
        "commit_time": commit_time,
        "operation": meta.get("operationType"),
        "inserts": counts["numInserts"],
        "updates": counts["numUpdateWrites"],
        "deletes": counts["numDeletes"],
        "rows_changed": counts["numInserts"] + counts["numUpdateWrites"] + counts["numDeletes"],
        "records_written": counts["numWrites"],
        "records_read": 0,
        "source_time_min": pd.NaT,
        "source_time_max": pd.NaT,
        "lag_s": np.nan,
        "newest_lag_s": np.nan,
        "oldest_lag_s": np.nan,
    }
    if not has_source_time:
        return row
    written = read_incremental(
        base_path, previous or EARLIEST_INSTANT, instant.timestamp, columns=["__source_ts_ms"]
    )
    source_ms = written.column("__source_ts_ms").drop_null().to_numpy()
    row["records_read"] = written.num_rows
    if len(source_ms):
        commit_ms = commit_time.value // 1_000_000
        row["source_time_min"] = pd.Timestamp(int(source_ms.min()), unit="ms", tz="UTC")
        row["source_time_max"] = pd.Timestamp(int(source_ms.max()), unit="ms", tz="UTC")
        row["lag_s"] = (commit_ms - float(np.median(source_ms))) / 1000.0
        row["newest_lag_s"] = (commit_ms - int(source_ms.max())) / 1000.0
        row["oldest_lag_s"] = (commit_ms - int(source_ms.min())) / 1000.0
    return row


def pipeline_health(
    params: WorkbookParams, last_commits: int = 20, tables: Sequence[str] | None = None
) -> pd.DataFrame:
    """Per Silver table and commit: rows per commit and the lag from source commit to Silver.

    Rows per commit come from the commit metadata (``partitionToWriteStats``): ``inserts``,
    ``updates`` (``numUpdateWrites``), ``deletes``, their sum ``rows_changed``, and
    ``records_written`` (``numWrites``: every record in the files the commit wrote, which for
    Copy-on-Write includes unchanged records copied into the new file version).

    The lag compares the commit's instant time (``_hoodie_commit_time``) with the source commit
    times (``__source_ts_ms``) of the records the commit wrote, read with an incremental query
    ``(previous commit, commit]`` through the official reader: ``lag_s`` is the **median**
    record's lag, ``newest_lag_s`` the newest record's (commit time minus the maximum source time,
    the freshness at commit), ``oldest_lag_s`` the oldest record's; ``records_read`` counts those
    records. The increment is read as of the commit, so records a later commit rewrote still
    count. Commits with no readable record (deletes only, compaction, file versions the cleaner
    already removed) have no lag (NaN). Snapshot records carry the snapshot's time as source time.
    Cost: about 1 s for 20 commits and 4 s for 200 commits of a 5,000-row table (one incremental
    read each), hence ``last_commits``.

    Args:
        params: Workbook parameters (``silver.tables``, ``lake.silver``).
        last_commits: Only the latest this many completed commits per table (one incremental
            read each), so tables with hundreds of commits stay quick.
        tables: Silver table names to include (default: all configured).

    Returns:
        One row per table and commit with the columns of :data:`HEALTH_COLUMNS`, oldest commit
        first per table; tables without a completed commit have no row.

    Raises:
        DashboardError: when ``last_commits`` is not positive or a table name is unknown.
        HudiError: naming the table path, when its timeline or data cannot be read.
    """
    from helpers.hudi.read import open_table, table_arrow_schema
    from helpers.hudi.timeline import completed_instants
    from helpers.silver.tables import table_config

    if last_commits < 1:
        raise DashboardError(f"Failed to compute pipeline health: last_commits={last_commits} must be >= 1")
    known = [t.name for t in params.silver.tables]
    unknown = sorted(set(tables or ()) - set(known))
    if unknown:
        raise DashboardError(f"Failed to compute pipeline health: unknown table(s) {unknown}; known: {known}")
    rows: list[dict[str, Any]] = []
    for table in params.silver.tables:
        if tables is not None and table.name not in tables:
            continue
        base_path = table_config(params, table).base_path
        instants = completed_instants(base_path)
        if not instants:
            continue
        has_source_time = "__source_ts_ms" in table_arrow_schema(open_table(base_path)).names
        start = max(0, len(instants) - last_commits)
        for index in range(start, len(instants)):
            previous = instants[index - 1].timestamp if index > 0 else ""
            rows.append(_commit_health(table.name, base_path, previous, instants[index], has_source_time))
    frame = pd.DataFrame(rows, columns=list(HEALTH_COLUMNS))
    for column in ("source_time_min", "source_time_max"):
        frame[column] = pd.to_datetime(frame[column], utc=True)
    return frame


# --------------------------------------------------------------------------------------------
# Figures (pure)


def _require(df: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DashboardError(
            f"Failed to build the {what} figure: missing column(s) {missing}; "
            f"the frame has {list(df.columns)}"
        )


def _floats(series: pd.Series) -> np.ndarray:
    """Numbers (exact decimals too) as float64."""
    return np.asarray(pd.to_numeric(series.astype(object).map(float)), dtype=np.float64)


def _customer_labels(df: pd.DataFrame) -> list[str]:
    ids = [str(v) for v in df["customer_id"]]
    if "customer_name" in df.columns:
        return [f"{name} (#{cid})" for name, cid in zip(df["customer_name"], ids, strict=True)]
    return [f"customer #{cid}" for cid in ids]


def revenue_share_pie(customers: pd.DataFrame, top_n: int = 10) -> Figure:
    """Share of total revenue of the top customers, the rest as one slice.

    Args:
        customers: One row per customer: ``customer_id``, ``total_revenue`` (decimals allowed),
            ``customer_name`` optional (labels read ``name (#id)``, else ``customer #id``).
        top_n: How many customers get their own slice (highest revenue first, ties by id); the
            others are summed into one slice ``other customers (k)`` when there are any.

    Returns:
        A figure with one pie trace; slice values are revenues, in the order described.

    Raises:
        DashboardError: when a column is missing or ``top_n`` is not positive.

    Example:
        >>> df = pd.DataFrame({"customer_id": [1, 2, 3], "total_revenue": [50.0, 30.0, 20.0]})
        >>> list(revenue_share_pie(df, top_n=2).data[0].labels)
        ['customer #1', 'customer #2', 'other customers (1)']
    """
    import plotly.graph_objects as go

    _require(customers, ("customer_id", "total_revenue"), "revenue share")
    if top_n < 1:
        raise DashboardError(f"Failed to build the revenue share figure: top_n={top_n} must be >= 1")
    ranked = customers.assign(_revenue=_floats(customers["total_revenue"]))
    ranked = ranked.sort_values(["_revenue", "customer_id"], ascending=[False, True], kind="stable")
    top, rest = ranked.iloc[:top_n], ranked.iloc[top_n:]
    labels = _customer_labels(top)
    values = [float(v) for v in top["_revenue"]]
    if len(rest):
        labels.append(f"other customers ({len(rest)})")
        values.append(float(rest["_revenue"].sum()))
    fig = go.Figure(
        go.Pie(
            labels=labels,
            values=values,
            sort=False,
            direction="clockwise",
            textinfo="percent",
            hovertemplate="%{label}<br>revenue %{value:,.2f}<br>%{percent}<extra></extra>",
        )
    )
    fig.update_layout(title=f"Revenue share of the top {len(top)} customers", legend_title_text="customer")
    return fig


def quantity_vs_revenue_scatter(customers: pd.DataFrame) -> Figure:
    """Average quantity against average revenue per order, one marker per customer.

    Args:
        customers: One row per customer: ``customer_id``, ``order_count``, ``avg_quantity``,
            ``avg_revenue``, ``total_revenue``; ``customer_name`` optional.

    Returns:
        A figure with one scatter trace: x = average quantity, y = average revenue, marker area
        proportional to the order count; ``customdata`` holds ``[customer_id, order_count,
        total_revenue]`` per marker (shown on hover).

    Raises:
        DashboardError: when a column is missing.
    """
    import plotly.graph_objects as go

    columns = ("customer_id", "order_count", "avg_quantity", "avg_revenue", "total_revenue")
    _require(customers, columns, "quantity vs revenue")
    orders = _floats(customers["order_count"])
    largest = float(orders.max()) if len(orders) else 1.0
    custom = np.column_stack(
        [_floats(customers["customer_id"]), orders, _floats(customers["total_revenue"])]
    ).reshape(len(customers), 3)
    fig = go.Figure(
        go.Scatter(
            x=_floats(customers["avg_quantity"]),
            y=_floats(customers["avg_revenue"]),
            mode="markers",
            text=_customer_labels(customers),
            customdata=custom,
            marker={
                "size": orders,
                "sizemode": "area",
                "sizeref": 2.0 * max(largest, 1.0) / (36.0**2),
                "sizemin": 4,
                "opacity": 0.7,
            },
            hovertemplate=(
                "%{text}<br>avg quantity %{x:.2f}<br>avg revenue %{y:,.2f}"
                "<br>orders %{customdata[1]:.0f}<br>total revenue %{customdata[2]:,.2f}<extra></extra>"
            ),
            name="customers",
        )
    )
    fig.update_layout(
        title="Average quantity vs average revenue per order (marker size: orders)",
        xaxis_title="average quantity per order",
        yaxis_title="average revenue per order",
    )
    return fig


def sales_by_category_figure(sales: pd.DataFrame) -> Figure:
    """TICKIT revenue per category as bars, highest first.

    Args:
        sales: One row per category: ``catname``, ``tickets``, ``revenue``; ``catgroup`` optional
            (bars coloured by group, one trace per group).

    Returns:
        A bar figure: x = category name, y = revenue; tickets on hover.

    Raises:
        DashboardError: when a column is missing.
    """
    import plotly.graph_objects as go

    _require(sales, ("catname", "tickets", "revenue"), "sales by category")
    ranked = sales.assign(_revenue=_floats(sales["revenue"]), _tickets=_floats(sales["tickets"]))
    ranked = ranked.sort_values(["_revenue", "catname"], ascending=[False, True], kind="stable")
    groups = list(dict.fromkeys(ranked["catgroup"])) if "catgroup" in ranked.columns else [None]
    fig = go.Figure()
    for group in groups:
        part = ranked if group is None else ranked[ranked["catgroup"] == group]
        fig.add_trace(
            go.Bar(
                x=[str(c) for c in part["catname"]],
                y=part["_revenue"].to_numpy(),
                customdata=part["_tickets"].to_numpy(),
                name=str(group) if group is not None else "revenue",
                hovertemplate="%{x}<br>revenue %{y:,.2f}<br>tickets %{customdata:,.0f}<extra></extra>",
            )
        )
    fig.update_layout(
        title="TICKIT sales by category",
        xaxis={"title": "category", "categoryorder": "array", "categoryarray": list(ranked["catname"])},
        yaxis_title="revenue",
        legend_title_text="category group",
    )
    return fig


def sales_by_day_figure(sales: pd.DataFrame) -> Figure:
    """TICKIT revenue and tickets per day.

    Args:
        sales: One row per day: ``sale_date``, ``tickets``, ``revenue``.

    Returns:
        A figure with two traces, oldest day first: revenue (line, left axis) and tickets sold
        (bars, right axis).

    Raises:
        DashboardError: when a column is missing.
    """
    import plotly.graph_objects as go

    _require(sales, ("sale_date", "tickets", "revenue"), "sales by day")
    days = sales.assign(_day=pd.to_datetime(sales["sale_date"])).sort_values("_day", kind="stable")
    x = days["_day"].dt.strftime("%Y-%m-%d").tolist()
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=x, y=_floats(days["tickets"]), name="tickets", yaxis="y2", opacity=0.35, marker_color="#636efa"
        )
    )
    fig.add_trace(
        go.Scatter(x=x, y=_floats(days["revenue"]), name="revenue", mode="lines", line_color="#ef553b")
    )
    fig.update_layout(
        title="TICKIT sales by day",
        xaxis={"title": "sale date (UTC)", "type": "date"},
        yaxis={"title": "revenue"},
        yaxis2={"title": "tickets", "overlaying": "y", "side": "right", "showgrid": False},
        legend={"orientation": "h", "y": 1.08},
    )
    return fig


def pipeline_health_figures(health: pd.DataFrame) -> dict[str, Figure]:
    """The pipeline-health figures from :func:`pipeline_health`'s frame.

    Args:
        health: Columns ``table``, ``commit_time``, ``lag_s``, ``newest_lag_s``,
            ``rows_changed`` (at least).

    Returns:
        ``{"fig-pipeline-lag": ..., "fig-pipeline-rows": ...}``: per table one trace over its
        commits, the median source-to-Silver lag in seconds (commits without a lag left out) and
        the rows changed per commit (log axis).

    Raises:
        DashboardError: when a column is missing.
    """
    import plotly.graph_objects as go

    _require(health, ("table", "commit_time", "lag_s", "newest_lag_s", "rows_changed"), "pipeline health")
    lag, rows = go.Figure(), go.Figure()
    for table, part in health.sort_values("commit_time", kind="stable").groupby("table", sort=False):
        times = pd.to_datetime(part["commit_time"], utc=True).dt.strftime("%Y-%m-%d %H:%M:%S.%f").str[:-3]
        timed = part.assign(_t=times.to_numpy())
        with_lag = timed[timed["lag_s"].notna()]
        lag.add_trace(
            go.Scatter(
                x=with_lag["_t"].tolist(),
                y=with_lag["lag_s"].to_numpy(dtype=float),
                customdata=with_lag["newest_lag_s"].to_numpy(dtype=float),
                mode="lines+markers",
                name=str(table),
                hovertemplate=f"{table}<br>%{{x}}<br>median lag %{{y:.2f}} s"
                "<br>newest record %{customdata:.2f} s<extra></extra>",
            )
        )
        rows.add_trace(
            go.Scatter(
                x=timed["_t"].tolist(),
                y=timed["rows_changed"].to_numpy(dtype=float),
                mode="lines+markers",
                name=str(table),
                hovertemplate=f"{table}<br>%{{x}}<br>%{{y:,.0f}} rows<extra></extra>",
            )
        )
    lag.update_layout(
        title="Pipeline health: source commit to Silver commit lag (median record, seconds)",
        xaxis={"title": "Silver commit (UTC)", "type": "date"},
        yaxis_title="lag (s)",
        legend_title_text="table",
    )
    rows.update_layout(
        title="Pipeline health: rows changed per Silver commit (inserts + updates + deletes)",
        xaxis={"title": "Silver commit (UTC)", "type": "date"},
        yaxis={"title": "rows", "type": "log"},
        legend_title_text="table",
    )
    return {"fig-pipeline-lag": lag, "fig-pipeline-rows": rows}


def dashboard_figures(
    datasets: Mapping[str, pd.DataFrame], health: pd.DataFrame, top_customers: int = 10
) -> dict[str, Figure]:
    """Every figure of the dashboard, keyed by the div ids of :data:`FIGURE_IDS`, in page order.

    Args:
        datasets: :func:`dashboard_datasets`'s frames (``customers``, ``sales_by_category``,
            ``sales_by_day``).
        health: :func:`pipeline_health`'s frame.
        top_customers: Customers with their own slice in the revenue share pie.

    Returns:
        Figures by div id.

    Raises:
        DashboardError: when a dataset or a column is missing.
    """
    missing = [name for name in DATASET_QUERIES if name not in datasets]
    if missing:
        raise DashboardError(f"Failed to build the dashboard: dataset(s) {missing} missing")
    figures = {
        "fig-revenue-share": revenue_share_pie(datasets["customers"], top_customers),
        "fig-quantity-vs-revenue": quantity_vs_revenue_scatter(datasets["customers"]),
        "fig-sales-by-category": sales_by_category_figure(datasets["sales_by_category"]),
        "fig-sales-by-day": sales_by_day_figure(datasets["sales_by_day"]),
        **pipeline_health_figures(health),
    }
    return {key: figures[key] for key in FIGURE_IDS}


# --------------------------------------------------------------------------------------------
# Page


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
    figures: Mapping[str, Figure], path: str | os.PathLike[str], title: str, subtitle: str = ""
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
    import plotly.io as pio

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


def _rendered_figures(dom: str, expected_ids: Sequence[str]) -> dict[str, bool]:
    scanner = _PlotScanner(expected_ids)
    scanner.feed(dom)
    scanner.close()
    return {
        ident: bool(
            (counts := scanner.found.get(ident)) is not None
            and counts["main_svg"] > 0
            and counts["trace"] > 0
        )
        for ident in expected_ids
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
        expected_ids: Div ids of the figures that must render (e.g. :data:`FIGURE_IDS`).
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
    return _rendered_figures(out.decode("utf-8", errors="replace"), ids)


def _png_pixels(path: Path) -> np.ndarray:
    """Decode an 8-bit, non-interlaced PNG into a ``height x width x channels`` uint8 array."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise DashboardError(f"Failed to read screenshot {path}: not a PNG file")
    pos, header, chunks = 8, b"", []
    while pos + 8 <= len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise DashboardError(
            f"Failed to read screenshot {path}: only 8-bit grey/RGB(A) non-interlaced PNG is supported "
            f"(bit depth {depth}, colour type {color}, interlace {interlace})"
        )
    stride = width * channels
    raw = np.frombuffer(zlib.decompress(b"".join(chunks)), dtype=np.uint8).reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.uint8)
    previous = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind_byte, line = int(raw[y, 0]), raw[y, 1:]
        if kind_byte == 0:
            row = line.copy()
        elif kind_byte == 1:  # Sub: running sum per channel, modulo 256
            row = np.cumsum(line.reshape(width, channels), axis=0, dtype=np.uint8).reshape(stride)
        elif kind_byte == 2:  # Up
            row = line + previous
        else:  # Average (3) and Paeth (4) depend on the decoded left neighbour: byte by byte
            row = _unfilter_sequential(kind_byte, line.tobytes(), previous.tobytes(), channels)
        out[y] = row
        previous = out[y]
    return out.reshape(height, width, channels)


def _unfilter_sequential(kind: int, line: bytes, up: bytes, bpp: int) -> np.ndarray:
    """Undo the Average (3) or Paeth (4) filter of one row (about 0.4 us per byte)."""
    if kind not in (3, 4):
        raise DashboardError(f"Failed to read screenshot: unknown PNG filter type {kind}")
    row = bytearray(len(line))
    for i, value in enumerate(line):
        left = row[i - bpp] if i >= bpp else 0
        above = up[i]
        if kind == 3:
            predicted = (left + above) >> 1
        else:
            corner = up[i - bpp] if i >= bpp else 0
            pa, pb, pc = abs(above - corner), abs(left - corner), abs(left + above - 2 * corner)
            predicted = left if pa <= pb and pa <= pc else (above if pb <= pc else corner)
        row[i] = (value + predicted) & 0xFF
    return np.frombuffer(bytes(row), dtype=np.uint8)


def screenshot_ink_fraction(png_path: str | os.PathLike[str], white_threshold: int = 245) -> float:
    """Fraction of a screenshot's pixels that are not (near) white: 0.0 for a blank page.

    Decodes the PNG with ``zlib`` and numpy (8-bit grey or RGB(A), as Chromium writes them), so no
    imaging library is needed.

    Args:
        png_path: The PNG file.
        white_threshold: A pixel counts as ink when any colour channel is below this value.

    Returns:
        Ink pixels / all pixels.

    Raises:
        DashboardError: when the file is not a PNG this decoder supports.
    """
    pixels = _png_pixels(Path(png_path))
    colour = pixels[:, :, :3] if pixels.shape[2] >= 3 else pixels[:, :, :1]
    ink = (colour < white_threshold).any(axis=2)
    return float(ink.mean()) if ink.size else 0.0
