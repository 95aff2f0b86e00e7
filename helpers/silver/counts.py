"""The one aggregation of a Silver round: per Bronze file, what its events are (a Spark job whose
result is a handful of numbers per file; :func:`helpers.silver.ingest.ingest_table` plans the rest
of the round from it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from helpers.bronze.layout import BAD_REASON, FILE_COLUMN, ROW_COLUMN
from helpers.silver.prepare import DELETED, KEY, OUTSIDE
from helpers.silver.tombstones import LATE, STONE_HIT
from helpers.silver.truncate import LOG_POSITION, TRUNCATE

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame

__all__ = ["FileCounts", "count_files"]


@dataclass(frozen=True)
class FileCounts:
    """What one aggregation over a round's events tells of one Bronze file."""

    events: int
    bad: int
    late: int
    deletes: int
    stone_hits: int
    min_row: int
    max_row: int
    placeholders: dict[str, int]
    truncate_at: str | None  # the newest truncate marker's log position
    max_position: str | None = None  # the newest good event's log position (markers included)


def count_files(
    events: DataFrame, toast: dict[str, Any], *, new_table: bool
) -> tuple[dict[str, FileCounts], int]:
    """One Spark job: per Bronze file, its events, bad, late, deletes, events of tombstoned keys,
    the rows' range and TOAST placeholders per column; for a new table, the rollup's total row
    estimates the distinct keys applied (its file groups are sized by it; else 0)."""
    from pyspark.sql import functions as F

    good = F.col(BAD_REASON).isNull()
    applied = good & ~F.col(LATE) & ~F.col(OUTSIDE)
    aggregates = [
        F.count(F.lit(1)).alias("events"),
        F.sum(F.when(~good, 1).otherwise(0)).alias("bad"),
        F.sum(F.when(good & F.col(LATE), 1).otherwise(0)).alias("late"),
        F.sum(F.when(applied & F.col(DELETED), 1).otherwise(0)).alias("deletes"),
        F.sum(F.when(good & F.col(STONE_HIT), 1).otherwise(0)).alias("stone_hits"),
        F.min(ROW_COLUMN).alias("min_row"),
        F.max(ROW_COLUMN).alias("max_row"),
        F.max(F.when(good & F.col(TRUNCATE), F.col(LOG_POSITION))).alias("truncate_at"),
        F.max(F.when(good, F.col(LOG_POSITION))).alias("max_position"),
        *[
            F.sum(F.when(applied & test, 1).otherwise(0)).alias(f"ph_{i}")
            for i, test in enumerate(toast.values())
        ],
    ]
    if new_table:
        keys_estimate = F.approx_count_distinct(F.when(applied, F.col(KEY))).alias("keys")
        grouped = events.rollup(FILE_COLUMN).agg(
            *aggregates, keys_estimate, F.grouping(FILE_COLUMN).alias("total")
        )
    else:
        grouped = events.groupBy(FILE_COLUMN).agg(*aggregates, F.lit(0).alias("total"))
    out = {}
    keys = 0
    for row in grouped.collect():
        if row["total"]:
            keys = int(row["keys"] or 0)
            continue
        out[row[FILE_COLUMN]] = FileCounts(
            events=int(row["events"]),
            bad=int(row["bad"]),
            late=int(row["late"]),
            deletes=int(row["deletes"]),
            stone_hits=int(row["stone_hits"]),
            min_row=int(row["min_row"] or 0),
            max_row=int(row["max_row"] or 0),
            placeholders={name: int(row[f"ph_{i}"] or 0) for i, name in enumerate(toast)},
            truncate_at=row["truncate_at"],
            max_position=row["max_position"],
        )
    return out, keys
