"""The dashboard's "workbook run" dataset: seconds per notebook over the last finished runs.

Pure over the files: each run folder ``<runs_dir>/<UTC stamp>-<env>/`` holds the
``run-summary.json`` :func:`helpers.runner.write_run_summary` writes when the run ends, so the run
in progress (and a notebook opened by hand, ``interactive-<env>/``) has none and is left out.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
import warnings
from pathlib import Path
from typing import Any

import pandas as pd

from helpers.artefacts import RUN_STAMP_FORMAT, RUN_SUMMARY
from helpers.errors import DashboardError

__all__ = ["RUN_COLUMNS", "read_run_summary", "workbook_runs"]

#: Columns of :func:`workbook_runs`: one row per notebook of a run.
RUN_COLUMNS: tuple[str, ...] = ("run", "started", "env", "run_ok", "notebook", "seconds", "ok")

_STAMPED = re.compile(r"^(\d{8}T\d{6}Z)-(.+)$")


def _started(folder: Path, summary: Path) -> dt.datetime:
    """The run's start from its folder name, else the summary's modification time (both UTC)."""
    match = _STAMPED.match(folder.name)
    if match:
        try:
            return dt.datetime.strptime(match.group(1), RUN_STAMP_FORMAT).replace(tzinfo=dt.UTC)
        except ValueError:
            pass
    return dt.datetime.fromtimestamp(summary.stat().st_mtime, dt.UTC)


def read_run_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and check one ``run-summary.json``.

    Args:
        path: The file.

    Returns:
        ``{"env": str, "ok": bool, "notebooks": [{"name": str, "seconds": float, "ok": bool}, ...]}``.

    Raises:
        DashboardError: naming the file, when it cannot be read, is not JSON or lacks a field.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DashboardError(f"Failed to read run summary {path}: {exc}") from exc
    notebooks = data.get("notebooks") if isinstance(data, dict) else None
    if not isinstance(notebooks, list) or not isinstance(data.get("ok"), bool):
        raise DashboardError(f"Failed to read run summary {path}: no 'ok' flag and 'notebooks' list")
    checked = []
    for index, entry in enumerate(notebooks):
        fields = entry if isinstance(entry, dict) else {}
        name, seconds, ok = fields.get("name"), fields.get("seconds"), fields.get("ok")
        if not (
            isinstance(name, str)
            and isinstance(seconds, int | float)
            and not isinstance(seconds, bool)
            and math.isfinite(seconds)
            and seconds >= 0
            and isinstance(ok, bool)
        ):
            raise DashboardError(
                f"Failed to read run summary {path}: notebook {index} needs a name, "
                f"seconds (a finite number >= 0) and an ok flag, got {entry!r}"
            )
        checked.append({"name": name, "seconds": float(seconds), "ok": ok})
    return {"env": str(data.get("env", "")), "ok": data["ok"], "notebooks": checked}


def workbook_runs(runs_dir: str | os.PathLike[str], last: int = 10) -> pd.DataFrame:
    """Seconds per notebook of the last finished workbook runs in ``runs_dir``, oldest run first.

    A folder without ``run-summary.json`` (the run in progress, an interactive folder) is left out
    silently; a summary that cannot be read is skipped with a :class:`UserWarning` naming it.

    Args:
        runs_dir: The runs folder (``params.path(params.runs_dir)``); missing means no runs.
        last: How many of the newest readable runs to keep (by start time, the folder's stamp).

    Returns:
        The columns of :data:`RUN_COLUMNS`: the run folder's name, its start (UTC), the ``env``,
        whether the whole run succeeded, then per notebook (in run order) its file name, seconds
        and ``ok``. Empty (same columns) when no run has finished.

    Raises:
        DashboardError: when ``last`` is not positive.
    """
    if last < 1:
        raise DashboardError(f"Failed to list workbook runs: last={last} must be >= 1")
    root = Path(runs_dir)
    found = []
    if root.is_dir():
        for folder in root.iterdir():
            summary = folder / RUN_SUMMARY
            if folder.is_dir() and summary.is_file():
                found.append((_started(folder, summary), folder.name, summary))
    rows: list[dict[str, Any]] = []
    kept = 0
    for started, name, summary in sorted(found, reverse=True):  # newest first, until enough
        if kept == last:
            break
        try:
            run = read_run_summary(summary)
        except DashboardError as exc:
            warnings.warn(f"Skipped workbook run {name}: {exc}", UserWarning, stacklevel=2)
            continue
        kept += 1
        rows[:0] = [
            {
                "run": name,
                "started": pd.Timestamp(started),
                "env": run["env"],
                "run_ok": run["ok"],
                "notebook": notebook["name"],
                "seconds": notebook["seconds"],
                "ok": notebook["ok"],
            }
            for notebook in run["notebooks"]
        ]
    frame = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    frame["started"] = pd.to_datetime(frame["started"], utc=True)
    return frame.astype({"seconds": "float64", "ok": "bool", "run_ok": "bool"})
