"""The running pipeline shared by integration test modules: real PostgreSQL and MariaDB with the
sample data, CDC enabled, Debezium workers capturing into a scratch Bronze (Silver beside it).

Started once per test session by the ``capture`` fixture (tests/integration/conftest.py); tests
that change the sources leave the pipeline running, change rows of their own (new keys, or
sample rows they restore first) rather than rows other tests read, and compare with the sources
as they are.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from psycopg import sql
from psycopg.rows import dict_row

from helpers.capture.backends import EmbeddedBackend
from helpers.capture.connectors import ConnectorSpec
from helpers.engines import quote_mariadb
from helpers.local.stack import LocalStack
from helpers.params import WorkbookParams


@dataclasses.dataclass
class Capture:
    """The shared pipeline: its stack (``stack.params``), capture backend, connector specs by
    source name, Bronze folder (Silver is its sibling ``silver``), and every captured table's rows
    as the connectors' initial snapshot found them (by topic), read before the connectors
    started: tests change the sources later, so what the sources hold now is not what that
    snapshot read."""

    stack: LocalStack
    backend: EmbeddedBackend
    specs: dict[str, ConnectorSpec]
    bronze: Path
    initial_rows: dict[str, list[dict[str, Any]]]


def source_rows(stack: LocalStack, source: str, table: str) -> list[dict[str, Any]]:
    """Every row of one table of a source (``source`` a name in ``sources``), as dicts."""
    sp = stack.params.source(source)
    if sp.engine == "postgres":
        with stack.connect_postgres(sp.database) as conn:
            cur = conn.cursor(row_factory=dict_row)
            return list(cur.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(sp.namespace, table))))
    import pymysql

    conn2 = stack.connect_mariadb(sp.database)
    try:
        with conn2.cursor(pymysql.cursors.DictCursor) as cur2:
            cur2.execute(f"SELECT * FROM {quote_mariadb(table)}")  # noqa: S608 - quoted
            return list(cur2.fetchall())
    finally:
        conn2.close()


def table_rows_by_topic(stack: LocalStack, specs: list[ConnectorSpec]) -> dict[str, list[dict[str, Any]]]:
    """Every captured table's rows, by its topic (``schema.table`` keys of each spec)."""
    return {
        topic: source_rows(stack, spec.source, table_key.split(".", 1)[1])
        for spec in specs
        for table_key, topic in spec.topics.items()
    }


def own_job_params(
    base: WorkbookParams, table: str, folder: Path, **silver: Any
) -> tuple[WorkbookParams, WorkbookParams]:
    """Parameters for a continuous Silver job of its own on one table of the shared pipeline:
    the table alone under ``<folder>/silver`` (no catalog sync; ``silver`` updates more of
    ``base.silver``), and the job's copy with its own state folder ``<folder>/state`` (so it never
    meets the pipeline's job) and no catalog (no metastore runs in that folder). The first reads
    the sources with the pipeline's credentials; the second starts the job."""
    chosen = next(t for t in base.silver.tables if t.name == table)
    params = base.model_copy(
        update={
            "lake": base.lake.model_copy(update={"silver": str(folder / "silver")}),
            "silver": base.silver.model_copy(update={"tables": (chosen,), "sync": False, **silver}),
        }
    )
    job_params = params.model_copy(
        update={
            "state_dir": str(folder / "state"),
            "spark": params.spark.model_copy(update={"catalog": "none"}),
        }
    )
    return params, job_params
