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
    "raw_connector_name",
    "raw_slot_name",
    "raw_topic",
    "raw_topic_prefix",
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


def raw_topic_prefix(params: WorkbookParams) -> str:
    """Topic prefix of the unflattened change topics Hudi's Debezium sources read
    (``silver.streamer.source: kafka``): ``<project>_raw``, outside the Bronze sink's pattern."""
    return f"{params.project}_raw"


def raw_topic(params: WorkbookParams, table: SilverTableParams) -> str:
    """The unflattened change topic a Silver table is built from with ``silver.streamer.source: kafka``."""
    return topic_name(raw_topic_prefix(params), params.source(table.source).namespace, table.table)


def raw_connector_name(params: WorkbookParams, source: str) -> str:
    """The connector writing a source's unflattened change topics: ``<project>_raw-<source>``."""
    return f"{raw_topic_prefix(params)}-{source}"


def raw_slot_name(params: WorkbookParams, source: str) -> str:
    """Replication slot of a PostgreSQL source's unflattened twin connector: ``<slot>_raw``."""
    return f"{slot_name(params, source)}_raw"


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
