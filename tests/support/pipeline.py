"""The running pipeline shared by integration test modules: real PostgreSQL and MariaDB with the
sample data, CDC enabled, Debezium workers capturing into a scratch Bronze (Silver beside it).

Started once per test session by the ``capture`` fixture (tests/integration/conftest.py); tests
that change the sources leave the pipeline running, and compare with the sources as they are.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    """Poll ``predicate`` every 0.1 s until it returns something true (returned), or fail."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.1)
