"""Typed helper package behind the change-data-capture lakehouse workbook.

One folder per pipeline stage, in the order data flows; a stage imports only the stages and the
foundation below it (checked by ``lint-imports``; see ``docs/architecture.md``):

* foundation: :mod:`~helpers.errors`, :mod:`~helpers.params`, :mod:`~helpers.naming`,
  :mod:`~helpers.instants`, :mod:`~helpers.poll`, :mod:`~helpers.proc`, :mod:`~helpers.lakefs`,
  :mod:`~helpers.spark`, and :mod:`helpers.hudi` (reading and inspecting Hudi tables);
* :mod:`helpers.sources` - source databases: local servers, Amazon RDS, sample data, CDC settings;
* :mod:`helpers.bronze` - raw change events: model, writer, readers, replay;
* :mod:`helpers.capture` - Debezium connectors and their backends;
* :mod:`helpers.silver` - Hudi ingestion, checkpoint, tombstones, quarantine, catalog, job;
* :mod:`helpers.query` - time travel, change feed, SQL engines;
* :mod:`helpers.checks` and :mod:`helpers.dashboard` - parity, reconciliation, conformance; figures;
* :mod:`helpers.pipeline`, :mod:`helpers.runner`, :mod:`helpers.cli` - composition and commands.
"""

from helpers.errors import WorkbookError

__all__ = ["WorkbookError", "__version__"]

__version__ = "0.1.0"
