"""Fixtures of the integration tier."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.pipeline import Capture, table_rows_by_topic

from helpers.capture import connector_specs, open_backend, register_connectors, wait_for_snapshots
from helpers.capture.backends import EmbeddedBackend
from helpers.sources.api import LocalSources


@pytest.fixture(scope="session", autouse=True)
def _spark_first(spark: Any) -> Any:
    """The test session's Spark session exists before any integration test builds one itself, so
    every in-process Silver write uses it (and its metastore)."""
    return spark


@pytest.fixture(scope="session")
def capture(stack_factory: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Capture]:
    """The running pipeline (see ``tests/support/pipeline.py``), shared by every module that asks for it."""
    bronze = tmp_path_factory.mktemp("bronze")
    overrides = {
        "lake.bronze": str(bronze),
        "lake.silver": str(bronze.parent / "silver"),
        "capture.flush_interval_ms": 100,
        "silver.database": "wb_capture",
    }
    with stack_factory("wb-cap-", overrides) as stack:
        params = stack.params
        sources = LocalSources(params)
        sources.load_sample_data()
        sources.enable_cdc()
        specs = connector_specs(params, LocalSources(params).endpoints())
        initial_rows = table_rows_by_topic(stack, specs)  # what the connectors' snapshot will read
        backend = open_backend(params)
        assert isinstance(backend, EmbeddedBackend)
        try:
            register_connectors(backend, specs, timeout_s=180)
            # every initial snapshot read before a test changes a source: a MariaDB connector reads
            # its tables after it reports RUNNING, so a write right after this could enter its snapshot
            counts = {topic: len(rows) for topic, rows in initial_rows.items()}
            wait_for_snapshots(backend, specs, counts, timeout_s=300)
            yield Capture(stack, backend, {s.name.split("-", 1)[1]: s for s in specs}, bronze, initial_rows)
        finally:
            for spec in specs:
                backend.stop(spec.name)
