"""Each stage against the sources, row by row: Bronze replayed, Silver read back, a query result.

The whole-table checks scale as the pipeline does: Bronze is replayed and Silver is read by
Spark's executors, and both are reduced there to per-bucket digests of their rows
(:func:`helpers.checks.digests.spark_bucket_digests`, the same canonical row text as every other
comparison); the source table is streamed in batches into the same digests
(:func:`helpers.checks.at_position.stream_source_table`). Two sides are equal when every bucket is:
the driver holds buckets, never a whole table. A Bronze or Silver side whose inputs did not change
since it was last reduced is not computed again (:mod:`helpers.checks.digest_cache`), so polls
and the next notebook's check cost the source reads and the new files. A query result is
compared with :func:`helpers.checks.compare.compare_frames`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pandas as pd
from psycopg import sql as pgsql

from helpers.bronze.frames import inspect_files, read_events
from helpers.bronze.layout import BAD_REASON, FileLayout
from helpers.capture.connectors import ConnectorSpec
from helpers.capture.register import connector_specs
from helpers.checks.at_position import stream_source_table
from helpers.checks.compare import SOFT_FLAG, compare_frames
from helpers.checks.digest_cache import DigestCache, fingerprint
from helpers.checks.digests import BucketDigests, bucket_digests, spark_bucket_digests
from helpers.checks.divergence import require_whole
from helpers.environments import implementations
from helpers.hudi.api import read_hudi_df
from helpers.hudi.config import HudiTableConfig
from helpers.hudi.timeline import DATA_ACTIONS, list_instants
from helpers.local.kafka import local_worker
from helpers.naming import silver_topic, source_of_connector
from helpers.params import SilverTableParams, WorkbookParams
from helpers.poll import wait_until
from helpers.silver.checked import check_events
from helpers.silver.prepare import (
    fill_unavailable,
    latest_per_key,
    position_column,
    prepare_events,
    toast_columns,
)
from helpers.silver.tables import POSITION_COLUMN, POSITION_FIELDS, bronze_store, pending_bronze, table_config
from helpers.silver.truncate import LOG_POSITION, TRUNCATE, after_truncate, is_marker
from helpers.sources.api import LocalSources, Sources, open_sources
from helpers.sources.connect import connect, primary_key
from helpers.spark import build_spark_session

__all__ = [
    "BronzeReplay",
    "bronze_replay",
    "bronze_status",
    "bronze_vs_source",
    "revenue_vs_source",
    "silver_vs_source",
    "source_revenue_by_customer",
]

#: Tables compared side by side (each compares its source stream with Spark's jobs on its replica).
_PARALLEL = 3

_BRONZE_COLUMNS = ["topic", "source_rows", "bronze_rows", "events", "redelivered", "equal"]


def bronze_vs_source(
    params: WorkbookParams, specs: Sequence[ConnectorSpec], *, wait_s: float = 0.0, spark: Any = None
) -> pd.DataFrame:
    """Replay Bronze on Spark (:func:`bronze_replay`) and compare it with each source table the
    connectors capture, row by row (through per-bucket row digests, module docstring).

    Capture is asynchronous: changes committed just before the call may still be on their way.
    ``wait_s`` re-checks, with a growing pause, until every table is equal or the time is up; the
    last comparison is returned either way.

    Returns:
        One row per topic: ``source_rows``, ``bronze_rows`` (replayed), ``events``,
        ``redelivered`` (events seen before, same position and key: delivered again), ``equal``.
    """
    sources = open_sources(params)
    session = _lazy_session(params, spark)
    last: list[pd.DataFrame] = []

    def compared() -> bool:
        last[:] = [_bronze_vs_source_once(params, specs, sources, session)]
        return bool(last[0]["equal"].all())

    if wait_s > 0:
        try:
            wait_until(compared, timeout_s=wait_s, what="Bronze to equal the sources", max_interval_s=1.0)
        except TimeoutError:
            pass
    else:
        compared()
    return last[0]


@dataclass(frozen=True)
class BronzeReplay:
    """A topic's Bronze replayed on Spark (:func:`bronze_replay`).

    Attributes:
        rows: what the events leave behind (a lazy DataFrame).
        events: the topic's good events.
        redelivered: events that repeat one already there (same log position and key).
    """

    rows: Any
    events: int
    redelivered: int


def _replay_config(key: Sequence[str]) -> HudiTableConfig:
    return HudiTableConfig(
        table_name="bronze_replay",
        base_path="/nonexistent/bronze_replay",
        record_key_fields=tuple(key),
        ordering_fields=(POSITION_COLUMN,),
    )


def bronze_replay(spark: Any, layouts: Sequence[FileLayout], key: Sequence[str], engine: str) -> BronzeReplay:
    """What a topic's Bronze events leave behind, replayed by Spark's executors: the steps of a
    Silver first load (:mod:`helpers.silver.ingest`) without the write, so the newest event per key
    by log position, TOAST placeholders keeping the key's previous value, deleted keys dropped,
    nothing from before the last TRUNCATE marker (:mod:`helpers.silver.truncate`); bad input left
    out. One aggregation counts the events, the redelivered ones and the TOAST
    placeholders (the window that fills them runs only when there are some).

    Args:
        spark: the session.
        layouts: the topic's files (:func:`helpers.bronze.frames.inspect_files`).
        key: the primary key columns.
        engine: the source engine (its log position fields order the events).
    """
    from pyspark.sql import functions as F

    config = _replay_config(key)
    positions = POSITION_FIELDS[engine]
    events = check_events(read_events(spark, layouts), config, positions)
    if "__op" not in events.columns:
        return BronzeReplay(events.where(F.lit(False)), 0, 0)
    good = events.where(F.col(BAD_REASON).isNull())
    if any(k not in good.columns for k in key):  # TRUNCATE markers only: the table is empty
        return BronzeReplay(events.where(F.lit(False)), good.count(), 0)
    good = prepare_events(good, config, engine, positions).withColumns(
        {TRUNCATE: is_marker(), LOG_POSITION: position_column(engine, positions)}
    )
    toast = toast_columns(good)
    identity = [F.col(c) for c in (*positions, *key) if c in good.columns]
    found = good.agg(
        F.count(F.lit(1)).alias("n"),
        F.count(F.when(~F.col(TRUNCATE), F.lit(1))).alias("rows"),
        F.countDistinct(*identity).alias("d"),  # a marker has no key: not counted
        F.max(F.when(F.col(TRUNCATE), F.col(LOG_POSITION))).alias("truncate_at"),
        *[F.max(F.when(F.expr(t), 1).otherwise(0)).alias(f"t{i}") for i, t in enumerate(toast.values())],
    ).collect()[0]
    good = after_truncate(good, found["truncate_at"]).drop(TRUNCATE, LOG_POSITION)
    holding = [name for i, name in enumerate(toast) if found[f"t{i}"]]
    if holding:
        good = fill_unavailable(spark, good, config, holding, stored=False)
    return BronzeReplay(latest_per_key(good, config), int(found["n"]), int(found["rows"]) - int(found["d"]))


def _source_digests(
    params: WorkbookParams, source: str, table: str, key: Sequence[str]
) -> tuple[BucketDigests, list[str], frozenset[str]]:
    """The source table streamed into per-bucket row digests; its columns and JSON columns."""
    digests = BucketDigests({})
    with stream_source_table(params, source, table) as stream:
        for batch in stream.batches:
            digests = digests.merged(bucket_digests(batch, stream.columns, key, stream.json_columns))
        return digests, stream.columns, stream.json_columns


def _digest_cache(params: WorkbookParams) -> DigestCache:
    return DigestCache(params.state_path / "parity")


def _lazy_session(params: WorkbookParams, spark: Any) -> Callable[[], Any]:
    """``spark``, or the session built once on first use: a check whose every side is in the
    digest cache starts no Spark at all (the re-run of a notebook with nothing new)."""
    sessions: list[Any] = [spark]
    building = threading.Lock()

    def session() -> Any:
        with building:
            if sessions[0] is None:
                sessions[0] = build_spark_session(params)
            return sessions[0]

    return session


def _bronze_vs_source_once(
    params: WorkbookParams, specs: Sequence[ConnectorSpec], sources: Sources, session: Callable[[], Any]
) -> pd.DataFrame:
    store = bronze_store(params)
    cache = _digest_cache(params)
    work = [(spec, table_key, topic) for spec in specs for table_key, topic in spec.topics.items()]

    def one(item: tuple[ConnectorSpec, str, str]) -> dict[str, Any]:
        spec, table_key, topic = item
        source = source_of_connector(spec.name)
        table = table_key.split(".", 1)[1]
        engine = params.source(source).engine
        key = primary_key(params, source, table, sources=sources)
        wanted, columns, json_columns = _source_digests(params, source, table, key)
        files = store.list(topic)
        side = f"bronze:{store.root}:{topic}"
        # a listing without sizes cannot tell a rewritten file apart: not cached then
        known = all(f.size for f in files)
        print_ = fingerprint(
            sorted((f.uri, f.size, f.modified) for f in files), key, engine, columns, sorted(json_columns)
        )
        hit = cache.get(side, print_) if known else None
        if hit is not None:
            replayed, counts = hit
        else:
            spark = session()
            replay = bronze_replay(spark, inspect_files(spark, files), key, engine)
            replayed = spark_bucket_digests(replay.rows, columns, key, json_columns)
            counts = {"events": replay.events, "redelivered": replay.redelivered}
            if known:
                cache.put(side, print_, replayed, counts)
        return {
            "topic": topic,
            "source_rows": wanted.rows,
            "bronze_rows": replayed.rows,
            "events": counts["events"],
            "redelivered": counts["redelivered"],
            "equal": not wanted.differing(replayed),
        }

    with ThreadPoolExecutor(max_workers=_PARALLEL, thread_name_prefix="parity") as pool:
        rows = list(pool.map(one, work))
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
    local = implementations(params).local_servers
    if local and (params.capture.backend == "embedded" or local_worker(params)):
        return bronze_vs_source(
            params, connector_specs(params, LocalSources(params).endpoints()), wait_s=wait_s
        )
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
    """Each Silver table against its source table, row by row: Silver read by Spark's executors
    through the official datasource, both sides reduced to per-bucket row digests (module
    docstring).

    Returns:
        One row per table: ``source_rows``, ``silver_rows`` (live rows: a soft-delete table's
        flagged rows are not counted), ``equal`` (same keys, every source column equal; JSON
        compared parsed). A SQL Server source is not compared (``equal`` None): read it with
        notebook 07's reconciliation.
    """
    from pyspark.sql import functions as F

    tables = [t for t in params.silver.tables if names is None or t.name in names]
    for table in tables:
        require_whole(table, "compare Silver with the sources")
    cache = _digest_cache(params)
    session = _lazy_session(params, spark)

    def live_rows(table: SilverTableParams, base: str) -> Any:
        silver = read_hudi_df(session(), base)
        if table.delete_mode == "soft" and SOFT_FLAG in silver.columns:
            silver = silver.where(~F.coalesce(F.col(SOFT_FLAG).cast("string") == "true", F.lit(False)))
        return silver

    def one(table: SilverTableParams) -> dict[str, Any]:
        base = table_config(params, table).base_path
        timeline = list_instants(base)
        written = any(i.is_completed and i.action in DATA_ACTIONS for i in timeline)
        if params.source(table.source).engine == "sqlserver":
            live = live_rows(table, base).count() if written else 0
            return {"table": table.name, "source_rows": None, "silver_rows": live, "equal": None}
        key = list(table.record_key)
        wanted, columns, json_columns = _source_digests(params, table.source, table.table, key)
        side = f"silver:{base}"
        print_ = fingerprint(
            [(i.timestamp, i.action, i.state) for i in timeline],
            table.delete_mode,
            key,
            columns,
            sorted(json_columns),
        )
        hit = cache.get(side, print_) if written else None
        if hit is not None:
            have = hit[0]
        elif written:
            have = spark_bucket_digests(live_rows(table, base), columns, key, json_columns)
            cache.put(side, print_, have)
        else:
            have = BucketDigests({})
        return {
            "table": table.name,
            "source_rows": wanted.rows,
            "silver_rows": have.rows,
            "equal": not wanted.differing(have),
        }

    with ThreadPoolExecutor(max_workers=_PARALLEL, thread_name_prefix="parity") as pool:
        out = list(pool.map(one, tables))
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
