"""Table inspection: timeline with per-commit counts, file groups and slices, table size."""

from __future__ import annotations

import datetime as dt
import os

import pandas as pd

from helpers.hudi.fsview import load_file_groups
from helpers.hudi.timeline import DATA_ACTIONS, list_instants, read_commit_metadata

__all__ = ["table_timeline", "table_file_groups", "table_size"]


def table_timeline(base_path: str) -> pd.DataFrame:
    """The active timeline, one row per instant.

    Args:
        base_path: table base path.

    Returns:
        Columns ``instant``, ``action``, ``state``, ``instant_time`` (UTC), ``completed_at`` (file
        time of the newest state file), ``operation``, ``inserts``, ``updates``, ``deletes``,
        ``files_written``, ``bytes_written`` (counts only for completed commit-like instants).
    """
    rows = []
    for inst in list_instants(base_path):
        row: dict[str, object] = {
            "instant": inst.timestamp,
            "action": inst.action,
            "state": inst.state,
            "instant_time": pd.Timestamp(dt.datetime.strptime(inst.timestamp[:14], "%Y%m%d%H%M%S"), tz="UTC")
            + pd.Timedelta(milliseconds=int(inst.timestamp[14:17] or 0)),
            "completed_at": pd.Timestamp(inst.modified_time, unit="s", tz="UTC"),
            "operation": None,
            "inserts": 0,
            "updates": 0,
            "deletes": 0,
            "files_written": 0,
            "bytes_written": 0,
        }
        if inst.is_completed and inst.action in DATA_ACTIONS:
            meta = read_commit_metadata(base_path, inst)
            row["operation"] = meta.get("operationType")
            for stats in (meta.get("partitionToWriteStats") or {}).values():
                for s in stats:
                    row["inserts"] = int(row["inserts"]) + int(s.get("numInserts") or 0)  # type: ignore[call-overload]
                    row["updates"] = int(row["updates"]) + int(s.get("numUpdateWrites") or 0)  # type: ignore[call-overload]
                    row["deletes"] = int(row["deletes"]) + int(s.get("numDeletes") or 0)  # type: ignore[call-overload]
                    row["files_written"] = int(row["files_written"]) + 1  # type: ignore[call-overload]
                    row["bytes_written"] = int(row["bytes_written"]) + int(s.get("fileSizeInBytes") or 0)  # type: ignore[call-overload]
        rows.append(row)
    return pd.DataFrame(
        rows,
        columns=[
            "instant",
            "action",
            "state",
            "instant_time",
            "completed_at",
            "operation",
            "inserts",
            "updates",
            "deletes",
            "files_written",
            "bytes_written",
        ],
    )


def table_file_groups(base_path: str) -> pd.DataFrame:
    """Every visible file slice.

    Args:
        base_path: table base path.

    Returns:
        Columns ``partition``, ``file_id``, ``base_instant``, ``base_file``, ``base_bytes``,
        ``log_files``, ``log_bytes``, ``is_latest``.
    """
    rows = []
    for group in load_file_groups(base_path):
        for sl in group.slices:
            rows.append(
                {
                    "partition": sl.partition_path,
                    "file_id": sl.file_id,
                    "base_instant": sl.base_instant,
                    "base_file": sl.base_file,
                    "base_bytes": sl.base_size,
                    "log_files": len(sl.log_files),
                    "log_bytes": sum(sl.log_sizes),
                    "is_latest": sl is group.latest,
                }
            )
    return pd.DataFrame(
        rows,
        columns=[
            "partition",
            "file_id",
            "base_instant",
            "base_file",
            "base_bytes",
            "log_files",
            "log_bytes",
            "is_latest",
        ],
    )


def table_size(base_path: str) -> pd.DataFrame:
    """Storage used: all data files, the latest slices only, and the ``.hoodie`` folder.

    Args:
        base_path: table base path.

    Returns:
        One row with ``data_bytes``, ``latest_slice_bytes``, ``timeline_bytes``, ``file_groups``,
        ``data_files``.
    """
    groups = load_file_groups(base_path)
    data_bytes = sum(sl.total_size for g in groups for sl in g.slices)
    latest = sum(g.latest.total_size for g in groups)
    files = sum((1 if sl.base_file else 0) + len(sl.log_files) for g in groups for sl in g.slices)
    timeline_bytes = 0
    for root, _dirs, names in os.walk(os.path.join(base_path, ".hoodie")):
        timeline_bytes += sum(os.path.getsize(os.path.join(root, n)) for n in names)
    return pd.DataFrame(
        [
            {
                "data_bytes": data_bytes,
                "latest_slice_bytes": latest,
                "timeline_bytes": timeline_bytes,
                "file_groups": len(groups),
                "data_files": files,
            }
        ]
    )
