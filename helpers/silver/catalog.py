"""The Silver tables as the catalog holds them: what Hudi's Hive sync registered.

Every ingestion commit runs Hudi's own Hive sync (``hoodie.datasource.hive_sync.mode=hms``): into
the local metastore (:mod:`helpers.local.metastore`) here, into the Glue Data Catalog on EMR (the
cluster's Hive metastore). A Copy-on-Write table appears under its name, a Merge-on-Read table
twice: ``<name>_ro`` (read-optimized, base files only) and ``<name>_rt`` (real-time, base plus
log files). This module reads the catalog back through Spark SQL, so notebooks, the local SQL
engine and the tests see exactly what the sync wrote.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from helpers.engines import quote_spark
from helpers.errors import HudiError, cause_line
from helpers.hudi.timeline import completed_instants
from helpers.naming import silver_database
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.tables import table_config
from helpers.spark import build_spark_session

__all__ = ["catalog_frame", "catalog_names", "catalog_tables", "missing_from_catalog", "qualified_name"]

_COLUMNS = ["database", "name", "hudi_table", "query_type", "table_type", "location"]


def qualified_name(params: WorkbookParams, table: str) -> str:
    """A catalog table of the Silver database as a quoted Spark SQL name: `` `db`.`table` ``."""

    return f"{quote_spark(silver_database(params))}.{quote_spark(table)}"


def _location(spark: Any, database: str, name: str) -> str:
    rows = spark.sql(f"DESCRIBE FORMATTED {quote_spark(database)}.{quote_spark(name)}").collect()
    for row in rows:
        if str(row[0]).strip() == "Location":
            return str(row[1]).strip()
    return ""


def catalog_tables(params: WorkbookParams, spark: Any = None) -> dict[str, dict[str, str]]:
    """Catalog table name -> ``hudi_table``, ``query_type``, ``table_type``, ``location`` for the
    tables of the Silver database that belong to configured Silver tables.

    Raises:
        HudiError: when the catalog cannot be read.
    """

    spark = spark or build_spark_session(params)
    database = silver_database(params)
    by_name = {t.name: t for t in params.silver.tables}
    try:
        names = [r["tableName"] for r in spark.sql(f"SHOW TABLES IN {quote_spark(database)}").collect()]
    except Exception as exc:  # noqa: BLE001 - AnalysisException: no such database yet
        if "not found" in str(exc).lower() or "SCHEMA_NOT_FOUND" in str(exc):
            return {}
        raise HudiError(f"Failed to list the catalog database {database}: {cause_line(exc)}") from exc
    out: dict[str, dict[str, str]] = {}
    for name in sorted(names):
        hudi_table, query_type = name, "snapshot"
        if name not in by_name and name[-3:] in ("_ro", "_rt") and name[:-3] in by_name:
            hudi_table = name[:-3]
            query_type = "read_optimized" if name.endswith("_ro") else "snapshot"
        if hudi_table not in by_name:
            continue
        out[name] = {
            "hudi_table": hudi_table,
            "query_type": query_type,
            "table_type": by_name[hudi_table].table_type,
            "location": _location(spark, database, name),
        }
    return out


def catalog_names(table: SilverTableParams) -> list[str]:
    """The catalog tables Hudi's Hive sync registers for a Silver table (``_ro`` / ``_rt`` for
    Merge-on-Read, the table's own name otherwise)."""
    if table.table_type == "MERGE_ON_READ":
        return [f"{table.name}_ro", f"{table.name}_rt"]
    return [table.name]


def missing_from_catalog(params: WorkbookParams, present: Mapping[str, Any]) -> dict[str, list[str]]:
    """Silver tables that have commits but lack catalog tables in ``present`` (as
    :func:`catalog_tables` returns it): table name -> the missing catalog names."""

    missing = {}
    for table in params.silver.tables:
        absent = [n for n in catalog_names(table) if n not in present]
        if absent and completed_instants(table_config(params, table).base_path):
            missing[table.name] = absent
    return missing


def catalog_frame(
    params: WorkbookParams, spark: Any = None, *, tables: Mapping[str, Mapping[str, str]] | None = None
) -> pd.DataFrame:
    """One row per catalog table of the Silver database (``database``, ``name``, ``hudi_table``,
    ``query_type``, ``table_type``, ``location``).

    Args:
        params: workbook parameters.
        spark: the session that reads the catalog (default: built from ``params``).
        tables: the catalog as :func:`catalog_tables` just read it (default: read it now).

    Raises:
        HudiError: naming the Silver tables that have commits but are not in the catalog (or lack
            their ``_ro`` / ``_rt`` tables).
    """

    if tables is None:
        tables = catalog_tables(params, spark)
    database = silver_database(params)
    missing = [n for names in missing_from_catalog(params, tables).values() for n in names]
    if missing:
        raise HudiError(
            f"Failed to find Silver table(s) {missing} in the catalog database {database}: Hudi's Hive sync "
            "did not register them (is silver.sync on, and the metastore running: ./workbook stack status?)"
        )
    rows = [{"database": database, "name": name, **entry} for name, entry in tables.items()]
    return pd.DataFrame(rows, columns=_COLUMNS)
