"""Bronze events into the rows Hudi writes, as Spark expressions the executors run: the ordering
position, the record key, the delete markers, TOAST placeholders filled, the newest change per key.

Nothing here collects rows: each function takes and returns a lazy DataFrame (the counts a round
reports come from one aggregation, :func:`helpers.silver.ingest.ingest_table`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from helpers.bronze.events import UNAVAILABLE_VALUE
from helpers.bronze.layout import FILE_COLUMN, ROW_COLUMN
from helpers.engines import quote_spark, spark_string
from helpers.errors import ParamsError
from helpers.hudi.api import read_hudi_df
from helpers.hudi.config import HudiTableConfig, delete_field
from helpers.hudi.keys import RECORD_KEY_COL, record_key_column
from helpers.params import SilverTableParams
from helpers.silver.tables import POSITION_COLUMN, position_sql
from helpers.sources.positions import SourcePosition, binlog_index

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "DELETED",
    "KEY",
    "OUTSIDE",
    "fill_unavailable",
    "latest_per_key",
    "placeholder_column",
    "placeholder_sql",
    "position_column",
    "prepare_events",
    "slice_column",
    "sortable_position",
    "toast_columns",
]

KEY = "_key"  # the record key as Hudi writes it (``_hoodie_record_key``), for joins; not written
DELETED = "_deleted"  # whether the event deletes its row (both delete modes); not written
OUTSIDE = "_outside"  # the event's key is outside the table's slice (``min_key``): counted, not applied


def position_column(engine: str, fields: tuple[str, ...]) -> Column:
    """``_cdc_position`` of each event: the source's log position as one sortable string
    (``docs/architecture.md``, "Ordering"); a configured single ``ordering`` field is used as it is.
    The expression is :func:`helpers.silver.tables.position_sql`, the one the streamer engine's SQL
    transform uses too.

    Raises:
        HudiError: for an unknown engine.
    """
    from pyspark.sql import functions as F

    return F.expr(position_sql(engine, fields))


def sortable_position(position: SourcePosition) -> str:
    """A source position in the text form of :func:`position_column`, cut so that every event of a
    transaction committed before it sorts below it and every later one above (MySQL: without the
    row number, so an event at exactly ``pos`` sorts after it)."""
    if position.engine == "postgres":
        return f"{int(position.lsn or 0):020d}"
    return f"{binlog_index(position.file or ''):010d}.{int(position.pos or 0):020d}"


def prepare_events(
    events: DataFrame, config: HudiTableConfig, engine: str, positions: tuple[str, ...]
) -> DataFrame:
    """Add ``_cdc_position`` (when it is the ordering field), the record key (``_key``) and the
    delete marker: ``_hoodie_is_deleted`` (hard deletes) or a boolean ``__deleted`` (soft deletes,
    the flagged row is kept); ``_deleted`` says the same for both modes."""
    from pyspark.sql import functions as F

    if config.precombine_field == POSITION_COLUMN:
        events = events.withColumn(POSITION_COLUMN, position_column(engine, positions))
    deleted = f"coalesce(CAST({quote_spark('__deleted')} AS STRING) = 'true', false)"
    marker = delete_field(config.delete_mode)
    return (
        events.withColumns({DELETED: F.expr(deleted), KEY: record_key_column(config)})
        .withColumns({marker: F.col(DELETED)})
        .drop(*([] if config.delete_mode == "soft" else ["__deleted"]))
    )


def _order(config: HudiTableConfig) -> list[Column]:
    from pyspark.sql import functions as F

    fields = [F.col(f) for f in config.ordering_fields]
    return [*fields, F.col(FILE_COLUMN), F.col(ROW_COLUMN)]


def placeholder_sql(name: str, data_type: Any, placeholder: str = UNAVAILABLE_VALUE) -> str | None:
    """Whether a column holds Debezium's TOAST placeholder (text, or its UTF-8 in a bytes
    column), as a Spark SQL expression; None for a column of another type."""
    from pyspark.sql.types import BinaryType, StringType

    if isinstance(data_type, StringType):
        value = spark_string(placeholder)
    elif isinstance(data_type, BinaryType):
        value = f"X'{placeholder.encode().hex()}'"
    else:
        return None
    return f"coalesce({quote_spark(name)} = {value}, false)"


def placeholder_column(name: str, data_type: Any, placeholder: str = UNAVAILABLE_VALUE) -> Column | None:
    """:func:`placeholder_sql` as a column."""
    from pyspark.sql import functions as F

    test = placeholder_sql(name, data_type, placeholder)
    return None if test is None else F.expr(test)


def toast_columns(frame: DataFrame) -> dict[str, str]:
    """The placeholder test (:func:`placeholder_sql`) of every text and bytes column of ``frame``
    (the key columns aside)."""
    out = {}
    for field in frame.schema.fields:
        if field.name.startswith("_"):  # Debezium's fields, the round's own
            continue
        test = placeholder_sql(field.name, field.dataType)
        if test is not None:
            out[field.name] = test
    return out


def fill_unavailable(
    spark: SparkSession,
    events: DataFrame,
    config: HudiTableConfig,
    columns: Sequence[str],
    *,
    stored: bool,
) -> DataFrame:
    """Replace PostgreSQL's TOAST placeholders in ``columns`` with the value the column last had.

    Under ``REPLICA IDENTITY DEFAULT`` an update that leaves a large (TOASTed) value untouched
    carries Debezium's placeholder instead of it. Like Hudi's ``PostgresDebeziumAvroPayload``,
    the column keeps its previous value: the latest earlier event of the same key in this batch
    (by the ordering field; a window over the key), else the row stored in the table (a join with
    the Silver table on ``_hoodie_record_key``, read through the official datasource). A
    placeholder neither can fill is left null and flagged in ``_toast_unresolved``.

    Args:
        spark: the session.
        events: prepared events (:func:`prepare_events`).
        config: the table.
        columns: the columns that hold placeholders in this batch.
        stored: whether the table has rows to look up (not a new table).

    Returns:
        ``events`` with the columns filled and two more columns, ``_toast_filled`` and
        ``_toast_unresolved`` (values filled / left null in the row).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not columns:
        return events.withColumns({"_toast_filled": F.lit(0), "_toast_unresolved": F.lit(0)})
    tests: dict[str, Any] = {c: placeholder_column(c, events.schema[c].dataType) for c in columns}
    window = Window.partitionBy(KEY).orderBy(*_order(config)).rowsBetween(Window.unboundedPreceding, -1)
    earlier = {
        c: F.last(F.when(~tests[c], F.struct(F.col(c).alias("v"))), ignorenulls=True).over(window)
        for c in columns
    }
    frame = events.withColumns({f"_toast_prior_{c}": earlier[c] for c in columns})
    if stored:
        lookup = F.lit(False)
        for c in columns:
            lookup = lookup | (tests[c] & F.col(f"_toast_prior_{c}").isNull())
        wanted = frame.where(lookup).select(KEY).distinct()
        rows = (
            read_hudi_df(spark, config.base_path)
            .select(
                F.col(RECORD_KEY_COL).alias(KEY), *[F.col(c).alias(f"_toast_stored_{c}") for c in columns]
            )
            .join(wanted, KEY, "left_semi")
        )
        frame = frame.join(rows, KEY, "left")
    filled = F.lit(0)
    unresolved = F.lit(0)
    values = {}
    for c in columns:
        prior = F.col(f"_toast_prior_{c}")
        stored_value = F.col(f"_toast_stored_{c}") if stored else F.lit(None)
        in_batch = prior.isNotNull()
        known = in_batch | (stored_value.isNotNull() if stored else F.lit(False))
        values[c] = F.when(tests[c], F.when(in_batch, prior["v"]).otherwise(stored_value)).otherwise(F.col(c))
        filled = filled + F.when(tests[c] & known, 1).otherwise(0)
        unresolved = unresolved + F.when(tests[c] & ~known, 1).otherwise(0)
    helpers = [f"_toast_prior_{c}" for c in columns] + (
        [f"_toast_stored_{c}" for c in columns] if stored else []
    )
    return (
        frame.withColumns({"_toast_filled": filled, "_toast_unresolved": unresolved})
        .withColumns(values)
        .drop(*helpers)
    )


def latest_per_key(events: DataFrame, config: HudiTableConfig) -> DataFrame:
    """The newest event of each record key (by the ordering field; the later file and record on a
    tie), and in hard-delete mode without the keys whose newest event is a delete: what an upsert
    of ``events`` into an empty table leaves."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # by the key fields themselves: after :func:`helpers.silver.ingest.file_groups` the rows are
    # range-partitioned by them already, so the window needs no second shuffle
    newest = Window.partitionBy(*config.record_key_fields).orderBy(*[c.desc() for c in _order(config)])
    latest = events.withColumn("_rank", F.row_number().over(newest)).where(F.col("_rank") == 1).drop("_rank")
    if config.delete_mode == "hard":
        latest = latest.where(~F.col(DELETED))
    return latest


def slice_column(events: DataFrame, table: SilverTableParams) -> Column:
    """Whether each event's key is outside the table's slice (:attr:`SilverTableParams.min_key`);
    always false for a whole table. Markers (no key) are never outside.

    Raises:
        ParamsError: when the slice's key column is not an integer column in Bronze.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegralType

    if table.min_key is None:
        return F.lit(False)
    (key,) = table.record_key
    if not isinstance(events.schema[key].dataType, IntegralType):
        raise ParamsError(
            f"Failed to slice silver table {table.name} by min_key: its key {key} is "
            f"{events.schema[key].dataType.simpleString()} in Bronze, not an integer"
        )
    return F.col(key).isNotNull() & (F.col(key) < F.lit(table.min_key))
