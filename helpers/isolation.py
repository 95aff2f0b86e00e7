"""A workbook of its own beside the user's: its own state directory, lake, runs folder and free
loopback ports for the source servers, the metastore and Trino, so it never touches the user's stack or
``lake/``. The tests and the benchmarks use it; it stops what it started when it ends.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from helpers.params import WorkbookParams, load_params
from helpers.pipeline import stop_all
from helpers.proc import free_port

__all__ = ["SERVER_PORT_KEYS", "isolated_folder", "isolated_overrides", "isolated_params"]

#: The ports a stack of the default profile listens on (the Kafka profile's servers, the S3 server
#: and the Spark cluster take theirs from their own overrides).
SERVER_PORT_KEYS = ("local.postgres.port", "local.mariadb.port", "local.metastore.port", "local.trino.port")


def isolated_folder(prefix: str) -> Path:
    """A new folder under ``/tmp`` (a short path: the servers' unix sockets live below it) that the
    database servers' users may traverse."""
    work = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    work.chmod(0o711)
    return work


def isolated_overrides(work: Path) -> dict[str, Any]:
    """Overrides that put a workbook's state, lake and runs under ``work`` and give its servers free
    ports."""
    return {
        "state_dir": str(work / "st"),
        "runs_dir": str(work / "runs"),
        "lake.bronze": str(work / "lake" / "bronze"),
        "lake.silver": str(work / "lake" / "silver"),
        **{key: free_port() for key in SERVER_PORT_KEYS},
    }


@contextmanager
def isolated_params(
    prefix: str, overrides: Mapping[str, Any] | None = None, *, env: str = "ci", keep: bool = False
) -> Iterator[WorkbookParams]:
    """Parameters of ``env`` in a folder of their own (:func:`isolated_overrides`, then
    ``overrides``); on exit every server and worker they started is stopped and the folder removed
    (kept, and its path printed, with ``keep``)."""
    work = isolated_folder(prefix)
    params = load_params(env, overrides={**isolated_overrides(work), **(overrides or {})})
    try:
        yield params
    finally:
        try:
            stop_all(params)
        finally:
            if keep:
                print(f"kept {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
