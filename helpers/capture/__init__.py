"""Change capture: Debezium connector configurations, registration backends and the Bronze sink.

:func:`connector_specs` builds one source connector per source system from the parameters;
:func:`open_backend` returns the backend the parameters choose (embedded workers locally, Kafka
Connect REST or MSK Connect on AWS); :func:`register_connectors` creates or updates them all and
waits until they run; :func:`capture_status_frame` and :func:`bronze_frame` show progress.
"""

from __future__ import annotations

from helpers.bronze.read import bronze_files, read_bronze
from helpers.bronze.writer import BronzeWriter
from helpers.capture.backends import (
    ConnectorBackend,
    ConnectorStatus,
    EmbeddedBackend,
    KafkaConnectRestBackend,
    MskConnectBackend,
    wait_until_running,
)
from helpers.capture.connectors import ConnectorSpec
from helpers.capture.register import (
    aws_endpoints,
    bronze_frame,
    capture_status_frame,
    config_frame,
    connector_specs,
    expected_rows,
    local_endpoints,
    open_backend,
    register_connectors,
    source_endpoints,
    stop_connectors,
    wait_for_snapshots,
)

__all__ = [
    "aws_endpoints",
    "local_endpoints",
    "wait_for_snapshots",
    "BronzeWriter",
    "ConnectorBackend",
    "ConnectorSpec",
    "ConnectorStatus",
    "EmbeddedBackend",
    "KafkaConnectRestBackend",
    "MskConnectBackend",
    "bronze_files",
    "bronze_frame",
    "capture_status_frame",
    "config_frame",
    "expected_rows",
    "source_endpoints",
    "connector_specs",
    "open_backend",
    "read_bronze",
    "register_connectors",
    "stop_connectors",
    "wait_until_running",
]
