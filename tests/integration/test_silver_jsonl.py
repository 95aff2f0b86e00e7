"""JSON-lines Bronze end to end: real servers and Debezium write JSON lines, Silver ingests them.

Only the ``ems`` (PostgreSQL) and ``ecomm`` (MariaDB) connectors, to keep the run short: between
them they produce every Debezium encoding the sample data has (MySQL dates as epoch days and
datetimes as epoch milliseconds, PostgreSQL timestamps as epoch microseconds, exact decimals).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers.bronze.read import bronze_files
from helpers.capture import connector_specs, open_backend, register_connectors
from helpers.capture.register import local_endpoints
from helpers.checks.parity import bronze_vs_source
from helpers.sources.api import LocalSources

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def test_jsonl_bronze_ingests_into_silver_equal_to_the_sources(
    stack_factory: Callable[..., Any], tmp_path: Path
) -> None:
    from helpers.checks.parity import silver_vs_source
    from helpers.silver.ingest import ingest_all

    overrides = {
        "lake.bronze": str(tmp_path / "bronze"),
        "lake.silver": str(tmp_path / "silver"),
        "capture.bronze_format": "jsonl",
    }
    with stack_factory("wb-jsonl-", overrides) as stack:
        params = stack.params
        sources = LocalSources(params)
        sources.load_sample_data()
        sources.enable_cdc()
        specs = [
            s for s in connector_specs(params, local_endpoints(params)) if s.name.endswith(("-ems", "-ecomm"))
        ]
        backend = open_backend(params)
        try:
            register_connectors(backend, specs, timeout_s=180)
            assert bronze_vs_source(params, specs, wait_s=90)["equal"].all()
            topics = [t for s in specs for t in s.topics.values()]
            files = [p for t in topics for p in bronze_files(params.path(params.lake.bronze), t)]
            assert files and all(p.suffix == ".jsonl" for p in files)
            names = [t.name for t in params.silver.tables if t.source in ("ems", "ecomm")]
            ingested = ingest_all(params, names)
            assert (ingested["files"] > 0).all()
            check = silver_vs_source(params, names)
            assert len(check) == len(names) and check["equal"].all(), check[~check["equal"]]
        finally:
            for spec in specs:
                backend.stop(spec.name)  # type: ignore[attr-defined]
