"""A Silver table addressed by name and record key: what time travel and the change feed share.

:func:`silver_table` finds a table's parameters by name, :func:`table_base_path` its Hudi table
(failing clearly before notebook 03 has written it), :func:`key_values` / :func:`key_filters` turn
a record key (a value, or ``{column: value}``) into column values and read filters,
:func:`earliest_retained` names the oldest commit the cleaner kept, and :func:`commit_metadata`
reads a completed commit's metadata once per process (a completed instant's file never changes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import fastavro

from helpers.errors import TimeTravelError
from helpers.hudi.read import ReadFilter
from helpers.hudi.timeline import Instant, completed_instants, hoodie_dir, read_commit_metadata, table_exists
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.tables import table_config

__all__ = [
    "RecordKey",
    "commit_metadata",
    "earliest_retained",
    "key_filters",
    "key_values",
    "silver_table",
    "table_base_path",
]

#: A record key: the value of a one-column key, or ``{column: value}`` for any key.
RecordKey = Any


def silver_table(params: WorkbookParams, table: str | SilverTableParams) -> SilverTableParams:
    """Resolve a Silver table by name (``params.silver.tables``).

    Args:
        params: Workbook parameters.
        table: Table name, or the table's parameters (returned unchanged).

    Returns:
        The table's parameters.

    Raises:
        TimeTravelError: naming the configured tables, if there is no such table.
    """
    if isinstance(table, SilverTableParams):
        return table
    for candidate in params.silver.tables:
        if candidate.name == table:
            return candidate
    names = ", ".join(t.name for t in params.silver.tables)
    raise TimeTravelError(f"Failed to find Silver table {table!r}: configured tables are {names}")


def table_base_path(params: WorkbookParams, table: SilverTableParams) -> str:
    """The table's base path.

    Raises:
        TimeTravelError: when no Hudi table is there yet.
    """
    base = table_config(params, table).base_path
    if not table_exists(base):
        raise TimeTravelError(
            f"Failed to open Silver table {table.name} at {base}: no Hudi table there yet "
            "(run notebook 03 or helpers.silver.ingest.ingest_all first)"
        )
    return base


def key_values(table: SilverTableParams, key: RecordKey) -> dict[str, Any]:
    """``{column: value}`` of a record key.

    Raises:
        TimeTravelError: when the key does not name exactly the table's key columns.
    """
    if isinstance(key, Mapping):
        values = {str(k): v for k, v in key.items()}
    elif len(table.record_key) == 1:
        values = {table.record_key[0]: key}
    else:
        raise TimeTravelError(
            f"Failed to use key {key!r} for table {table.name}: its record key has the columns "
            f"{list(table.record_key)}; pass a mapping {{column: value}}"
        )
    if set(values) != set(table.record_key):
        raise TimeTravelError(
            f"Failed to use key {key!r} for table {table.name}: expected the columns {list(table.record_key)}"
        )
    return values


def key_filters(table: SilverTableParams, key: RecordKey | None) -> list[ReadFilter]:
    """Read filters selecting one record (none for ``key=None``)."""
    if key is None:
        return []
    return [(column, "=", str(value)) for column, value in key_values(table, key).items()]


_metadata_cache: dict[tuple[str, str], dict[str, Any]] = {}


def commit_metadata(base: str, instant: Instant) -> dict[str, Any]:
    """Commit metadata, cached: a completed instant's file never changes."""
    cache_key = (base, instant.file_name)
    if cache_key not in _metadata_cache:
        _metadata_cache[cache_key] = read_commit_metadata(base, instant)
    return _metadata_cache[cache_key]


def earliest_retained(base: str) -> str | None:
    """The earliest commit whose file slices the last clean kept (None: never cleaned)."""
    cleans = completed_instants(base, actions=("clean",))
    if not cleans:
        return None

    with open(os.path.join(hoodie_dir(base), cleans[-1].file_name), "rb") as handle:
        records: list[Any] = list(fastavro.reader(handle))
    earliest = str(records[0].get("earliestCommitToRetain") or "") if records else ""
    return earliest or None
