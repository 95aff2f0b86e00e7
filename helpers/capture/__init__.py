"""Change capture: Debezium connector configurations, registration backends and the Bronze sink.

:func:`connector_specs` builds one source connector per source system from the parameters;
:func:`open_backend` returns the backend the parameters choose (embedded workers locally, Kafka
Connect REST or MSK Connect on AWS); :func:`register_connectors` creates or updates them all and
waits until they run; :func:`capture_status_frame` and :func:`bronze_frame` show progress;
:func:`resnapshot` takes a new snapshot of one table while capture runs.

The names below are loaded on first use (PEP 562). Every embedded connector runs as
``python -m helpers.capture.worker``, which imports this package first: eager imports would load
pandas and pyarrow into each worker for nothing (measured: 156 MiB resident after import, 55 MiB
without them, per worker).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
        bronze_frame,
        capture_status_frame,
        config_frame,
        connector_specs,
        expected_rows,
        open_backend,
        register_connectors,
        stop_connectors,
        wait_for_snapshots,
    )
    from helpers.capture.resnapshot import ResnapshotResult, resnapshot

#: Where the exported names live (the imports above, for type checkers).
_HOMES = (
    "helpers.bronze.read",
    "helpers.bronze.writer",
    "helpers.capture.backends",
    "helpers.capture.connectors",
    "helpers.capture.register",
    "helpers.capture.resnapshot",
)

__all__ = [
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
    "connector_specs",
    "expected_rows",
    "open_backend",
    "read_bronze",
    "register_connectors",
    "resnapshot",
    "ResnapshotResult",
    "stop_connectors",
    "wait_for_snapshots",
    "wait_until_running",
]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    for home in _HOMES:  # the first use loads them all, as an eager import would have
        module = importlib.import_module(home)
        globals().update({n: getattr(module, n) for n in __all__ if hasattr(module, n)})
    return globals()[name]


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
