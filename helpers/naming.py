"""Every name the pipeline derives from the project and a source: the only place that builds them.

Topics, connectors, replication slots, publications and the Silver database are read by the
notebooks, the helpers and the tests from here, so a rename happens once.
"""

from __future__ import annotations

from helpers.params import SilverTableParams, WorkbookParams

__all__ = [
    "connector_name",
    "silver_topic",
    "publication_name",
    "silver_database",
    "slot_name",
    "source_of_connector",
    "table_topic",
    "topic_name",
]


def topic_name(project: str, namespace: str, table: str) -> str:
    """Topic of a captured table: ``<project>.<namespace>.<table>`` (namespace = schema or database)."""
    return f"{project}.{namespace}.{table}"


def table_topic(params: WorkbookParams, source: str, table: str) -> str:
    """Topic of ``table`` of the configured source ``source``."""
    return topic_name(params.project, params.source(source).namespace, table)


def silver_topic(params: WorkbookParams, table: SilverTableParams) -> str:
    """Topic a Silver table is built from."""
    return table_topic(params, table.source, table.table)


def connector_name(params: WorkbookParams, source: str) -> str:
    """Debezium connector of a source: ``<project>-<source>``."""
    return f"{params.project}-{source}"


def source_of_connector(name: str) -> str:
    """The source of a connector named by :func:`connector_name` (the part after the first ``-``)."""
    return name.split("-", 1)[1]


def slot_name(params: WorkbookParams, source: str) -> str:
    """Logical replication slot of a PostgreSQL source's connector: ``<project>_<source>_slot``."""
    return f"{params.project}_{source}_slot"


def publication_name(params: WorkbookParams, source: str) -> str:
    """PostgreSQL publication of a source: ``<project>_<source>_pub`` (``pgoutput`` plugin)."""
    return f"{params.project}_{source}_pub"


def silver_database(params: WorkbookParams) -> str:
    """Catalog database of the Silver tables (``silver.database``, else ``<project>_cdc_hudi``)."""
    return params.silver.database or f"{params.project}_cdc_hudi"
