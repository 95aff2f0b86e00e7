"""The one aggregation of a Silver round: per Bronze file, what its events are (a Spark job whose
result is a handful of numbers per file; :func:`helpers.silver.ingest.ingest_table` plans the rest
of the round from it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from helpers.bronze.layout import BAD_REASON, FILE_COLUMN, ROW_COLUMN
from helpers.engines import quote_spark, spark_string
from helpers.silver.checked import GOOD_SQL, MISMATCH_REASON
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
    #: the newest log position among the events set aside because their column types no longer
    #: match the table (:data:`helpers.silver.checked.MISMATCH_REASON`)
    mismatched_at: str | None = None


def count_files(
    events: DataFrame, toast: dict[str, str], *, new_table: bool, set_aside_position: str = "NULL"
) -> tuple[dict[str, FileCounts], int]:
    """One Spark job: per Bronze file, its events, bad, late, deletes, events of tombstoned keys,
    the rows' range and TOAST placeholders per column (``toast``: each column's placeholder test,
    :func:`helpers.silver.prepare.toast_columns`); for a new table, an estimate of the distinct
    keys applied (its file groups are sized by it; else 0). The aggregates are Spark SQL text: one
    call into the JVM each.

    The estimate merges one HyperLogLog sketch per file (Spark's ``hll_sketch_agg``, Apache
    DataSketches) over the grouped rows, in the same job. A rollup's total row did this before:
    its ``Expand`` fed every event to the aggregation twice, and the log positions' string maxima
    made it sort them: 3.2 s against 2.7 s for this on 2.25 M events, warm (``bench/README.md``, "The
    per-file counts without a rollup").

    ``set_aside_position`` is the log position of an event set aside whole (SQL over its
    ``_bad_event`` JSON: such events keep no columns of their own), for ``mismatched_at``."""
    from pyspark.sql import functions as F

    q = quote_spark
    good = GOOD_SQL
    applied = f"({good} AND NOT {q(LATE)} AND NOT {q(OUTSIDE)})"

    def events_where(test: str) -> str:
        return f"sum(CASE WHEN {test} THEN 1 ELSE 0 END)"

    aggregates = [
        "count(1) AS `events`",
        f"{events_where(f'NOT ({good})')} AS `bad`",
        f"{events_where(f'{good} AND {q(LATE)}')} AS `late`",
        f"{events_where(f'{applied} AND {q(DELETED)}')} AS `deletes`",
        f"{events_where(f'{good} AND {q(STONE_HIT)}')} AS `stone_hits`",
        f"min({q(ROW_COLUMN)}) AS `min_row`",
        f"max({q(ROW_COLUMN)}) AS `max_row`",
        f"max(CASE WHEN {good} AND {q(TRUNCATE)} THEN {q(LOG_POSITION)} END) AS `truncate_at`",
        f"max(CASE WHEN {good} THEN {q(LOG_POSITION)} END) AS `max_position`",
        f"max(CASE WHEN startswith({q(BAD_REASON)}, {spark_string(MISMATCH_REASON)}) "
        f"THEN {set_aside_position} END) AS `mismatched_at`",
        *[f"{events_where(f'{applied} AND ({test})')} AS `ph_{i}`" for i, test in enumerate(toast.values())],
    ]
    if new_table:
        aggregates.append(f"hll_sketch_agg(CASE WHEN {applied} THEN {q(KEY)} END) AS `sketch`")
    grouped = events.groupBy(FILE_COLUMN).agg(*[F.expr(a) for a in aggregates])
    if new_table:
        # the files' sketches merged over the grouped rows (one per file), all in one window: a
        # constant partition, since an empty one has Spark warn of moving all data to one partition
        grouped = grouped.withColumn(
            "keys", F.expr("hll_sketch_estimate(hll_union_agg(`sketch`) OVER (PARTITION BY 0))")
        ).drop("sketch")
    out = {}
    keys = 0
    for row in grouped.collect():
        if new_table:
            keys = int(row["keys"] or 0)
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
            mismatched_at=row["mismatched_at"],
        )
    return out, keys
