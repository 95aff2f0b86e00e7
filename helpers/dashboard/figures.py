"""Plotly figures of the dashboard, built from pandas DataFrames (pure: no I/O).

The column contracts of the frames are those of :mod:`helpers.dashboard.datasets` and
:mod:`helpers.dashboard.runs`; :func:`dashboard_figures` assembles every figure under the div ids
of :data:`FIGURE_IDS`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from helpers.dashboard.datasets import DATASET_QUERIES
from helpers.dashboard.runs import RUN_COLUMNS
from helpers.errors import DashboardError

__all__ = [
    "FIGURE_IDS",
    "dashboard_figures",
    "pipeline_health_figures",
    "quantity_vs_revenue_scatter",
    "revenue_share_pie",
    "sales_by_category_figure",
    "sales_by_day_figure",
    "workbook_runs_figure",
]

#: The div ids of the figures :func:`dashboard_figures` returns, in page order.
FIGURE_IDS: tuple[str, ...] = (
    "fig-revenue-share",
    "fig-quantity-vs-revenue",
    "fig-sales-by-category",
    "fig-sales-by-day",
    "fig-pipeline-lag",
    "fig-pipeline-rows",
    "fig-workbook-runs",
)


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


def revenue_share_pie(customers: pd.DataFrame, top_n: int = 10) -> go.Figure:
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


def quantity_vs_revenue_scatter(customers: pd.DataFrame) -> go.Figure:
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


def sales_by_category_figure(sales: pd.DataFrame) -> go.Figure:
    """TICKIT revenue per category as bars, highest first.

    Args:
        sales: One row per category: ``catname``, ``tickets``, ``revenue``; ``catgroup`` optional
            (bars coloured by group, one trace per group).

    Returns:
        A bar figure: x = category name, y = revenue; tickets on hover.

    Raises:
        DashboardError: when a column is missing.
    """
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


def sales_by_day_figure(sales: pd.DataFrame) -> go.Figure:
    """TICKIT revenue and tickets per day.

    Args:
        sales: One row per day: ``sale_date``, ``tickets``, ``revenue``.

    Returns:
        A figure with two traces, oldest day first: revenue (line, left axis) and tickets sold
        (bars, right axis).

    Raises:
        DashboardError: when a column is missing.
    """
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


def pipeline_health_figures(health: pd.DataFrame) -> dict[str, go.Figure]:
    """The pipeline-health figures from :func:`~helpers.dashboard.datasets.pipeline_health`'s frame.

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


def workbook_runs_figure(runs: pd.DataFrame) -> go.Figure:
    """Seconds per notebook of the last finished workbook runs, stacked per run.

    Args:
        runs: :func:`~helpers.dashboard.runs.workbook_runs`'s frame (:data:`RUN_COLUMNS`), one row
            per notebook of a run, runs in the order to show (oldest first).

    Returns:
        One bar trace per notebook (by name, i.e. run order), x = run (tick label: start time,
        ``env``, and "failed" for a failed run), y = seconds, stacked; a failed notebook's bar is
        hatched. A text trace writes each run's total in minutes above its bar. Without any run,
        an empty-state figure: one text trace saying that no run has finished yet, no axes.

    Raises:
        DashboardError: when a column is missing.
    """
    _require(runs, RUN_COLUMNS, "workbook runs")
    fig = go.Figure()
    if runs.empty:
        fig.add_trace(
            go.Scatter(
                x=[0],
                y=[0],
                mode="text",
                text=["No finished workbook run yet: the run in progress writes its summary at the end."],
                hoverinfo="skip",
                showlegend=False,
                name="no runs",
            )
        )
        fig.update_layout(
            title="Workbook runs: seconds per notebook",
            xaxis={"visible": False},
            yaxis={"visible": False},
            plot_bgcolor="rgba(0,0,0,0)",
        )
        return fig
    order = list(dict.fromkeys(runs["run"]))
    first = runs.drop_duplicates("run").set_index("run").loc[order]
    labels = [
        f"{pd.Timestamp(started):%Y-%m-%d %H:%M} {env}" + ("" if run_ok else "<br>failed")
        for started, env, run_ok in zip(first["started"], first["env"], first["run_ok"], strict=True)
    ]
    for notebook in sorted(set(runs["notebook"])):
        part = runs[runs["notebook"] == notebook]
        ok = [bool(v) for v in part["ok"]]
        fig.add_trace(
            go.Bar(
                x=part["run"].tolist(),
                y=_floats(part["seconds"]),
                name=str(notebook),
                customdata=["ok" if v else "failed" for v in ok],
                marker={"pattern": {"shape": ["" if v else "x" for v in ok]}},
                hovertemplate=f"{notebook}<br>%{{y:,.1f}} s (%{{customdata}})<extra>%{{x}}</extra>",
            )
        )
    totals = runs.groupby("run", sort=False)["seconds"].sum().loc[order]
    fig.add_trace(
        go.Scatter(
            x=order,
            y=_floats(totals),
            mode="text",
            text=[f"{seconds / 60:.1f} min" for seconds in _floats(totals)],
            textposition="top center",
            hoverinfo="skip",
            showlegend=False,
            name="total",
        )
    )
    fig.update_layout(
        title=f"Workbook runs: seconds per notebook (last {len(order)} finished runs)",
        barmode="stack",
        xaxis={
            "title": "run (start, UTC)",
            "type": "category",
            "categoryorder": "array",
            "categoryarray": order,
            "tickvals": order,
            "ticktext": labels,
        },
        yaxis_title="seconds",
        legend_title_text="notebook",
    )
    return fig


def dashboard_figures(
    datasets: Mapping[str, pd.DataFrame],
    health: pd.DataFrame,
    top_customers: int = 10,
    runs: pd.DataFrame | None = None,
) -> dict[str, go.Figure]:
    """Every figure of the dashboard, keyed by the div ids of :data:`FIGURE_IDS`, in page order.

    Args:
        datasets: :func:`~helpers.dashboard.datasets.dashboard_datasets`'s frames
            (``customers``, ``sales_by_category``, ``sales_by_day``).
        health: :func:`~helpers.dashboard.datasets.pipeline_health`'s frame.
        top_customers: Customers with their own slice in the revenue share pie.
        runs: :func:`~helpers.dashboard.runs.workbook_runs`'s frame; None: no finished run (the
            panel shows its empty state).

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
        "fig-workbook-runs": workbook_runs_figure(
            pd.DataFrame(columns=list(RUN_COLUMNS)) if runs is None else runs
        ),
    }
    return {key: figures[key] for key in FIGURE_IDS}
