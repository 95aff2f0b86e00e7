"""Scratch folders of the local Spark drivers, under the state directory instead of ``/tmp``.

A local driver keeps scratch files in Spark's local dir (``spark-*`` with its Python files and, in
the streamer runtime's Spark 3.4, a 107 MB copy of its jars; ``blockmgr-*``) and in the JVM's
temporary dir (the native libraries of lz4 and Snappy, Hive's ``<session>_resources`` folders,
which stay even after a normal exit: four per workbook run). Spark removes its own folders when the driver
stops, but a driver killed with ``kill -9`` (what the crash tests do, and what an out-of-memory
kill does) leaves them; one day of the project's tests left 280 ``spark-*`` folders, 2.3 GB, in
``/tmp``.

So each Python process that starts local drivers gives them one folder,
``<state_dir>/tmp/spark/<pid>-<start>`` (its pid and its start time, so that a reused pid is not
mistaken for it), and a folder whose process has ended is removed the next time a driver starts
in that state directory. A running driver's folder is never touched: its owner is alive. Written
here because Spark and Hadoop clean only their own exits.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

__all__ = ["SCRATCH_DIR", "driver_scratch"]

#: Under the state directory: one folder per Python process that starts local drivers.
SCRATCH_DIR = Path("tmp") / "spark"


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22), or None
    when it is not running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    if fields[0] in ("Z", "X"):  # a zombie has ended
        return None
    return fields[19]  # field 22 counts from 1 and includes pid and command, cut off above


def _owner_alive(name: str) -> bool:
    pid, _, start = name.partition("-")
    return pid.isdigit() and _start_ticks(int(pid)) == start


def driver_scratch(state_path: Path) -> Path:
    """This process's scratch folder for local drivers under ``state_path`` (created), after the
    folders of processes that have ended are removed."""
    root = state_path / SCRATCH_DIR
    if root.is_dir():
        for entry in root.iterdir():
            if not _owner_alive(entry.name):
                shutil.rmtree(entry, ignore_errors=True)
    pid = os.getpid()
    folder = root / f"{pid}-{_start_ticks(pid)}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder
