"""Unit tests of helpers.dashboard: figure builders on small frames, the standalone page, the
datasets' argument checks (no servers, no browser)."""

from __future__ import annotations

import os
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from helpers.dashboard.datasets import DATASET_QUERIES, dashboard_datasets, pipeline_health
from helpers.dashboard.figures import (
    FIGURE_IDS,
    dashboard_figures,
    pipeline_health_figures,
    quantity_vs_revenue_scatter,
    revenue_share_pie,
    sales_by_category_figure,
    sales_by_day_figure,
)
from helpers.dashboard.page import write_dashboard
from helpers.errors import DashboardError
from helpers.params import load_params


def _customers() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "customer_id": [3, 1, 2, 4],
            "customer_name": ["Cy", "Al", "Bo", "Di"],
            "order_count": [1, 4, 2, 2],
            "avg_quantity": [2.0, 3.5, 1.0, 5.0],
            "avg_revenue": [10.0, 25.0, 15.0, 15.0],
            "total_revenue": [Decimal("10.00"), Decimal("100.00"), Decimal("30.00"), Decimal("30.00")],
        }
    )


def _categories() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "catgroup": ["Shows", "Concerts", "Shows"],
            "catname": ["Plays", "Pop", "Musicals"],
            "sales": [3, 5, 4],
            "tickets": [6, 10, 9],
            "revenue": [Decimal("60.00"), Decimal("250.50"), Decimal("120.00")],
        }
    )


def _days() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "sale_date": ["2008-01-03", "2008-01-01", "2008-01-02"],
            "sales": [1, 2, 3],
            "tickets": [4, 2, 6],
            "revenue": [Decimal("40.00"), Decimal("20.00"), Decimal("60.00")],
        }
    )


def _health() -> pd.DataFrame:
    times = pd.to_datetime(["2026-01-01 10:00:00", "2026-01-01 10:01:00", "2026-01-01 10:00:30"], utc=True)
    return pd.DataFrame(
        {
            "table": ["sale", "sale", "orders"],
            "instant": ["20260101100000000", "20260101100100000", "20260101100030000"],
            "commit_time": times,
            "rows_changed": [1000, 3, 50],
            "lag_s": [5.0, np.nan, 2.5],
            "newest_lag_s": [4.0, np.nan, 2.0],
        }
    )


def test_revenue_share_pie_top_customers_and_the_rest() -> None:
    """Top 2 by revenue (ties by id: 2 before 4), labelled 'name (#id)', the other two summed."""
    pie = revenue_share_pie(_customers(), top_n=2).data
    assert len(pie) == 1 and pie[0].type == "pie"
    assert list(pie[0].labels) == ["Al (#1)", "Bo (#2)", "other customers (2)"]
    assert list(pie[0].values) == [100.0, 30.0, 40.0]
    assert pie[0].sort is False


def test_revenue_share_pie_without_names_and_without_rest() -> None:
    frame = _customers().drop(columns=["customer_name"])
    pie = revenue_share_pie(frame, top_n=10).data[0]
    assert list(pie.labels) == ["customer #1", "customer #2", "customer #4", "customer #3"]
    assert sum(pie.values) == 170.0


def test_revenue_share_pie_rejects_bad_input() -> None:
    with pytest.raises(DashboardError, match=r"missing column\(s\) \['total_revenue'\]"):
        revenue_share_pie(_customers().drop(columns=["total_revenue"]))
    with pytest.raises(DashboardError, match="top_n=0"):
        revenue_share_pie(_customers(), top_n=0)


def test_quantity_vs_revenue_scatter_values_sizes_and_customdata() -> None:
    """x = avg quantity, y = avg revenue, marker size = orders, customdata = [id, orders, total]."""
    frame = _customers()
    (trace,) = quantity_vs_revenue_scatter(frame).data
    assert trace.type == "scatter" and trace.mode == "markers"
    assert list(trace.x) == [2.0, 3.5, 1.0, 5.0]
    assert list(trace.y) == [10.0, 25.0, 15.0, 15.0]
    assert list(trace.marker.size) == [1.0, 4.0, 2.0, 2.0]
    assert trace.marker.sizemode == "area"
    assert np.asarray(trace.customdata).tolist() == [
        [3.0, 1.0, 10.0],
        [1.0, 4.0, 100.0],
        [2.0, 2.0, 30.0],
        [4.0, 2.0, 30.0],
    ]
    assert list(trace.text) == ["Cy (#3)", "Al (#1)", "Bo (#2)", "Di (#4)"]


def test_sales_by_category_one_trace_per_group_highest_revenue_first() -> None:
    fig = sales_by_category_figure(_categories())
    assert [t.name for t in fig.data] == ["Concerts", "Shows"]
    assert [list(t.x) for t in fig.data] == [["Pop"], ["Musicals", "Plays"]]
    assert [list(t.y) for t in fig.data] == [[250.5], [120.0, 60.0]]
    assert list(fig.layout.xaxis.categoryarray) == ["Pop", "Musicals", "Plays"]
    single = sales_by_category_figure(_categories().drop(columns=["catgroup"]))
    assert len(single.data) == 1 and list(single.data[0].customdata) == [10.0, 9.0, 6.0]


def test_sales_by_day_sorted_with_revenue_and_tickets() -> None:
    fig = sales_by_day_figure(_days())
    tickets, revenue = fig.data
    assert tickets.type == "bar" and tickets.yaxis == "y2" and revenue.type == "scatter"
    assert list(revenue.x) == ["2008-01-01", "2008-01-02", "2008-01-03"]
    assert list(revenue.y) == [20.0, 60.0, 40.0]
    assert list(tickets.y) == [2.0, 6.0, 4.0]
    assert fig.layout.yaxis2.overlaying == "y"


def test_pipeline_health_figures_one_trace_per_table() -> None:
    """Commits without a lag are left out of the lag figure but kept in the rows figure."""
    figs = pipeline_health_figures(_health())
    assert list(figs) == ["fig-pipeline-lag", "fig-pipeline-rows"]
    lag = {t.name: list(t.y) for t in figs["fig-pipeline-lag"].data}
    rows = {t.name: list(t.y) for t in figs["fig-pipeline-rows"].data}
    assert lag == {"sale": [5.0], "orders": [2.5]}
    assert rows == {"sale": [1000.0, 3.0], "orders": [50.0]}
    assert figs["fig-pipeline-rows"].layout.yaxis.type == "log"
    sale = next(t for t in figs["fig-pipeline-rows"].data if t.name == "sale")
    assert list(sale.x) == ["2026-01-01 10:00:00.000", "2026-01-01 10:01:00.000"]


def test_dashboard_figures_ids_in_page_order() -> None:
    datasets = {"customers": _customers(), "sales_by_category": _categories(), "sales_by_day": _days()}
    figures = dashboard_figures(datasets, _health(), top_customers=3)
    assert tuple(figures) == FIGURE_IDS
    assert all(len(f.data) > 0 for f in figures.values())
    with pytest.raises(DashboardError, match="sales_by_day"):
        dashboard_figures({k: v for k, v in datasets.items() if k != "sales_by_day"}, _health())


def _small_figures() -> dict[str, Any]:
    return {
        "fig-a": revenue_share_pie(_customers(), 2),
        "fig-b": sales_by_day_figure(_days()),
    }


def test_write_dashboard_is_one_standalone_page(tmp_path: Path) -> None:
    """plotly.js inlined exactly once, every div id present, no script from the network."""
    page = write_dashboard(_small_figures(), tmp_path / "out" / "dash.html", "A <b>title</b>", "sub")
    text = page.read_text()
    assert page == tmp_path / "out" / "dash.html"
    assert text.startswith("<!DOCTYPE html>")
    assert "<title>A &lt;b&gt;title&lt;/b&gt;</title>" in text
    assert text.count("plotly.js v") == 1
    assert len(text) > 1_000_000  # the library itself is in the page
    for div_id in ("fig-a", "fig-b"):
        assert f'id="{div_id}"' in text
    assert not re.search(r"<script[^>]+src=", text)
    assert [p.name for p in page.parent.iterdir()] == ["dash.html"]  # no temporary left


def test_write_dashboard_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that fails before the rename leaves the previous page untouched and no temp file."""
    target = tmp_path / "dash.html"
    target.write_text("previous")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        write_dashboard(_small_figures(), target, "t")
    assert target.read_text() == "previous"
    assert [p.name for p in tmp_path.iterdir()] == ["dash.html"]
    monkeypatch.undo()
    write_dashboard(_small_figures(), target, "t")
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert oct(os.stat(target).st_mode & 0o777) == oct(0o644)


def test_write_dashboard_rejects_bad_ids_and_empty(tmp_path: Path) -> None:
    with pytest.raises(DashboardError, match="no figures"):
        write_dashboard({}, tmp_path / "x.html", "t")
    with pytest.raises(DashboardError, match=r"invalid div id\(s\) \['1 bad'\]"):
        write_dashboard({"1 bad": revenue_share_pie(_customers())}, tmp_path / "x.html", "t")
    assert not (tmp_path / "x.html").exists()


def test_pipeline_health_rejects_bad_arguments() -> None:
    params = load_params("ci")
    with pytest.raises(DashboardError, match="last_commits=0"):
        pipeline_health(params, last_commits=0)
    with pytest.raises(DashboardError, match=r"unknown table\(s\) \['nope'\]"):
        pipeline_health(params, tables=["nope"])


class _FakeEngine:
    """Answers each SQL file with a one-row frame naming it; fails on ``fail``."""

    def __init__(self, fail: str = "") -> None:
        self.fail = fail
        self.asked: list[str] = []

    def query(self, sql: str, parameters: Any = ()) -> pd.DataFrame:
        self.asked.append(sql)
        if sql == self.fail:
            raise RuntimeError("table not found")
        return pd.DataFrame({"sql": [sql]})


def test_dashboard_datasets_runs_every_sql_file_through_the_engine() -> None:
    engine = _FakeEngine()
    datasets = dashboard_datasets(load_params("ci"), engine)
    assert list(datasets) == list(DATASET_QUERIES)
    assert {name: frame["sql"].iloc[0] for name, frame in datasets.items()} == DATASET_QUERIES
    assert engine.asked == list(DATASET_QUERIES.values())


def test_dashboard_datasets_names_the_dataset_that_failed() -> None:
    engine = _FakeEngine(fail=DATASET_QUERIES["sales_by_category"])
    with pytest.raises(
        DashboardError, match=r"'sales_by_category' \(sales_by_category\.sql\): table not found"
    ):
        dashboard_datasets(load_params("ci"), engine)
