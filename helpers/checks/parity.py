"""Each stage against the sources: Bronze replayed and Silver read back, compared row by row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from helpers.hudi.api import read_hudi_df
from helpers.hudi.config import SOFT_DELETE_FIELD
from helpers.hudi.timeline import completed_instants
from helpers.lakefs import is_s3
from helpers.params import WorkbookParams
from helpers.silver.tables import (
    table_config,
)
from helpers.spark import build_spark_session

__all__ = ["silver_vs_source"]


def silver_vs_source(
    params: WorkbookParams, names: Sequence[str] | None = None, *, spark: Any = None
) -> pd.DataFrame:
    """Each Silver table against its source table, row by row (locally the official Rust reader;
    on S3 the official Spark datasource).

    Returns:
        One row per table: ``source_rows``, ``silver_rows`` (live rows: a soft-delete table's
        flagged rows are not counted), ``equal`` (same keys, every source column equal; JSON
        compared parsed). A SQL Server source is not compared (``equal`` None): read it with
        notebook 07's reconciliation.
    """
    from helpers.capture.register import _source_table, rows_equal_source
    from helpers.hudi.read import read_snapshot
    from helpers.sources.api import open_sources

    connections = open_sources(params)
    out = []
    for table in params.silver.tables:
        if names is not None and table.name not in names:
            continue
        sp = params.source(table.source)
        base = table_config(params, table).base_path
        if not completed_instants(base):
            silver: list[dict[str, Any]] = []
        elif is_s3(base):
            spark = spark or build_spark_session(params)
            silver = [r.asDict() for r in read_hudi_df(spark, base).collect()]
        else:
            silver = read_snapshot(base).to_pylist()
        if table.delete_mode == "soft":
            silver = [r for r in silver if not r.get(SOFT_DELETE_FIELD)]
        if sp.engine == "sqlserver":
            out.append({"table": table.name, "source_rows": None, "silver_rows": len(silver), "equal": None})
            continue
        engine = "postgres" if sp.engine == "postgres" else "mysql"
        source = _source_table(connections, engine, sp.database, sp.namespace, table.table)
        out.append(
            {
                "table": table.name,
                "source_rows": len(source),
                "silver_rows": len(silver),
                "equal": rows_equal_source(source, silver, table.record_key),
            }
        )
    return pd.DataFrame(out, columns=["table", "source_rows", "silver_rows", "equal"])
