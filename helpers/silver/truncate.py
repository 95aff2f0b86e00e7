"""Markers in a Silver round: a TRUNCATE, or a finished re-snapshot, deletes every row of the
table from before its log position, and the changes after it still apply (``docs/operations.md``).

Capture turns Debezium's truncate event into a marker row (``__op = 't'``, its log position, no
key; the ``TruncateMarker`` transform in ``connect/src``); a re-snapshot ends with a marker the
workbook writes at the position from which the snapshot re-read every row (``__op =
'resnapshot'``, :mod:`helpers.capture.resnapshot`). Both mean: what the table held before this
position is void. A round that holds markers takes the newest one's position ``T`` (from its
one aggregation, :mod:`helpers.silver.counts`) and then, all on the executors:

* drops the round's events at or before ``T`` and the markers;
* adds a delete at ``T`` for every stored row written from a change before ``T`` (read through
  the official datasource), so the upsert deletes them (hard) or flags them deleted (soft), in
  the same commit. A key whose change after ``T`` is in the round keeps that change: it is newer
  than the delete; a row re-read or changed after ``T`` in an earlier round stays.

An instant before the marker still shows the rows (time travel), as for any delete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from helpers.bronze.events import MARKER_OPS
from helpers.bronze.layout import BAD_EVENT, BAD_REASON, FILE_COLUMN, ROW_COLUMN
from helpers.engines import quote_spark, spark_string
from helpers.hudi.api import read_hudi_df
from helpers.hudi.config import SOFT_DELETE_FIELD, HudiTableConfig, delete_field
from helpers.hudi.keys import RECORD_KEY_COL
from helpers.silver.prepare import DELETED, KEY
from helpers.silver.tables import POSITION_COLUMN

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = [
    "LOG_POSITION",
    "MARKER_SQL",
    "TRUNCATE",
    "after_truncate",
    "is_marker",
    "is_marker_schema",
    "truncated_rows",
]

#: Whether the event is a (good) truncate marker; not written.
TRUNCATE = "_truncate"
#: The event's log position as one sortable string (as ``_cdc_position``), for every table; not written.
LOG_POSITION = "_log_position"


def is_marker_schema(field_names: list[str] | set[str], key_fields: tuple[str, ...]) -> bool:
    """Whether a Bronze writer schema is the truncate marker's: Debezium's fields only (every
    name starts with ``__``) and none of the record key. A table's own events always carry its
    key and columns."""
    names = set(field_names)
    return "__op" in names and not names & set(key_fields) and all(n.startswith("__") for n in names)


#: Whether an event is a marker (a TRUNCATE, or a finished re-snapshot: :data:`MARKER_OPS`), as
#: a Spark SQL expression.
MARKER_SQL = f"coalesce({quote_spark('__op')} IN ({', '.join(spark_string(o) for o in MARKER_OPS)}), false)"


def is_marker() -> Column:
    """:data:`MARKER_SQL` as a column."""
    from pyspark.sql import functions as F

    return F.expr(MARKER_SQL)


def after_truncate(events: DataFrame, truncate_at: str | None) -> DataFrame:
    """The events to apply: without markers, and, when the round truncates at ``truncate_at``,
    only those after it."""
    from pyspark.sql import functions as F

    kept = events.where(~F.col(TRUNCATE))
    if truncate_at is None:
        return kept
    return kept.where(F.col(LOG_POSITION) > F.lit(truncate_at))


def truncated_rows(
    spark: SparkSession, events: DataFrame, config: HudiTableConfig, truncate_at: str, position: Column
) -> DataFrame:
    """A delete at ``truncate_at`` of every row the table holds from before it (``position`` is
    a stored row's log position; soft deletes: the rows not yet flagged), shaped as ``events``
    plus the table's columns it lacks, for a union by name: the stored row's values, the delete
    marker set, ``__op = 'd'``, the ordering position ``truncate_at``."""
    from pyspark.sql import functions as F

    # a row written from a change after the marker (taken in an earlier round) stays
    stored = read_hudi_df(spark, config.base_path).where(position < F.lit(truncate_at))
    if config.delete_mode == "soft" and SOFT_DELETE_FIELD in stored.columns:
        stored = stored.where(~F.coalesce(F.col(SOFT_DELETE_FIELD).cast("boolean"), F.lit(False)))
    marker = delete_field(config.delete_mode)
    fixed: dict[str, Column] = {
        KEY: F.col(RECORD_KEY_COL),
        DELETED: F.lit(True),
        marker: F.lit(True),
        "__op": F.lit("d"),
        POSITION_COLUMN: F.lit(truncate_at),
        LOG_POSITION: F.lit(truncate_at),
        TRUNCATE: F.lit(False),
        FILE_COLUMN: F.lit(""),
        ROW_COLUMN: F.lit(-1),
        BAD_REASON: F.lit(None),
        BAD_EVENT: F.lit(None),
    }
    out: list[Any] = []
    for field in events.schema.fields:
        name = field.name
        if name in fixed:
            value = fixed[name]
        elif name in stored.columns:
            value = F.col(name)
        elif field.dataType.typeName() == "boolean":  # the round's flags (late, tombstone hit)
            value = F.lit(False)
        else:
            value = F.lit(None)
        out.append(value.cast(field.dataType).alias(name))
    # What the round's events do not carry (a round of markers only has no table columns and no
    # delete marker): the table's columns, and the delete marker, set, whatever the stored row holds.
    # Without the marker the upsert would write the delete as a live row (bench/README.md, "Both
    # re-runs failed at notebook 03").
    extra = dict.fromkeys([*(c for c in stored.columns if not c.startswith("_hoodie")), marker])
    out += [(fixed[n] if n in fixed else F.col(n)).alias(n) for n in extra if n not in events.columns]
    return stored.select(*out)
