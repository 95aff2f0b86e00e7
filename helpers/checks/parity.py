"""Each stage against the sources, row by row: Bronze replayed, Silver read back, a query result.

Source rows come from :mod:`helpers.sources.connect`, Bronze from :mod:`helpers.bronze.replay`,
and every comparison is :func:`helpers.checks.compare.compare_tables` (or ``compare_frames``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import pyarrow as pa
from psycopg import sql as pgsql

from helpers.bronze.read import read_topic_arrow
from helpers.bronze.replay import redelivered, replay_arrow
from helpers.capture.connectors import ConnectorSpec
from helpers.capture.kafka import local_worker
from helpers.capture.register import connector_specs, local_endpoints
from helpers.checks.compare import compare_frames, compare_tables, split_soft_deleted
from helpers.checks.snapshot import source_table
from helpers.hudi.api import read_hudi_df
from helpers.hudi.read import read_snapshot
from helpers.hudi.timeline import completed_instants
from helpers.lakefs import is_s3, lake_uri, use_lake_s3
from helpers.naming import silver_topic, source_of_connector
from helpers.params import WorkbookParams
from helpers.poll import wait_until
from helpers.silver.tables import bronze_store, pending_bronze, table_config
from helpers.sources.api import Sources, open_sources
from helpers.sources.connect import connect, primary_key
from helpers.spark import build_spark_session

__all__ = [
    "bronze_status",
    "bronze_vs_source",
    "revenue_vs_source",
    "silver_vs_source",
    "source_revenue_by_customer",
]

_BRONZE_COLUMNS = ["topic", "source_rows", "bronze_rows", "events", "redelivered", "equal"]


def bronze_vs_source(
    params: WorkbookParams, specs: Sequence[ConnectorSpec], *, wait_s: float = 0.0
) -> pd.DataFrame:
    """Replay Bronze (:func:`helpers.bronze.replay.replay`) and compare it with each source table
    the connectors capture, row by row.

    Capture is asynchronous: changes committed just before the call may still be on their way.
    ``wait_s`` re-checks, with a growing pause, until every table is equal or the time is up; the
    last comparison is returned either way.

    Returns:
        One row per topic: ``source_rows``, ``bronze_rows`` (replayed), ``events``,
        ``redelivered`` (events seen before, same position and key: delivered again), ``equal``.
    """
    sources = open_sources(params)
    last: list[pd.DataFrame] = []

    def compared() -> bool:
        last[:] = [_bronze_vs_source_once(params, specs, sources)]
        return bool(last[0]["equal"].all())

    if wait_s > 0:
        try:
            wait_until(compared, timeout_s=wait_s, what="Bronze to equal the sources", max_interval_s=1.0)
        except TimeoutError:
            pass
    else:
        compared()
    return last[0]


def _bronze_vs_source_once(
    params: WorkbookParams, specs: Sequence[ConnectorSpec], sources: Sources
) -> pd.DataFrame:
    bronze = lake_uri(params, params.lake.bronze)  # a folder, or s3:// (the Kafka profile's sink)
    use_lake_s3(params)  # the local S3 server's endpoint and keys, when the lake is on it
    rows = []
    for spec in specs:
        source = source_of_connector(spec.name)
        for table_key, topic in spec.topics.items():
            table = table_key.split(".", 1)[1]
            key = primary_key(params, source, table, sources=sources)
            rows_now, json_columns = source_table(params, source, table)
            events = read_topic_arrow(bronze, topic)
            replayed = replay_arrow(events, key)
            problems = compare_tables(rows_now, replayed, key, json_columns=json_columns)
            rows.append(
                {
                    "topic": topic,
                    "source_rows": rows_now.num_rows,
                    "bronze_rows": replayed.num_rows,
                    "events": events.num_rows,
                    "redelivered": redelivered(events, key),
                    "equal": not problems,
                }
            )
    return pd.DataFrame(rows, columns=_BRONZE_COLUMNS)


def bronze_status(params: WorkbookParams, wait_s: float = 0.0) -> pd.DataFrame:
    """Whether Bronze holds what the sources hold, before ingesting.

    With the embedded connectors, or the local-kafka profile's sink, Bronze is replayed and
    compared with each source table (:func:`bronze_vs_source`, waiting up to ``wait_s`` for
    capture to catch up). With a sink that lands Bronze on S3 all the time (Kafka Connect, MSK
    Connect) the Bronze files of each Silver table's topic are listed with the number its
    checkpoint has not taken yet.

    Returns:
        Embedded: ``topic``, ``source_rows``, ``bronze_rows``, ``events``, ``equal``. Otherwise:
        ``table``, ``topic``, ``bronze_files``, ``pending_files`` and ``equal`` None.
    """
    if params.environment != "aws" and (params.capture.backend == "embedded" or local_worker(params)):
        return bronze_vs_source(params, connector_specs(params, local_endpoints(params)), wait_s=wait_s)
    store = bronze_store(params)
    rows = []
    for table in params.silver.tables:
        pending, _ = pending_bronze(params, table, store)
        rows.append(
            {
                "table": table.name,
                "topic": silver_topic(params, table),
                "bronze_files": len(store.list(silver_topic(params, table))),
                "pending_files": len(pending),
                "equal": None,  # compared once Silver exists (notebook 03)
            }
        )
    return pd.DataFrame(rows)


def silver_vs_source(
    params: WorkbookParams, names: Sequence[str] | None = None, *, spark: Any = None
) -> pd.DataFrame:
    """Each Silver table against its source table, row by row (locally the official Rust reader;
    on S3 the official Spark datasource).

    Returns:
        One row per table: ``source_rows``, ``silver_rows`` (live rows: a soft-delete table's
        flagged rows are not counted), ``equal`` (same keys, every source column equal; JSON
        compared parsed). A SQL Server source is not compared (``equal`` None): read it with
        notebook 07's reconciliation.
    """
    out = []
    for table in params.silver.tables:
        if names is not None and table.name not in names:
            continue
        base = table_config(params, table).base_path
        if not completed_instants(base):
            silver = None
        elif is_s3(base):
            spark = spark or build_spark_session(params)
            silver = pa.Table.from_pylist([r.asDict() for r in read_hudi_df(spark, base).collect()])
        else:
            silver = read_snapshot(base)
        if params.source(table.source).engine == "sqlserver":
            live = 0 if silver is None else split_soft_deleted(silver, table.delete_mode)[0].num_rows
            out.append({"table": table.name, "source_rows": None, "silver_rows": live, "equal": None})
            continue
        source, json_columns = source_table(params, table.source, table.table)
        if silver is None:
            silver = source.slice(0, 0)
        problems = compare_tables(
            source,
            silver,
            table.record_key,
            delete_mode=table.delete_mode,
            json_columns=json_columns,
        )
        out.append(
            {
                "table": table.name,
                "source_rows": source.num_rows,
                "silver_rows": split_soft_deleted(silver, table.delete_mode)[0].num_rows,
                "equal": not problems,
            }
        )
    return pd.DataFrame(out, columns=["table", "source_rows", "silver_rows", "equal"])


def source_revenue_by_customer(params: WorkbookParams) -> pd.DataFrame:
    """Revenue per customer computed in the orders source database from ``orders`` and
    ``order_items`` (not the outbox): the oracle of ``sql/order_revenue_by_customer.sql``.

    Returns:
        One row per customer with at least one order item: ``customer_id``, ``customer_name``,
        ``city``, ``order_count``, ``avg_quantity``, ``avg_revenue``, ``total_revenue`` (Decimal),
        sorted as the SQL file sorts.
    """
    schema = params.source("orders").namespace
    query = pgsql.SQL(
        """
        WITH per_order AS (
            SELECT o.customer_id, o.order_id, sum(i.quantity) AS quantity,
                   sum(i.quantity * i.unit_price) AS revenue
              FROM {orders} AS o JOIN {items} AS i ON i.order_id = o.order_id
             GROUP BY o.customer_id, o.order_id)
        SELECT p.customer_id, c.name AS customer_name, c.city, count(*) AS order_count,
               avg(p.quantity::double precision) AS avg_quantity,
               avg(p.revenue::double precision) AS avg_revenue, sum(p.revenue) AS total_revenue
          FROM per_order AS p JOIN {customers} AS c ON c.customer_id = p.customer_id
         GROUP BY p.customer_id, c.name, c.city
         ORDER BY total_revenue DESC, p.customer_id
        """
    ).format(
        orders=pgsql.Identifier(schema, "orders"),
        items=pgsql.Identifier(schema, "order_items"),
        customers=pgsql.Identifier(schema, "customers"),
    )
    with connect(params, "orders") as conn:
        cur = conn.execute(query)
        columns = [d.name for d in cur.description or []]
        return pd.DataFrame.from_records(cur.fetchall(), columns=columns)


def revenue_vs_source(params: WorkbookParams, revenue: pd.DataFrame) -> pd.DataFrame:
    """``order_revenue_by_customer.sql``'s result against :func:`source_revenue_by_customer`,
    per column (averages within floating-point tolerance, everything else exact)."""
    source = source_revenue_by_customer(params)
    return compare_frames(revenue, source, ["customer_id"], approx=["avg_quantity", "avg_revenue"])
