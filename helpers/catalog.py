"""Catalog registration of the Silver Hudi tables: AWS Glue, and a local catalog file.

Both follow what Hudi's own Hive/Glue sync registers: a Copy-on-Write table under its name; a
Merge-on-Read table twice, ``<name>_ro`` (read-optimized: base files only,
``HoodieParquetInputFormat``) and ``<name>_rt`` (real-time: base plus log files,
``HoodieParquetRealtimeInputFormat``); columns from the table's schema (Hudi's meta columns
first), partition columns as partition keys.

The local catalog is a JSON file (``<silver>/_catalog.json``, written atomically) that the local
SQL engine reads to find each table's path, type and columns.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from helpers.errors import AwsError, HudiError

__all__ = [
    "CatalogTable",
    "catalog_tables",
    "hive_type",
    "register_glue",
    "register_local",
    "read_local_catalog",
]

_COW_INPUT = "org.apache.hudi.hadoop.HoodieParquetInputFormat"
_MOR_RT_INPUT = "org.apache.hudi.hadoop.realtime.HoodieParquetRealtimeInputFormat"
_OUTPUT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"
_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"


@dataclass(frozen=True)
class CatalogTable:
    """One catalog entry (a MoR Hudi table yields two)."""

    name: str
    hudi_table: str
    location: str
    query_type: str  # "snapshot" (CoW), "read_optimized" (_ro) or "snapshot" (_rt)
    input_format: str
    columns: tuple[tuple[str, str], ...]
    partition_keys: tuple[tuple[str, str], ...]
    table_type: str


def hive_type(t: pa.DataType) -> str:
    """Hive/Glue type of an Arrow type."""
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return "int"
    if pa.types.is_int64(t):
        return "bigint"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return "binary"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_dictionary(t):
        return "string"
    raise HudiError(f"Failed to map Arrow type {t} to a catalog type")


def catalog_tables(
    name: str, location: str, schema: pa.Schema, table_type: str, partition: Sequence[str]
) -> list[CatalogTable]:
    """The catalog entries of one Hudi table (two for Merge-on-Read).

    Args:
        name: Hudi table name.
        location: base path (local path or ``s3://`` URI).
        schema: the table's schema with meta columns (e.g. from the official reader).
        table_type: ``COPY_ON_WRITE`` or ``MERGE_ON_READ``.
        partition: partition field names (become partition keys, not columns).

    Returns:
        The entries.
    """
    columns = tuple((f.name, hive_type(f.type)) for f in schema if f.name not in partition)
    keys = tuple((p, hive_type(schema.field(p).type)) for p in partition)
    if table_type == "MERGE_ON_READ":
        return [
            CatalogTable(
                f"{name}_ro", name, location, "read_optimized", _COW_INPUT, columns, keys, table_type
            ),
            CatalogTable(f"{name}_rt", name, location, "snapshot", _MOR_RT_INPUT, columns, keys, table_type),
        ]
    return [CatalogTable(name, name, location, "snapshot", _COW_INPUT, columns, keys, table_type)]


def _glue_input(entry: CatalogTable) -> dict[str, Any]:
    return {
        "Name": entry.name,
        "TableType": "EXTERNAL_TABLE",
        "Parameters": {
            "EXTERNAL": "TRUE",
            "spark.sql.sources.provider": "hudi",
            "hudi.table.type": entry.table_type,
            "hudi.query.type": entry.query_type,
        },
        "PartitionKeys": [{"Name": n, "Type": t} for n, t in entry.partition_keys],
        "StorageDescriptor": {
            "Columns": [{"Name": n, "Type": t} for n, t in entry.columns],
            "Location": entry.location,
            "InputFormat": entry.input_format,
            "OutputFormat": _OUTPUT,
            "SerdeInfo": {"SerializationLibrary": _SERDE, "Parameters": {"serialization.format": "1"}},
        },
    }


def register_glue(glue: Any, database: str, entries: Sequence[CatalogTable]) -> list[str]:
    """Create or update the entries in the Glue Data Catalog (database created if missing).

    Args:
        glue: ``boto3.client("glue")``.
        database: Glue database name.
        entries: from :func:`catalog_tables`.

    Returns:
        ``created <name>`` / ``updated <name>`` per entry.

    Raises:
        AwsError: naming the table when a Glue call fails.
    """
    from botocore.exceptions import ClientError

    out = []
    try:
        glue.get_database(Name=database)
    except ClientError as exc:
        if exc.response["Error"]["Code"] != "EntityNotFoundException":
            raise AwsError(f"Failed to read Glue database {database}: {exc}") from None
        glue.create_database(
            DatabaseInput={"Name": database, "Description": "CDC lakehouse workbook: Silver Hudi tables"}
        )
    for entry in entries:
        table_input = _glue_input(entry)
        try:
            try:
                glue.get_table(DatabaseName=database, Name=entry.name)
                glue.update_table(DatabaseName=database, TableInput=table_input)
                out.append(f"updated {entry.name}")
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "EntityNotFoundException":
                    raise
                glue.create_table(DatabaseName=database, TableInput=table_input)
                out.append(f"created {entry.name}")
        except ClientError as exc:
            raise AwsError(f"Failed to register Glue table {database}.{entry.name}: {exc}") from None
    return out


def register_local(catalog_path: Path, database: str, entries: Sequence[CatalogTable]) -> Path:
    """Create or update the entries in the local catalog file (atomic replace).

    Returns:
        The catalog file.
    """
    doc = read_local_catalog(catalog_path)
    tables = doc.setdefault("databases", {}).setdefault(database, {})
    for entry in entries:
        tables[entry.name] = {
            "hudi_table": entry.hudi_table,
            "location": entry.location,
            "query_type": entry.query_type,
            "table_type": entry.table_type,
            "columns": [list(c) for c in entry.columns],
            "partition_keys": [list(k) for k in entry.partition_keys],
        }
    catalog_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = catalog_path.with_name(f".{catalog_path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, catalog_path)
    return catalog_path


def read_local_catalog(catalog_path: Path) -> dict[str, Any]:
    """The local catalog (empty when absent)."""
    try:
        return dict(json.loads(catalog_path.read_text(encoding="utf-8")))
    except FileNotFoundError:
        return {}
