"""Hudi's record keys and meta columns, as the official key generators write them.

A one-field key is the value as text; a key of several fields is ``f1:v1,f2:v2`` with
``__null__`` / ``__empty__`` for null / empty parts (Hudi's complex and non-partitioned key
generators). The workbook builds the same strings to look rows up by ``_hoodie_record_key`` and to
remember deleted keys (:mod:`helpers.silver.tombstones`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from helpers.errors import HudiError
from helpers.hudi.config import HudiTableConfig

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import Column

__all__ = ["COMMIT_TIME_COL", "META_COLUMNS", "RECORD_KEY_COL", "record_key_column", "record_keys"]

COMMIT_TIME_COL = "_hoodie_commit_time"
RECORD_KEY_COL = "_hoodie_record_key"
META_COLUMNS = (
    COMMIT_TIME_COL,
    "_hoodie_commit_seqno",
    RECORD_KEY_COL,
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
_NULL_PART = "__null__"
_EMPTY_PART = "__empty__"


def _as_text(column: pa.ChunkedArray | pa.Array, name: str) -> Any:
    t = column.type
    if (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_integer(t)
        or pa.types.is_date32(t)
        or pa.types.is_decimal(t)
        or pa.types.is_boolean(t)
        or pa.types.is_floating(t)
    ):
        return column.cast(pa.string())
    raise HudiError(
        f"Failed to build record keys from column {name!r}: type {t} is not supported as a key "
        "(use string, integer, decimal, boolean or date columns)"
    )


def record_keys(table: pa.Table, config: HudiTableConfig) -> pa.ChunkedArray:
    """``_hoodie_record_key`` of each row of ``table`` (module docstring).

    Raises:
        HudiError: when a key field is missing, or a one-field key is null or empty.
    """
    missing = [f for f in config.record_key_fields if f not in table.column_names]
    if missing:
        raise HudiError(f"Failed to build record keys: input lacks record key field(s) {missing}")
    if len(config.record_key_fields) == 1:
        name = config.record_key_fields[0]
        keys = _as_text(table.column(name), name)
        if keys.null_count or pc.any(pc.equal(keys, "")).as_py():
            raise HudiError(
                f"Failed to build record keys: record key field {name!r} is null or empty in some rows"
            )
        return pa.chunked_array([keys]) if isinstance(keys, pa.Array) else keys
    parts: list[Any] = []
    for name in config.record_key_fields:
        values = _as_text(table.column(name), name)
        values = pc.fill_null(pc.if_else(pc.equal(values, ""), _EMPTY_PART, values), _NULL_PART)
        parts.append(pc.binary_join_element_wise(f"{name}:", values, ""))
    joined = pc.binary_join_element_wise(*parts, ",")
    return pa.chunked_array([joined]) if isinstance(joined, pa.Array) else joined


def record_key_column(config: HudiTableConfig) -> Column:
    """``_hoodie_record_key`` of each row as a Spark expression (the same strings as
    :func:`record_keys`; a null part of a several-field key is ``__null__``)."""
    from pyspark.sql import functions as F

    if len(config.record_key_fields) == 1:
        return F.col(config.record_key_fields[0]).cast("string")
    parts = []
    for name in config.record_key_fields:
        text = F.col(name).cast("string")
        value = F.when(text.isNull(), F.lit(_NULL_PART)).when(text == "", F.lit(_EMPTY_PART)).otherwise(text)
        parts.append(F.concat(F.lit(f"{name}:"), value))
    return F.concat_ws(",", *parts)
