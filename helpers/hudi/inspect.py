"""Table inspection: timeline with per-commit counts, file groups and slices, table size."""

from __future__ import annotations

import datetime as dt
import os

import pandas as pd

from helpers.hudi.read import open_table
from helpers.hudi.timeline import DATA_ACTIONS, list_instants, read_commit_metadata, write_stats

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
            for s in write_stats(meta):
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
    """The latest file slice of every file group, as the official reader (hudi-rs) plans them.

    Args:
        base_path: table base path.

    Returns:
        Columns ``partition``, ``file_id``, ``base_instant``, ``base_file``, ``base_bytes``,
        ``log_files``, ``log_bytes``, ``records``.
    """

    rows = []
    if list_instants(base_path):
        for sl in open_table(base_path).get_file_slices():
            rows.append(
                {
                    "partition": sl.partition_path,
                    "file_id": sl.file_id,
                    "base_instant": sl.creation_instant_time,
                    "base_file": sl.base_file_name,
                    "base_bytes": int(sl.base_file_size or 0),
                    "log_files": len(sl.log_file_names or []),
                    "log_bytes": int(sum(sl.log_file_sizes or [])),
                    "records": int(sl.num_records or 0),
                }
            )
    columns = [
        "partition",
        "file_id",
        "base_instant",
        "base_file",
        "base_bytes",
        "log_files",
        "log_bytes",
        "records",
    ]
    return pd.DataFrame(rows, columns=columns)


def table_size(base_path: str) -> pd.DataFrame:
    """Storage used by a local table: every data file, the latest slices only, the timeline.

    Args:
        base_path: table base path.

    Returns:
        One row with ``data_bytes`` (every base and log file, older slices included),
        ``latest_slice_bytes``, ``timeline_bytes``, ``file_groups``, ``data_files``.
    """
    groups = table_file_groups(base_path)
    data_bytes = timeline_bytes = files = 0
    for root, dirs, names in os.walk(base_path):
        inside = os.path.relpath(root, base_path).split(os.sep)[0] == ".hoodie"
        for name in names:
            size = os.path.getsize(os.path.join(root, name))
            if inside:
                timeline_bytes += size
            elif name.endswith(".parquet") or ".log." in name:
                data_bytes += size
                files += 1
        dirs[:] = [d for d in dirs if not (root == base_path and d.startswith(".") and d != ".hoodie")]
    latest = int((groups["base_bytes"] + groups["log_bytes"]).sum()) if len(groups) else 0
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
