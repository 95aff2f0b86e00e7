"""Which implementation each stage uses in each environment: the one table.

The workbook runs the same notebooks in two environments (``params.environment``): ``local``, on
servers the project starts on this machine, and ``aws``, on the user's RDS instances, EMR and
Athena. Like a Dagster project that picks its resources per deployment in one place, every choice
that differs between them is a field of :data:`IMPLEMENTATIONS`; the stages' openers
(:func:`helpers.sources.api.open_sources`, which also gives the connectors their endpoints,
:func:`helpers.silver.backend.open_silver`, :func:`helpers.query.engines.open_engine`) and the
guards of what needs the local servers read their field from :func:`implementations`, and no
other module compares ``params.environment`` (``tests/unit/test_architecture.py`` checks it).

The profiles ``ci`` and ``local-kafka`` are parameter overlays of the ``local`` environment.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from helpers.params import WorkbookParams

__all__ = ["IMPLEMENTATIONS", "Implementations", "implementations"]


@dataclass(frozen=True)
class Implementations:
    """One environment's choices.

    Attributes:
        sources: the source databases: the project's own PostgreSQL and MariaDB (``local``,
            :class:`~helpers.sources.api.LocalSources`) or Amazon RDS (``rds``,
            :class:`~helpers.sources.api.RdsSources`); the connectors log in to the same.
        silver: where Silver's jobs run: this machine's Spark (``local``) or EMR steps (``emr``,
            where HoodieStreamer's steps also register their tables in Glue themselves).
        query: the engine of notebook 05's SQL files: Athena, or locally Trino over the local
            metastore (``duckdb`` when ``local.query_engine`` says so).
        local_servers: whether the project runs servers here (the stack, the local S3 server and
            Spark cluster, the Kafka Connect worker), and so the scripted changes and conformance.
    """

    sources: Literal["local", "rds"]
    silver: Literal["local", "emr"]
    query: Literal["trino", "duckdb", "athena"]
    local_servers: bool


IMPLEMENTATIONS: dict[str, Implementations] = {
    "local": Implementations(sources="local", silver="local", query="trino", local_servers=True),
    "aws": Implementations(sources="rds", silver="emr", query="athena", local_servers=False),
}


def implementations(params: WorkbookParams) -> Implementations:
    """The choices of ``params.environment`` (locally, the query engine of ``local.query_engine``)."""
    chosen = IMPLEMENTATIONS[params.environment]
    if chosen.query == "trino" and params.local.query_engine == "duckdb":
        return replace(chosen, query="duckdb")
    return chosen
