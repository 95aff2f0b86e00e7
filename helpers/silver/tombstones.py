"""Tombstones of hard-deleted keys, so a late older change cannot bring a deleted row back.

Hard-delete tables keep each deleted key with the ordering value of its delete for
``silver.tombstone_retention_s`` (:func:`next_tombstones`) and drop changes of that key that are
not newer (:func:`flag_late`). The state is a Parquet folder written by Spark and named in the
commit metadata; all of it runs on the executors (joins with the round's events). Why and how:
``docs/architecture.md``, "Silver ingestion".
"""

from __future__ import annotations

import functools
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from helpers.engines import quote_spark
from helpers.errors import HudiError, cause_line
from helpers.hudi.config import HudiTableConfig
from helpers.hudi.keys import RECORD_KEY_COL
from helpers.lake_store import is_s3, join, open_store
from helpers.silver.prepare import DELETED, KEY

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "DELETED_AT",
    "LATE",
    "STONE_HIT",
    "flag_late",
    "next_tombstones",
    "prune_tombstone_files",
    "read_tombstones",
    "tombstone_folder",
    "write_tombstones",
]

DELETED_AT = "_deleted_at"
LATE = "_late"  # the event is not newer than its key's delete: dropped
STONE_HIT = "_stone_hit"  # the event's key has a tombstone
_PREFIX = "tombstones-"


def tombstone_folder(base_path: str) -> str:
    """Where a table's tombstone states live: ``<parent>/.workbook/tombstones/<table folder>``."""
    parent, name = str(base_path).rstrip("/").rsplit("/", 1)
    return join(parent, ".workbook", "tombstones", name)


@functools.lru_cache(maxsize=64)
def _state_frame(spark: SparkSession, location: str) -> DataFrame:
    """A state's frame, read once per session and location: a state is never changed once written
    (each write is a new folder, :func:`write_tombstones`, which reads it back through here), so
    the continuous job's rounds reuse it instead of listing the folder and inferring its Parquet
    schema again (a Spark job each time). A failed read is not kept."""
    return spark.read.parquet(location)


def read_tombstones(
    spark: SparkSession, base_path: str, name: str, config: HudiTableConfig
) -> DataFrame | None:
    """The tombstones of a state (``""``: none), lazily: ``_hoodie_record_key``, the ordering
    field, ``_deleted_at`` (epoch s). A state read (or written) before by this process's session
    is not listed again (:func:`_state_frame`).

    Raises:
        HudiError: when a named state is missing or unreadable (the table's state is damaged).
    """
    if not name:
        return None
    location = join(tombstone_folder(base_path), name)
    try:
        return _state_frame(spark, location)
    except Exception as exc:  # noqa: BLE001 - Py4J errors
        cause = cause_line(exc, 500)
        raise HudiError(
            f"Failed to read the tombstones {location} of table {config.table_name}: {cause}"
        ) from None


def flag_late(events: DataFrame, stones: DataFrame | None, config: HudiTableConfig) -> DataFrame:
    """``events`` with ``_late`` (a tombstone of the key is not older: drop the change) and
    ``_stone_hit`` (the key has a tombstone); a join with the state on the record key."""
    from pyspark.sql import functions as F

    if stones is None:
        return events.withColumns({LATE: F.lit(False), STONE_HIT: F.lit(False)})
    order = quote_spark(config.ordering_fields[0])
    marks = stones.selectExpr(
        f"{quote_spark(RECORD_KEY_COL)} AS {quote_spark(KEY)}", f"{order} AS _stone_order"
    )
    joined = events.join(marks, KEY, "left")
    hit = "_stone_order IS NOT NULL"
    late = f"{hit} AND NOT ({order} > _stone_order)"
    return joined.withColumns({LATE: F.expr(late), STONE_HIT: F.expr(hit)}).drop("_stone_order")


def next_tombstones(
    events: DataFrame,
    stones: DataFrame | None,
    config: HudiTableConfig,
    now: float,
    retention_s: float,
) -> DataFrame:
    """The state after a batch: keys whose newest change in it is a delete get a tombstone with
    that delete's ordering value; keys with a newer non-delete lose theirs; tombstones older than
    ``retention_s`` are dropped.

    Args:
        events: the batch's applied events (not late), with ``_key`` and ``_deleted``.
        stones: the state before (None: empty).
        config: the table.
        now: the wall-clock time of this round (epoch s).
        retention_s: how long a tombstone is kept.
    """
    from pyspark.sql import functions as F

    order = config.ordering_fields[0]
    # the newest change of each key; two changes of a key at one log position are one change
    # delivered twice, so the position alone orders them
    newest = events.groupBy(KEY).agg(
        F.max(F.struct(F.col(order).alias("o"), F.col(DELETED).alias("d"))).alias("_newest")
    )
    latest = newest.select(
        F.col(KEY).alias(RECORD_KEY_COL),
        F.col("_newest.o").alias("_event_order"),
        F.col("_newest.d").alias("_event_deleted"),
    )
    if stones is None:
        return latest.where("_event_deleted").select(
            RECORD_KEY_COL, F.col("_event_order").alias(order), F.lit(float(now)).alias(DELETED_AT)
        )
    kept = stones.where(F.lit(float(now)) - F.col(DELETED_AT) <= F.lit(float(retention_s)))
    both = kept.join(latest, RECORD_KEY_COL, "full_outer")
    stone = F.col(DELETED_AT).isNotNull()
    event = F.col("_event_order").isNotNull()
    return both.where(
        F.coalesce(F.col("_event_deleted"), F.lit(False))
        | (stone & (~event | ~(F.col("_event_order") > F.col(order))))
    ).select(
        RECORD_KEY_COL,
        F.when(F.coalesce(F.col("_event_deleted"), F.lit(False)), F.col("_event_order"))
        .otherwise(F.col(order))
        .alias(order),
        F.when(F.coalesce(F.col("_event_deleted"), F.lit(False)), F.lit(float(now)))
        .otherwise(F.col(DELETED_AT))
        .alias(DELETED_AT),
    )


def write_tombstones(state: DataFrame, base_path: str) -> tuple[str, float | None]:
    """Write a state (a Spark job; a new folder, complete before the commit that names it).

    Returns:
        Its name to put in the commit metadata and its oldest ``_deleted_at`` (``("", None)`` for
        an empty state: nothing is written).
    """
    from pyspark.sql import functions as F

    name = f"{_PREFIX}{uuid.uuid4().hex}"
    location = join(tombstone_folder(base_path), name)
    state.coalesce(1).write.mode("errorifexists").parquet(location)
    written = _state_frame(state.sparkSession, location)  # the next round's read of it
    summary = written.agg(F.count(F.lit(1)).alias("n"), F.min(DELETED_AT).alias("oldest")).collect()[0]
    if not summary["n"]:
        _remove_state(base_path, name)
        return "", None
    return name, float(summary["oldest"])


def prune_tombstone_files(base_path: str, keep: str) -> int:
    """Remove the states other than ``keep`` (call under the table lock, after the commit); the
    number of files removed."""
    return _remove_states(base_path, lambda top: top != keep)


def _remove_state(base_path: str, name: str) -> int:
    return _remove_states(base_path, lambda top: top == name)


def _remove_states(base_path: str, remove: Callable[[str], bool]) -> int:
    """Delete the files of the states whose name ``remove`` accepts (a state is a Spark-written
    folder, or one Parquet file as earlier versions wrote it), then their empty local folders."""
    folder = tombstone_folder(base_path)
    store = open_store(folder)
    removed = 0
    for entry in store.list("", recursive=True):
        top = entry.location[len(store.root) :].lstrip("/").split("/", 1)[0]
        if top.lstrip(".").startswith(_PREFIX) and remove(top):
            store.delete(entry.location)
            removed += 1
    root = Path(folder)
    if removed and not is_s3(folder) and root.is_dir():
        for child in root.iterdir():
            if child.is_dir() and child.name.lstrip(".").startswith(_PREFIX) and remove(child.name):
                shutil.rmtree(child, ignore_errors=True)
    return removed
