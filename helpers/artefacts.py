"""Where a notebook's artefacts go, and the two calls every notebook makes on its tables."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from helpers.errors import CheckError
from helpers.params import WorkbookParams

__all__ = ["RUN_STAMP_FORMAT", "RUN_SUMMARY", "artefact_dir", "require_equal", "save"]

#: The file a finished workbook run writes into its run folder (``helpers.runner.write_run_summary``).
RUN_SUMMARY = "run-summary.json"

#: ``strftime`` format of the UTC start time that names a run folder: ``<stamp>-<env>``.
RUN_STAMP_FORMAT = "%Y%m%dT%H%M%SZ"


def artefact_dir(params: WorkbookParams, run_dir: str | Path = "") -> Path:
    """Folder where a notebook writes its artefacts (CSV tables, HTML figures).

    Args:
        params: workbook parameters (``runs_dir``).
        run_dir: the run folder the runner passes to every notebook; empty (a notebook opened
            by hand) means ``<runs_dir>/interactive-<environment>``.

    Returns:
        The folder, created if needed.
    """
    folder = (
        Path(run_dir) if str(run_dir) else params.path(params.runs_dir) / f"interactive-{params.environment}"
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def save(frame: pd.DataFrame, folder: Path, name: str) -> pd.DataFrame:
    """Write ``frame`` to ``<folder>/<name>.csv`` (no index) and return it, for display."""
    frame.to_csv(folder / f"{name}.csv", index=False)
    return frame


def require_equal(frame: pd.DataFrame, what: str, column: str = "equal") -> pd.DataFrame:
    """``frame`` unchanged when no row of ``column`` is false (None or NaN: not compared).

    Raises:
        CheckError: naming ``what`` and listing the rows that differ.
    """
    if column not in frame.columns:
        raise CheckError(f"Failed to verify {what}: the table has no {column!r} column")
    differ = frame[frame[column].map(lambda v: v is False or v == False)]  # noqa: E712 - numpy bools
    if len(differ):
        raise CheckError(f"Failed to verify {what}: these differ\n{differ.to_string(index=False)}")
    return frame
