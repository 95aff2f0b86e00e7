"""Writing test tables with the official Hudi writer, for integration tests that need Silver-shaped
tables without the capture pipeline: Arrow in, a Parquet file staged under the test's folder,
``helpers.hudi.api.write_hudi`` with the options :func:`helpers.silver.ingest.silver_write_options` gives
the Silver table (precombine on a column of the data)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from helpers.hudi.api import HudiCommit, write_hudi
from helpers.params import SilverTableParams, WorkbookParams, load_params
from helpers.silver.tables import silver_write_options, table_config

#: The Silver tables the streamer engine writes in the tests of its other inputs (Debezium's Kafka
#: topics, JSON-lines Bronze): between them every column kind Debezium's PostgreSQL and MySQL
#: sources decode (MariaDB DATE, DATETIME and DECIMAL; PostgreSQL timestamp, timestamptz, numeric,
#: smallint and jsonb), a composite key, CoW and MoR. Each table is one more Hudi sync per streamer
#: run, one after the other in one driver; the other tables of these sources add no kind (the
#: streamer's Avro Bronze mode writes every table in ``test_streamer.py``).
STREAMER_TABLES = ("date", "sale", "sale_mor", "venue", "event", "order_items", "outbox")


def offline_params(tmp_path: Path) -> WorkbookParams:
    """The CI parameters with state, Bronze and Silver under ``tmp_path`` and no catalog sync: for
    tests that write Bronze files themselves and ingest them with no server running."""
    return load_params(
        "ci",
        overrides={
            "state_dir": str(tmp_path / "state"),
            "lake.bronze": str(tmp_path / "bronze"),
            "lake.silver": str(tmp_path / "silver"),
            "silver.sync": False,
        },
    )


def spark_frame(spark: Any, table: pa.Table, folder: Path) -> Any:
    """``table`` as a Spark DataFrame with exact types (through a Parquet file in ``folder``)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex}.parquet"
    pq.write_table(table, path)
    return spark.read.parquet(str(path))


def silver_like(table: pa.Table) -> pa.Table:
    """Silver's types: Avro has no 16-bit ints; timestamps are UTC."""
    fields = []
    for f in table.schema:
        if pa.types.is_int16(f.type) or pa.types.is_int8(f.type):
            fields.append(pa.field(f.name, pa.int32()))
        elif pa.types.is_timestamp(f.type):
            fields.append(pa.field(f.name, pa.timestamp("us", "UTC")))
        else:
            fields.append(f)
    return table.cast(pa.schema(fields))


def write_silver(
    spark: Any,
    params: WorkbookParams,
    table: SilverTableParams,
    rows: pa.Table,
    *,
    precombine: str | None = None,
    operation: str = "upsert",
    **extra: str,
) -> HudiCommit:
    """Write ``rows`` into Silver table ``table`` as ingestion would (its options; precombine on
    ``precombine``, default the first record key field)."""
    options = {
        **silver_write_options(params, table),
        "hoodie.datasource.write.precombine.field": precombine or table.record_key[0],
        "hoodie.datasource.write.operation": operation,
        **extra,
    }
    base = table_config(params, table).base_path
    return write_hudi(spark_frame(spark, rows, Path(base).parent / ".test-staging"), options, base)
