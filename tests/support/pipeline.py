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

from helpers.capture.backends import EmbeddedBackend
from helpers.capture.connectors import ConnectorSpec
from helpers.local.stack import LocalStack
from helpers.params import WorkbookParams


@dataclasses.dataclass
class Capture:
    """The shared pipeline: its stack (``stack.params``), capture backend, connector specs by
    source name, and Bronze folder (Silver is its sibling ``silver``)."""

    stack: LocalStack
    backend: EmbeddedBackend
    specs: dict[str, ConnectorSpec]
    bronze: Path


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
