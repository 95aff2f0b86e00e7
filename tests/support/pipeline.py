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

from helpers.capture.backends import EmbeddedBackend
from helpers.capture.connectors import ConnectorSpec
from helpers.sources.local.stack import LocalStack


@dataclasses.dataclass
class Capture:
    """The shared pipeline: its stack (``stack.params``), capture backend, connector specs by
    source name, and Bronze folder (Silver is its sibling ``silver``)."""

    stack: LocalStack
    backend: EmbeddedBackend
    specs: dict[str, ConnectorSpec]
    bronze: Path
