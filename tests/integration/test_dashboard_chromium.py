"""The dashboard in a real headless Chromium (Debian package), and pipeline health on real Silver
tables written from the running pipeline (real servers, Debezium, Hudi)."""

from __future__ import annotations

import re
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from support.chromium import check_rendered, screenshot_ink_fraction
from support.pipeline import Capture

from helpers.dashboard.datasets import pipeline_health
from helpers.dashboard.figures import FIGURE_IDS, dashboard_figures
from helpers.dashboard.page import write_dashboard

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _datasets() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(11)
    n = 30
    customers = pd.DataFrame(
        {
            "customer_id": np.arange(1, n + 1),
            "customer_name": [f"customer {i}" for i in range(1, n + 1)],
            "order_count": rng.integers(1, 8, n),
            "avg_quantity": rng.uniform(1, 10, n),
            "avg_revenue": rng.uniform(10, 900, n),
        }
    )
    customers["total_revenue"] = [
        Decimal(f"{c * r:.2f}")
        for c, r in zip(customers["order_count"], customers["avg_revenue"], strict=True)
    ]
    categories = pd.DataFrame(
        {
            "catgroup": ["Shows", "Shows", "Concerts", "Sports"],
            "catname": ["Plays", "Musicals", "Pop", "NBA"],
            "tickets": [30, 40, 50, 5],
            "revenue": [Decimal("3000.00"), Decimal("4100.50"), Decimal("5200.00"), Decimal("400.00")],
        }
    )
    days = pd.DataFrame(
        {
            "sale_date": pd.date_range("2008-01-01", periods=60, freq="D").date,
            "tickets": rng.integers(0, 40, 60),
            "revenue": rng.uniform(0, 5000, 60),
        }
    )
    return {"customers": customers, "sales_by_category": categories, "sales_by_day": days}


def _health() -> pd.DataFrame:
    commits = pd.date_range("2026-01-01 10:00", periods=6, freq="min", tz="UTC")
    return pd.DataFrame(
        {
            "table": ["sale", "orders"] * 3,
            "commit_time": commits,
            "rows_changed": [1725, 200, 3, 1, 10, 5],
            "lag_s": [6.5, 11.0, 1.2, 0.8, 1.1, np.nan],
            "newest_lag_s": [6.5, 11.0, 0.9, 0.8, 1.0, np.nan],
        }
    )


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    figures = dashboard_figures(_datasets(), _health(), top_customers=8)
    return write_dashboard(figures, tmp_path_factory.mktemp("dash") / "dashboard.html", "Test dashboard")


def test_every_figure_renders_in_headless_chromium(page: Path) -> None:
    """The standalone page opened from disk: each figure (the workbook-runs panel in its empty
    state: no runs given) has an SVG with traces, and the screenshot is not blank (a good share of
    non-white pixels)."""
    shot = page.with_suffix(".png")
    started = time.monotonic()
    rendered = check_rendered(page, FIGURE_IDS, shot, timeout_s=120)
    assert rendered == {figure: True for figure in FIGURE_IDS}
    assert time.monotonic() - started < 120
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert screenshot_ink_fraction(shot) > 0.05


def test_a_figure_that_did_not_render_is_reported(page: Path, tmp_path: Path) -> None:
    """Negative controls: an empty figure div, and a figure whose plotting call never runs, are
    reported as not rendered while the others still are; a blank page gives a blank screenshot."""
    text = page.read_text()
    broken = re.sub(r'Plotly\.newPlot\(\s*"fig-sales-by-day"', "void(0", text, count=1)
    assert broken != text, "the plotting call of fig-sales-by-day was not found in the page"
    broken = broken.replace("</footer>", '</footer><div id="fig-empty" class="plotly-graph-div"></div>', 1)
    bad_page = tmp_path / "broken.html"
    bad_page.write_text(broken)
    expected = [*FIGURE_IDS, "fig-empty"]
    rendered = check_rendered(bad_page, expected, tmp_path / "broken.png")
    assert rendered == {figure: figure not in ("fig-sales-by-day", "fig-empty") for figure in expected}

    blank = tmp_path / "blank.html"
    blank.write_text('<!DOCTYPE html><html><body style="background:#fff"></body></html>')
    assert check_rendered(blank, ["fig-a"], tmp_path / "blank.png", window_size=(800, 600)) == {
        "fig-a": False
    }
    assert screenshot_ink_fraction(tmp_path / "blank.png") == 0.0


def test_pipeline_health_on_real_silver_tables(capture: Capture) -> None:
    """After ingesting the captured tables and then one source update of ``ems.category`` (a row of
    the test's own): every commit's rows equal its commit metadata, every lag is non-negative and
    not longer than the session, and the update's commit shows one updated row whose lag is at
    most the time between the source commit and the end of the ingestion."""
    from helpers.checks.parity import bronze_vs_source
    from helpers.hudi.timeline import completed_instants, read_commit_metadata
    from helpers.silver.ingest import ingest_all
    from helpers.silver.tables import table_config

    params = capture.stack.params
    specs = list(capture.specs.values())
    with capture.stack.connect_postgres("ems") as conn:  # a category of the test's own, updated below
        fetched = conn.execute("SELECT max(catid) + 1 FROM ems.category").fetchone()
        assert fetched is not None
        probe_key = int(fetched[0])
        conn.execute(
            "INSERT INTO ems.category (catid, catgroup, catname, catdesc) VALUES (%s, 'Probe', 'probe', 'd')",
            (probe_key,),
        )
        conn.commit()
    assert bronze_vs_source(params, specs, wait_s=60)["equal"].all()
    ingest_all(params)
    before_update = pd.Timestamp.now(tz="UTC")
    with capture.stack.connect_postgres("ems") as conn:
        conn.execute("UPDATE ems.category SET catdesc = 'dashboard lag probe' WHERE catid = %s", (probe_key,))
        conn.commit()
    assert bronze_vs_source(params, [capture.specs["ems"]], wait_s=60)["equal"].all()
    result = ingest_all(params, ["category"]).iloc[0]
    after_ingest = pd.Timestamp.now(tz="UTC")
    assert result["instant"] is not None and result["updates"] == 1

    started = time.monotonic()
    health = pipeline_health(params, last_commits=50)
    elapsed = time.monotonic() - started
    assert set(health["table"]) == {t.name for t in params.silver.tables}
    for table in params.silver.tables:
        base = table_config(params, table).base_path
        instants = completed_instants(base)[-50:]
        rows = health[health["table"] == table.name]
        assert list(rows["instant"]) == [i.timestamp for i in instants], table.name
        for instant, row in zip(instants, rows.itertuples(), strict=True):
            stats = [
                s for v in read_commit_metadata(base, instant)["partitionToWriteStats"].values() for s in v
            ]
            assert row.inserts == sum(s["numInserts"] for s in stats)
            assert row.updates == sum(s["numUpdateWrites"] for s in stats)
            assert row.deletes == sum(s["numDeletes"] for s in stats)
            assert row.rows_changed == row.inserts + row.updates + row.deletes
            assert row.records_written == sum(s["numWrites"] for s in stats)
    lags = health.dropna(subset=["lag_s"])
    assert len(lags) >= len(params.silver.tables)  # every table's first commit has records
    assert (lags["newest_lag_s"] >= 0).all() and (lags["newest_lag_s"] <= lags["lag_s"]).all()
    assert (lags["lag_s"] <= lags["oldest_lag_s"]).all()
    session_s = (after_ingest - lags["source_time_min"].min()).total_seconds()
    assert (lags["oldest_lag_s"] <= session_s).all(), lags
    probe = health[health["instant"] == result["instant"]].iloc[0]
    assert (probe["table"], probe["updates"], probe["records_read"]) == ("category", 1, 1)
    assert before_update - pd.Timedelta(seconds=1) <= probe["source_time_max"] <= after_ingest
    assert 0 <= probe["lag_s"] <= (after_ingest - before_update).total_seconds() + 1
    print(f"pipeline_health took {elapsed:.1f} s")  # a figure, not a target: benchmarks hold those


def test_pipeline_health_rows_and_lags_are_exact(tmp_path: Path, spark: Any) -> None:
    """A table written by the official writer with known source times: three upserts and one delete.
    Expected: rows per commit as written (3, 2 = 1 insert + 1 update, 1, then 1 delete); lags
    equal to the instant time minus the median / newest / oldest source time of each commit's
    records; the delete-only commit has no lag; ``last_commits`` keeps the latest commits."""
    from helpers.hudi import write_hudi
    from helpers.hudi.timeline import completed_instants
    from helpers.instants import instant_to_datetime
    from helpers.params import load_params

    params = load_params("ci", {"lake.silver": str(tmp_path)})
    path = str(tmp_path / "category")
    options = {
        "hoodie.table.name": "category",
        "hoodie.datasource.write.recordkey.field": "catid",
        "hoodie.datasource.write.precombine.field": "__lsn",
        "hoodie.datasource.write.operation": "upsert",
    }
    now = int(time.time() * 1000)
    batches = [
        ([1, 2, 3], [now - 9000, now - 5000, now - 4000]),
        ([3, 4], [now - 3000, now - 1000]),
        ([5], [now - 500]),
    ]
    schema = "catid int, catname string, __lsn long, __source_ts_ms long"
    for lsn, (keys, source_ms) in enumerate(batches):
        rows = [(k, "x", lsn, ms) for k, ms in zip(keys, source_ms, strict=True)]
        write_hudi(spark.createDataFrame(rows, schema), options, path)
    delete = spark.createDataFrame([(1, "x", 9, now)], schema)
    write_hudi(delete, {**options, "hoodie.datasource.write.operation": "delete"}, path)

    health = pipeline_health(params, last_commits=10, tables=["category"])
    instants = [i.timestamp for i in completed_instants(path)]
    assert list(health["instant"]) == instants and len(instants) == 4
    assert list(health["rows_changed"]) == [3, 2, 1, 1]
    assert list(zip(health["inserts"], health["updates"], health["deletes"], strict=True)) == [
        (3, 0, 0),
        (1, 1, 0),
        (1, 0, 0),
        (0, 0, 1),
    ]
    assert list(health["records_read"]) == [3, 2, 1, 0]
    for row, instant, (_, source_ms) in zip(health.itertuples(), instants, batches, strict=False):
        commit_ms = instant_to_datetime(instant).timestamp() * 1000
        assert row.lag_s == pytest.approx((commit_ms - float(np.median(source_ms))) / 1000)
        assert row.newest_lag_s == pytest.approx((commit_ms - max(source_ms)) / 1000)
        assert row.oldest_lag_s == pytest.approx((commit_ms - min(source_ms)) / 1000)
        assert row.source_time_max == pd.Timestamp(max(source_ms), unit="ms", tz="UTC")
    assert np.isnan(health["lag_s"].iloc[3])
    latest = pipeline_health(params, last_commits=2, tables=["category"])
    assert list(latest["instant"]) == instants[-2:]
    assert latest["lag_s"].iloc[0] == pytest.approx(health["lag_s"].iloc[2])
