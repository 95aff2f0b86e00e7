"""Hudi's change feed of the Silver tables: every change with its before and after image, and the
views on it: record history, diffs between instants, SCD type 2 (:func:`scd2`).

:func:`changes` reads the CDC log of Copy-on-Write tables through the Spark datasource;
:func:`versions` gives the same :class:`Version` records for Merge-on-Read tables from the
timeline. Image decoding and why Merge-on-Read differs: ``docs/architecture.md``, "Reading Silver".

Example:
    >>> scd2(params, "sale", key=200)          # doctest: +SKIP
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pandas as pd
import pyarrow as pa

from helpers.errors import HudiError
from helpers.hudi.api import read_hudi_df
from helpers.hudi.config import DELETE_MARKER_FIELD
from helpers.hudi.keys import META_COLUMNS
from helpers.hudi.read import HudiReadSpec, open_table, read_hudi, read_snapshot, table_arrow_schema
from helpers.hudi.timeline import completed_instants, table_exists, write_stats
from helpers.instants import InstantInput, instant_to_datetime, to_instant
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.tableref import (
    commit_metadata,
    earliest_retained,
    key_filters,
    key_values,
    silver_table,
    table_base_path,
)
from helpers.spark import build_spark_session

__all__ = ["Version", "cdc_enabled", "changes", "decode_image", "scd2", "versions"]

_SKIP = (*META_COLUMNS, DELETE_MARKER_FIELD)
_OPS = {"i": "insert", "u": "update", "d": "delete"}
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Version:
    """One change of one record: the instant, what it did, and the record after it (for a delete,
    the record before it)."""

    instant: str
    operation: str  # insert | update | delete
    key: tuple[Any, ...]
    values: Mapping[str, Any]


def cdc_enabled(base_path: str) -> bool:
    """Whether the table keeps Hudi's CDC log (``hoodie.table.cdc.enabled=true``)."""
    if not table_exists(base_path):
        return False
    return open_table(base_path).hudi_options().get("hoodie.table.cdc.enabled", "false").lower() == "true"


class _Broken:
    """A value the feed's JSON lost (an inferred insert's decimal)."""


BROKEN = _Broken()


def _decode(value: Any, field: pa.Field) -> Any:
    t = field.type
    if value is None:
        return None
    if pa.types.is_decimal(t):
        if isinstance(value, list):
            unscaled = int.from_bytes(bytes(b & 0xFF for b in value), "big", signed=True)
            return Decimal(unscaled).scaleb(-t.scale)
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            return Decimal(str(value)).quantize(Decimal(1).scaleb(-t.scale))
        return BROKEN
    if pa.types.is_timestamp(t):
        return _EPOCH + dt.timedelta(microseconds=int(value))
    if pa.types.is_date(t):
        return dt.date(1970, 1, 1) + dt.timedelta(days=int(value))
    if pa.types.is_binary(t) and isinstance(value, str):
        return value.encode("utf-8")
    return value


def decode_image(text: str | None, schema: pa.Schema) -> dict[str, Any] | None:
    """One before/after image of the feed as typed values (``docs/architecture.md``); None for none.
    A value the JSON lost is :data:`BROKEN`."""
    if text is None or text in ("", "null"):
        return None
    raw = json.loads(text)
    return {f.name: _decode(raw.get(f.name), f) for f in schema if f.name not in _SKIP}


def _schema(base: str) -> pa.Schema:
    return table_arrow_schema(open_table(base))


def _spec(params: WorkbookParams, table: str | SilverTableParams) -> tuple[SilverTableParams, str]:
    spec = silver_table(params, table)
    return spec, table_base_path(params, spec)


def _key_condition(spec: SilverTableParams, key: Any) -> Any:
    from pyspark.sql import functions as F

    condition = F.lit(True)
    after = F.when(F.col("after").isNull() | (F.col("after") == F.lit("null")), F.lit(None)).otherwise(
        F.col("after")
    )
    image = F.coalesce(after, F.col("before"))
    for column, value in key_values(spec, key).items():
        condition = condition & (F.get_json_object(image, f"$.{column}") == F.lit(str(value)))
    return condition


def changes(
    params: WorkbookParams,
    table: str | SilverTableParams,
    begin: InstantInput = "000",
    end: InstantInput | None = None,
    key: Any = None,
    *,
    spark: Any = None,
) -> pd.DataFrame:
    """Hudi's change feed of a Copy-on-Write Silver table in ``(begin, end]``, decoded.

    Args:
        params: workbook parameters.
        table: Silver table name.
        begin: exclusive start (``"000"``: from the first retained commit).
        end: inclusive end; None: the latest commit.
        key: one record key (value, or ``{column: value}``); None: every record.
        spark: the session (default :func:`helpers.spark.build_spark_session`).

    Returns:
        One row per change, oldest first: ``commit_time``, ``committed_at``, ``operation``
        (``insert``, ``update``, ``delete``), the key columns, ``before`` and ``after`` (dicts of
        typed values, None where there is no image).

    Raises:
        HudiError: for a table without a CDC log (Merge-on-Read: see ``docs/architecture.md``).
    """
    spec, base = _spec(params, table)
    if not cdc_enabled(base):
        raise HudiError(
            f"Failed to read the change feed of {spec.name}: the table keeps no CDC log (Merge-on-Read: "
            "Hudi 1.0.2 cannot read the feed of a version-6 MoR table; use "
            "helpers.query.changefeed.versions, which reads its timeline instead)"
        )
    spark = spark or build_spark_session(params)
    start = "000" if isinstance(begin, str) and set(begin.strip()) == {"0"} else to_instant(begin)
    options: dict[str, Any] = {
        "hoodie.datasource.query.type": "incremental",
        "hoodie.datasource.query.incremental.format": "cdc",
        "hoodie.datasource.read.begin.instanttime": start,
    }
    if end is not None:
        options["hoodie.datasource.read.end.instanttime"] = to_instant(end)
    feed = read_hudi_df(spark, base, options)
    if key is not None:
        feed = feed.where(_key_condition(spec, key))
    rows = feed.select("op", "ts_ms", "before", "after").collect()
    schema = _schema(base)
    out: list[dict[str, Any]] = []
    for row in rows:
        before = decode_image(row["before"], schema)
        after = decode_image(row["after"], schema)
        image = after or before or {}
        out.append(
            {
                "commit_time": str(row["ts_ms"]),
                "operation": _OPS.get(str(row["op"]), str(row["op"])),
                **{k: image.get(k) for k in spec.record_key},
                "before": before,
                "after": after,
            }
        )
    broken = [r for r in out if r["after"] and any(v is BROKEN for v in r["after"].values())]
    for instant in sorted({str(r["commit_time"]) for r in broken}):
        wanted = [r for r in broken if r["commit_time"] == instant]
        filters: list[tuple[str, str, str]] = []
        if len(spec.record_key) == 1:
            column = spec.record_key[0]
            filters = [(column, "IN", ",".join(sorted({str(r[column]) for r in wanted})))]
        stored = read_snapshot(base, as_of=instant, filters=filters or None).to_pylist()
        by_key = {tuple(s[k] for k in spec.record_key): s for s in stored}
        for r in wanted:
            found = by_key.get(tuple(r[k] for k in spec.record_key), {})
            lost: dict[str, Any] = r["after"]
            r["after"] = {c: (found.get(c) if v is BROKEN else v) for c, v in lost.items()}
    frame = pd.DataFrame(out, columns=["commit_time", "operation", *spec.record_key, "before", "after"])
    frame.insert(
        1, "committed_at", pd.to_datetime([instant_to_datetime(t) for t in frame["commit_time"]], utc=True)
    )
    return frame.sort_values("commit_time", kind="stable").reset_index(drop=True)


def _versions_from_feed(
    params: WorkbookParams, spec: SilverTableParams, base: str, key: Any, spark: Any
) -> list[Version]:
    earliest = earliest_retained(base)
    out: list[Version] = []
    begin = "000"
    if earliest is not None:  # older commits were cleaned: start from the table as of the earliest kept
        for row in read_snapshot(base, as_of=earliest, filters=key_filters(spec, key) or None).to_pylist():
            values = {c: v for c, v in row.items() if c not in _SKIP}
            if spec.delete_mode == "soft" and values.get("__deleted"):
                continue
            out.append(Version(str(row["_hoodie_commit_time"]), "insert", _ident(spec, values), values))
        begin = earliest
    feed = changes(params, spec, begin, key=key, spark=spark)
    soft = spec.delete_mode == "soft"
    alive = {v.key for v in out}
    for row in feed.itertuples(index=False):
        operation = str(row.operation)
        values = (row.before if operation == "delete" else row.after) or {}
        ident = _ident(spec, values)
        if soft and operation != "delete" and values.get("__deleted"):
            if ident not in alive:
                continue  # a delete of a key the table never held live: no version
            operation = "delete"  # soft mode: the delete is an update that flags the row
        out.append(Version(str(row.commit_time), operation, ident, values))
        if operation == "delete":
            alive.discard(ident)
        else:
            alive.add(ident)
    return out


def _ident(spec: SilverTableParams, values: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(values.get(k) for k in spec.record_key)


def _versions_from_timeline(spec: SilverTableParams, base: str, key: Any) -> list[Version]:
    """Versions of a table without a CDC log: per commit an incremental read of what it wrote (the
    official Rust reader), and for the commits that delete, the keys that vanished."""
    filters = key_filters(spec, key) or None
    earliest = earliest_retained(base)
    instants = [i for i in completed_instants(base) if earliest is None or i.timestamp >= earliest]
    out: list[Version] = []
    present: dict[tuple[Any, ...], dict[str, Any]] = {}
    soft = spec.delete_mode == "soft"
    previous: str | None = None
    for instant in instants:
        if previous is None:
            rows = read_snapshot(base, as_of=instant.timestamp, filters=filters).to_pylist()
        else:
            options = HudiReadSpec(query_type="incremental", begin=previous, end=instant.timestamp)
            rows = read_hudi(base, options.to_datasource_options(), filters=filters).to_pylist()
        for row in sorted(rows, key=lambda r: str(r["_hoodie_commit_time"])):
            values = {c: v for c, v in row.items() if c not in _SKIP}
            ident = _ident(spec, values)
            deleted = soft and bool(values.get("__deleted"))
            operation = "delete" if deleted else ("update" if ident in present else "insert")
            if deleted and ident not in present:
                continue
            out.append(Version(str(row["_hoodie_commit_time"]), operation, ident, values))
            if deleted:
                present.pop(ident, None)
            else:
                present[ident] = values
        gone_possible = previous is not None and any(
            int(s.get("numDeletes") or 0) for s in write_stats(commit_metadata(base, instant))
        )
        if gone_possible and present:
            still = read_snapshot(
                base, as_of=instant.timestamp, columns=list(spec.record_key), filters=filters
            )
            alive = {tuple(r[k] for k in spec.record_key) for r in still.to_pylist()}
            for ident in [i for i in present if i not in alive]:
                out.append(Version(instant.timestamp, "delete", ident, present.pop(ident)))
        previous = instant.timestamp
    return out


def versions(
    params: WorkbookParams, table: str | SilverTableParams, key: Any = None, *, spark: Any = None
) -> list[Version]:
    """Every change of the table's records (or of one record) across the retained commits, oldest
    first: from the CDC log (Copy-on-Write) or the timeline (Merge-on-Read); see
    ``docs/architecture.md``."""
    spec, base = _spec(params, table)
    if cdc_enabled(base):
        found = _versions_from_feed(params, spec, base, key, spark)
    else:
        found = _versions_from_timeline(spec, base, key)
    return sorted(found, key=lambda v: v.instant)


def scd2(
    params: WorkbookParams, table: str | SilverTableParams, key: Any = None, *, spark: Any = None
) -> pd.DataFrame:
    """The table as a slowly changing dimension of type 2: one row per version of a record.

    Args:
        params: workbook parameters.
        table: Silver table name.
        key: one record key; None: every record.
        spark: the session for the CDC feed (Copy-on-Write tables).

    Returns:
        The key columns, the data columns of the version, ``valid_from`` (the instant that wrote
        it), ``valid_to`` (the instant of the record's next change, None while current),
        ``valid_from_at`` / ``valid_to_at`` (UTC times), ``operation`` (``insert`` or ``update``:
        what made the version), ``ended_by`` (``update``, ``delete`` or None) and ``is_current``.
        A deleted record has no current row: its last version ends with ``ended_by = delete``.
    """
    spec, _ = _spec(params, table)
    rows: list[dict[str, Any]] = []
    open_rows: dict[tuple[Any, ...], dict[str, Any]] = {}
    columns: list[str] = []
    for version in versions(params, spec, key, spark=spark):
        for c in version.values:
            if c not in columns:
                columns.append(c)
        current = open_rows.pop(version.key, None)
        if current is not None:
            current["valid_to"] = version.instant
            current["ended_by"] = "delete" if version.operation == "delete" else "update"
        if version.operation != "delete":
            row = {
                **dict(version.values),
                "valid_from": version.instant,
                "valid_to": None,
                "operation": "insert" if current is None else "update",
                "ended_by": None,
            }
            rows.append(row)
            open_rows[version.key] = row
    for row in rows:
        row["is_current"] = row["valid_to"] is None
    data = [c for c in columns if c not in spec.record_key]
    ordered = [*spec.record_key, *data, "valid_from", "valid_to", "operation", "ended_by", "is_current"]
    frame = pd.DataFrame(rows, columns=ordered)
    frame.insert(
        len(spec.record_key) + len(data) + 2,
        "valid_from_at",
        pd.to_datetime([instant_to_datetime(t) for t in frame["valid_from"]], utc=True),
    )
    frame.insert(
        len(spec.record_key) + len(data) + 3,
        "valid_to_at",
        pd.to_datetime([instant_to_datetime(t) if t else None for t in frame["valid_to"]], utc=True),
    )
    return frame.sort_values([*spec.record_key, "valid_from"], kind="stable").reset_index(drop=True)
