"""The workbook's Athena SQL (sql/) run locally on both engines, against the same figures computed
directly in the source databases: orders and ems/crm in PostgreSQL, ecomm's sale in MariaDB
(joined in pandas where a query spans both). The engines: Trino 476 (the default), reading the
tables that Hudi's own Hive sync registered in the local Hive Metastore service, the files
unchanged; and DuckDB (opt-in) over the tables read by the official Rust reader.

Expected final state: after capture caught up and one Silver ingestion, every SQL file's result
equals the source figure on each engine; decimals are exact, averages equal within 1e-9 relative.
Trino refuses the real-time view of the Merge-on-Read table (as Athena does not serve it), and a
bad file fails with Trino's error and the file's name.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from support.hoodie_properties import properties_rewrite
from support.pipeline import Capture

from helpers.checks.compare import compare_frames
from helpers.checks.parity import bronze_vs_source, source_revenue_by_customer
from helpers.errors import QueryError
from helpers.hudi.api import read_hudi_df
from helpers.local.stack import LocalStack
from helpers.local.trino import LocalTrino
from helpers.params import WorkbookParams
from helpers.query.engines import DuckDBEngine, QueryEngine, TrinoEngine, open_engine
from helpers.silver.backend import register_catalog
from helpers.silver.ingest import ingest_all
from helpers.silver.tables import table_config

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def silver(capture: Capture) -> WorkbookParams:
    """Silver ingested from a Bronze equal to the sources, and registered in the local catalog."""
    params = capture.stack.params
    check = bronze_vs_source(params, list(capture.specs.values()), wait_s=60)
    assert check["equal"].all(), check[~check["equal"]]
    ingest_all(params)
    register_catalog(params)
    return params


@pytest.fixture(scope="module")
def on_trino(silver: WorkbookParams, spark_params: WorkbookParams) -> Iterator[WorkbookParams]:
    """``silver`` read by a Trino over the metastore service the test session's Spark session syncs
    into (in a workbook run they are one: the state's metastore)."""
    served = {"trino": spark_params.local.trino, "metastore": spark_params.local.metastore}
    local = silver.local.model_copy(update={"query_engine": "trino", **served})
    params = silver.model_copy(update={"local": local})
    server = LocalTrino(params)
    claim = server.acquire()  # one start for the module; each engine opened here joins it
    try:
        yield params
    finally:
        assert server.release(claim), "Trino still had a user after the module's engines closed"


@pytest.fixture(scope="module", params=["trino", "duckdb"])
def engine(silver: WorkbookParams, request: pytest.FixtureRequest) -> Iterator[QueryEngine]:
    """The local engines, each opened as notebook 05 opens it (``local.query_engine``)."""
    if request.param == "trino":
        params = request.getfixturevalue("on_trino")
    else:
        local = silver.local.model_copy(update={"query_engine": "duckdb"})
        params = silver.model_copy(update={"local": local})
    engine = open_engine(params, progress=False)
    assert isinstance(engine, {"trino": TrinoEngine, "duckdb": DuckDBEngine}[request.param])
    with engine:
        yield engine


def _postgres(params: WorkbookParams, database: str, query: str) -> pd.DataFrame:
    with LocalStack(params).connect_postgres(database) as conn:
        cur = conn.execute(query)
        return pd.DataFrame.from_records(cur.fetchall(), columns=[d.name for d in cur.description or []])


def _mariadb(params: WorkbookParams, query: str, args: tuple[Any, ...] = ()) -> pd.DataFrame:
    conn = LocalStack(params).connect_mariadb("ecomm")
    try:
        with conn.cursor() as cur:
            cur.execute(query, args)
            return pd.DataFrame.from_records(list(cur.fetchall()), columns=[d[0] for d in cur.description])
    finally:
        conn.close()


@pytest.fixture(scope="module")
def source_sales(silver: WorkbookParams) -> pd.DataFrame:
    """Every sale (MariaDB) with its event, category and venue (PostgreSQL ems), joined in pandas."""
    sale = _mariadb(
        silver, "SELECT salesid, sellerid, eventid, qtysold, pricepaid, commission, saletime FROM sale"
    )
    event = _postgres(silver, "ems", "SELECT eventid, eventname, catid, venueid FROM ems.event")
    category = _postgres(silver, "ems", "SELECT catid, catgroup, catname FROM ems.category")
    venue = _postgres(silver, "ems", "SELECT venueid, venuename FROM ems.venue")
    out = sale.merge(event, on="eventid").merge(category, on="catid").merge(venue, on="venueid")
    assert len(out) == len(sale) > 0
    out["sale_date"] = [t.date() for t in out["saletime"]]  # MariaDB DATETIME holds UTC
    return out


def _exact(frame: pd.DataFrame, columns: list[str]) -> list[tuple[Any, ...]]:
    return [
        tuple(int(v) if isinstance(v, int) else v for v in row)
        for row in frame[columns].itertuples(index=False)
    ]


def test_revenue_per_customer_equals_postgresql(engine: QueryEngine, silver: WorkbookParams) -> None:
    """order_revenue_by_customer.sql (outbox JSON items unnested, in Silver) equals the same figures
    computed in PostgreSQL from orders and order_items: counts and total revenue exactly."""
    local = engine.query("order_revenue_by_customer")
    source = source_revenue_by_customer(silver)
    assert len(local) == len(source) > 0
    check = compare_frames(local, source, ["customer_id"], approx=["avg_quantity", "avg_revenue"])
    assert check["equal"].all(), check
    columns = ["customer_id", "customer_name", "city", "order_count", "total_revenue"]
    assert _exact(local, columns) == _exact(source, columns)  # same order too
    assert all(isinstance(v, Decimal) for v in local["total_revenue"])
    total = _postgres(silver, "orders", "SELECT sum(quantity * unit_price) FROM orders.order_items").iloc[
        0, 0
    ]
    assert sum(local["total_revenue"]) == total


def test_sales_by_seller_prepared_for_a_seller_from_the_data(
    engine: QueryEngine, silver: WorkbookParams, source_sales: pd.DataFrame
) -> None:
    """The seller with the most revenue in MariaDB; the prepared sales_by_seller.sql executed for
    them equals their sales per event computed from the sources; top_sellers.sql agrees."""
    seller = int(
        _mariadb(
            silver,
            "SELECT sellerid FROM sale GROUP BY sellerid ORDER BY sum(pricepaid) DESC, sellerid LIMIT 1",
        ).iloc[0, 0]
    )
    top = engine.query("top_sellers")
    assert int(top["sellerid"].iloc[0]) == seller
    per_seller = source_sales.groupby("sellerid").agg(
        sales=("salesid", "size"), tickets=("qtysold", "sum"), revenue=("pricepaid", "sum")
    )
    for row in top.itertuples():
        want = per_seller.loc[row.sellerid]
        assert (row.sales, row.tickets, row.revenue) == (want.sales, want.tickets, want.revenue)

    engine.prepare("sales_by_seller", "sales_by_seller")
    got = engine.execute("sales_by_seller", [seller])
    mine = source_sales[source_sales["sellerid"] == seller]
    want = (
        mine.groupby(["eventid", "eventname"], as_index=False)
        .agg(
            sales=("salesid", "size"),
            tickets=("qtysold", "sum"),
            revenue=("pricepaid", "sum"),
            commission=("commission", "sum"),
        )
        .sort_values(["revenue", "eventid"], ascending=[False, True])
    )
    columns = ["eventid", "eventname", "sales", "tickets", "revenue", "commission"]
    assert _exact(got, columns) == _exact(want, columns)
    other = int(top["sellerid"].iloc[1])  # the same prepared statement, another value
    assert (
        engine.execute("sales_by_seller", [other])["sales"].sum() == (source_sales["sellerid"] == other).sum()
    )


def test_sales_by_day_and_category_equal_the_sources(engine: QueryEngine, source_sales: pd.DataFrame) -> None:
    """The view sales_by_day_category and the dashboard queries over it (sales_by_day.sql,
    sales_by_category.sql) equal sale (MariaDB) joined with event and category (PostgreSQL)."""
    aggregates = {
        "sales": ("salesid", "size"),
        "tickets": ("qtysold", "sum"),
        "revenue": ("pricepaid", "sum"),
    }
    keys = ["sale_date", "catgroup", "catname"]
    view = engine.query("SELECT * FROM sales_by_day_category ORDER BY sale_date, catgroup, catname")
    want = source_sales.groupby(keys, as_index=False).agg(**aggregates).sort_values(keys)
    assert _exact(view, [*keys, "sales", "tickets", "revenue"]) == _exact(
        want, [*keys, "sales", "tickets", "revenue"]
    )
    assert all(isinstance(d, dt.date) for d in view["sale_date"])

    by_day = engine.query("sales_by_day")
    want_day = source_sales.groupby("sale_date", as_index=False).agg(**aggregates).sort_values("sale_date")
    columns = ["sale_date", "sales", "tickets", "revenue"]
    assert _exact(by_day, columns) == _exact(want_day, columns)

    by_category = engine.query("sales_by_category")
    want_category = (
        source_sales.groupby(["catgroup", "catname"], as_index=False)
        .agg(**aggregates)
        .sort_values(["revenue", "catname"], ascending=[False, True])
    )
    columns = ["catgroup", "catname", "sales", "tickets", "revenue"]
    assert _exact(by_category, columns) == _exact(want_category, columns)


def test_top_events_of_a_category_group_equal_the_sources(
    engine: QueryEngine, source_sales: pd.DataFrame
) -> None:
    """top_events.sql with a category group bound as a parameter (one taken from the data)."""
    group = str(source_sales["catgroup"].iloc[0])
    got = engine.query("top_events", [group])
    want = (
        source_sales[source_sales["catgroup"] == group]
        .groupby(["eventid", "eventname", "catname", "venuename"], as_index=False)
        .agg(sales=("salesid", "size"), tickets=("qtysold", "sum"), revenue=("pricepaid", "sum"))
        .sort_values(["revenue", "eventid"], ascending=[False, True])
        .head(10)
    )
    columns = ["eventid", "eventname", "catname", "venuename", "sales", "tickets", "revenue"]
    assert len(got) > 0 and _exact(got, columns) == _exact(want, columns)
    assert engine.query("top_events", ["x' OR '1'='1"]).empty  # a literal, not SQL


def test_table_row_counts_equal_the_sources(engine: QueryEngine, silver: WorkbookParams, spark: Any) -> None:
    """Every Copy-on-Write table and the MoR real-time view count the source's rows; the
    read-optimized view counts the rows of the base files only, as the official Spark datasource's
    read-optimized query does (a change still in a log file is not there: fewer rows after inserts,
    more while a delete waits for compaction)."""
    from helpers.sources.cdc import source_row_counts

    counts = engine.query("table_row_counts").set_index("table_name")["row_count"].to_dict()
    source = {r.table: int(r.rows) for r in source_row_counts(LocalStack(silver), silver).itertuples()}
    for table in silver.silver.tables:
        if table.table_type == "COPY_ON_WRITE":
            assert counts[table.name] == source[table.table], table.name
    assert "sale_mor_rt" not in counts  # the file counts the read-optimized view (runs on Trino)
    mor = table_config(silver, next(t for t in silver.silver.tables if t.name == "sale_mor")).base_path
    base_rows = read_hudi_df(spark, mor, {"hoodie.datasource.query.type": "read_optimized"}).count()
    assert counts["sale_mor_ro"] == base_rows > 0


def test_the_real_time_view_is_refused_on_trino_and_read_by_duckdb(
    engine: QueryEngine, silver: WorkbookParams, tmp_path: Path
) -> None:
    """Trino's Hudi connector would count sale_mor_rt from its base files alone (stale, no error):
    the Trino engine refuses it, also through a view, naming Spark; DuckDB reads base plus logs."""
    from helpers.sources.cdc import source_row_counts

    source = {r.table: int(r.rows) for r in source_row_counts(LocalStack(silver), silver).itertuples()}
    statement = "SELECT count(*) AS row_count FROM sale_mor_rt"
    if isinstance(engine, TrinoEngine):
        with pytest.raises(QueryError, match=r"sale_mor_rt is the real-time .*sale_mor.*Read it with Spark"):
            engine.query(statement)
        view = "-- Creates: a view over the real-time view.\n-- Parameters: none.\n"
        view += "CREATE OR REPLACE VIEW rt_rows AS SELECT salesid FROM sale_mor_rt\n"
        (tmp_path / "rt_rows_view.sql").write_text(view)
        folder, engine.folder = engine.folder, tmp_path
        try:  # through a view: refused before the view is created
            with pytest.raises(QueryError, match=r"sale_mor_rt is the real-time"):
                engine.query("SELECT count(*) FROM rt_rows")
        finally:
            engine.folder = folder
    else:
        assert int(engine.query(statement)["row_count"].iloc[0]) == source["sale"]


def test_a_bad_file_fails_with_the_engine_error_and_the_file_name(
    engine: QueryEngine, tmp_path: Path
) -> None:
    (tmp_path / "no_such_column.sql").write_text(
        "-- Returns: nothing; a column the table lacks.\n-- Parameters: none.\n"
        "SELECT no_such_column FROM sale\n"
    )
    if isinstance(engine, TrinoEngine):  # Trino's own error name and position
        pattern = r"no_such_column\.sql on trino at line 1, column 8 of the statement: COLUMN_NOT_FOUND"
    else:
        pattern = r"no_such_column\.sql on duckdb: .*no_such_column"
    folder, engine.folder = engine.folder, tmp_path
    try:
        with pytest.raises(QueryError, match=pattern):
            engine.query("no_such_column")
    finally:
        engine.folder = folder


def test_the_catalog_trino_reads_is_what_hudi_synced(
    on_trino: WorkbookParams, silver: WorkbookParams, spark: Any
) -> None:
    """One catalog, two readers: the tables Trino lists in the metastore service are those Spark's
    Hive client lists there, every Silver table with its Merge-on-Read views, all filled by Hudi's
    own Hive sync (no other writer registers tables)."""
    from helpers.naming import silver_database
    from helpers.silver.catalog import catalog_names, catalog_tables

    with open_engine(on_trino, progress=False) as trino_engine:
        assert isinstance(trino_engine, TrinoEngine)
        listed = set(trino_engine.query(f'SHOW TABLES FROM hive."{silver_database(silver)}"')["Table"])
    expected = {name for table in silver.silver.tables for name in catalog_names(table)}
    assert expected <= set(catalog_tables(silver, spark)) <= listed


def test_trino_starts_from_the_set_up_s_aot_cache(on_trino: WorkbookParams) -> None:
    """On Java 25 or newer the set-up trained Trino's AOT cache (``helpers.warmup``), the module's
    Trino was started with it, and the JVM mapped it: Java maps a cache into the process only when
    it accepts it (a class path or option it cannot use leaves the file unmapped)."""
    from helpers.local.java import java_major

    server = LocalTrino(on_trino)
    pid = server.pid()
    assert pid is not None, "the module's Trino is not running"
    command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    if (java_major(Path(command[0].decode())) or 0) < 25:  # no one-step training: starts as before
        assert not [option for option in command if option.startswith(b"-XX:AOT")], command
        return
    cache = server.aot_cache()
    assert cache.is_file(), f"no AOT cache {cache}: ./workbook setup makes it (python -m helpers.warmup)"
    assert f"-XX:AOTCache={cache}".encode() in command
    assert str(cache) in Path(f"/proc/{pid}/maps").read_text(), "Java did not map the AOT cache"


def test_trino_reads_through_the_streamer_rewriting_hoodie_properties(
    on_trino: WorkbookParams, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Trino query that starts while ``sale``'s ``hoodie.properties`` is empty, as the continuous
    streamer (Hudi 0.14) leaves it for a few milliseconds on every commit
    (``tests/support/hoodie_properties.py``). Trino 476 reads the file with Hudi 1.0.2's library,
    which takes an empty file as a valid one; the engine tries the query again and returns the
    same rows. With its retries off the same query fails with Hudi's error, so this test can fail."""
    sale = next(t for t in on_trino.silver.tables if t.name == "sale")
    base = table_config(on_trino, sale).base_path
    sql = "SELECT salesid, pricepaid FROM sale ORDER BY salesid"
    gone = "GENERIC_INTERNAL_ERROR: Hoodie table not found in path Table does not exist"
    with open_engine(on_trino, progress=False) as engine:
        before = engine.query(sql)
        with properties_rewrite(base, absent=False, hold_s=0.6):
            during = engine.query(sql)
        monkeypatch.setattr("helpers.hudi.read.READ_RETRIES", 0)
        with properties_rewrite(base, absent=False, hold_s=0.6), pytest.raises(QueryError, match=gone):
            engine.query(sql)
    assert len(before) > 0
    pd.testing.assert_frame_equal(during, before)
