"""The "workbook run" panel: seconds per notebook over the last finished runs, read from fake run
folders (run-summary.json as helpers.runner writes it), and its figure, empty state included."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from helpers.dashboard.figures import FIGURE_IDS, dashboard_figures, workbook_runs_figure
from helpers.dashboard.runs import RUN_COLUMNS, read_run_summary, workbook_runs
from helpers.errors import DashboardError
from helpers.runner import NotebookResult, RunResult, write_run_summary


def _run(runs: Path, name: str, seconds: dict[str, float], failed: str = "") -> Path:
    """A run folder with the summary the runner itself writes."""
    folder = runs / name
    folder.mkdir(parents=True)
    result = RunResult(env=name.rsplit("-", 1)[-1], run_dir=folder)
    for notebook, secs in seconds.items():
        ok = notebook != failed
        error = None if ok else "cell In [3]: ValueError: boom"
        result.notebooks.append(NotebookResult(notebook, folder / notebook, secs, ok, error))
    write_run_summary(result)
    return folder


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    """Three finished runs (one failed in 02), a run in progress, an interactive folder, a stray file."""
    root = tmp_path / "runs"
    _run(root, "20260102T090000Z-ci", {"01_enable_cdc.ipynb": 40.0, "02_capture.ipynb": 61.5})
    _run(root, "20260101T080000Z-local", {"01_enable_cdc.ipynb": 50.0, "02_capture.ipynb": 70.0})
    _run(
        root,
        "20260103T100000Z-ci",
        {"01_enable_cdc.ipynb": 39.0, "02_capture.ipynb": 5.25},
        failed="02_capture.ipynb",
    )
    (root / "20260104T110000Z-ci").mkdir()  # in progress: no summary yet
    (root / "20260104T110000Z-ci" / "01_enable_cdc.ipynb").write_text("{}")
    (root / "interactive-local").mkdir()
    (root / "notes.txt").write_text("not a run")
    return root


def test_runs_oldest_first_one_row_per_notebook(runs: Path) -> None:
    frame = workbook_runs(runs)
    assert tuple(frame.columns) == RUN_COLUMNS
    assert list(dict.fromkeys(frame["run"])) == [
        "20260101T080000Z-local",
        "20260102T090000Z-ci",
        "20260103T100000Z-ci",
    ]  # the run in progress and the interactive folder have no summary: left out
    assert frame["seconds"].tolist() == [50.0, 70.0, 40.0, 61.5, 39.0, 5.25]
    assert frame["notebook"].tolist()[:2] == ["01_enable_cdc.ipynb", "02_capture.ipynb"]
    assert frame["env"].tolist()[:2] == ["local", "local"]
    assert frame["ok"].tolist() == [True, True, True, True, True, False]
    assert frame["run_ok"].tolist() == [True, True, True, True, False, False]
    assert frame["started"].iloc[0] == pd.Timestamp("2026-01-01 08:00", tz="UTC")


def test_last_keeps_the_newest_runs(runs: Path) -> None:
    frame = workbook_runs(runs, last=2)
    assert list(dict.fromkeys(frame["run"])) == ["20260102T090000Z-ci", "20260103T100000Z-ci"]
    with pytest.raises(DashboardError, match="last=0"):
        workbook_runs(runs, last=0)


@pytest.mark.parametrize(
    "text",
    [
        "{not json",
        "[]",
        json.dumps({"env": "ci", "ok": True}),
        json.dumps({"env": "ci", "ok": True, "notebooks": [{"name": "01_a.ipynb", "seconds": "12"}]}),
        json.dumps(
            {"env": "ci", "ok": True, "notebooks": [{"name": "01_a.ipynb", "seconds": -1, "ok": True}]}
        ),
        json.dumps({"env": "ci", "ok": True, "notebooks": ["01_a.ipynb"]}),
    ],
    ids=["not-json", "not-an-object", "no-notebooks", "seconds-as-text", "negative-seconds", "bare-name"],
)
def test_a_malformed_summary_is_skipped_with_a_warning(runs: Path, text: str) -> None:
    """The bad run is left out (and does not count towards ``last``), the others still show."""
    bad = runs / "20260105T120000Z-ci"
    bad.mkdir()
    (bad / "run-summary.json").write_text(text)
    with pytest.warns(
        UserWarning, match=r"Skipped workbook run 20260105T120000Z-ci: Failed to read run summary"
    ):
        frame = workbook_runs(runs, last=2)
    assert list(dict.fromkeys(frame["run"])) == ["20260102T090000Z-ci", "20260103T100000Z-ci"]
    with pytest.raises(DashboardError, match="Failed to read run summary"):
        read_run_summary(bad / "run-summary.json")


def test_no_runs_folder_or_no_finished_run_gives_an_empty_frame(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        missing = workbook_runs(tmp_path / "nowhere")
        (tmp_path / "runs" / "20260101T000000Z-ci").mkdir(parents=True)
        only_in_progress = workbook_runs(tmp_path / "runs")
    for frame in (missing, only_in_progress):
        assert frame.empty and tuple(frame.columns) == RUN_COLUMNS


def test_a_folder_without_a_stamp_is_ordered_by_its_summary_time(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    custom = _run(root, "my-run", {"01_a.ipynb": 1.0})
    written = pd.Timestamp("2021-06-01 12:00", tz="UTC")
    os.utime(custom / "run-summary.json", (written.timestamp(), written.timestamp()))
    _run(root, "20200101T000000Z-ci", {"01_a.ipynb": 2.0})
    _run(root, "20220101T000000Z-ci", {"01_a.ipynb": 3.0})
    frame = workbook_runs(root)
    assert list(frame["run"]) == ["20200101T000000Z-ci", "my-run", "20220101T000000Z-ci"]
    assert frame["started"].iloc[1] == written


def _bars(fig: Any) -> dict[str, list[float]]:
    return {t.name: list(t.y) for t in fig.data if t.type == "bar"}


def test_figure_stacks_seconds_per_notebook_per_run(runs: Path) -> None:
    fig = workbook_runs_figure(workbook_runs(runs))
    assert fig.layout.barmode == "stack"
    assert _bars(fig) == {"01_enable_cdc.ipynb": [50.0, 40.0, 39.0], "02_capture.ipynb": [70.0, 61.5, 5.25]}
    order = ["20260101T080000Z-local", "20260102T090000Z-ci", "20260103T100000Z-ci"]
    assert list(fig.layout.xaxis.categoryarray) == order
    assert list(fig.layout.xaxis.ticktext) == [
        "2026-01-01 08:00 local",
        "2026-01-02 09:00 ci",
        "2026-01-03 10:00 ci<br>failed",
    ]
    capture = next(t for t in fig.data if t.name == "02_capture.ipynb")
    assert list(capture.marker.pattern.shape) == ["", "", "x"]  # the failed notebook is hatched
    assert list(capture.customdata) == ["ok", "ok", "failed"]
    (total,) = [t for t in fig.data if t.type == "scatter"]
    assert list(total.x) == order and np.allclose(total.y, [120.0, 101.5, 44.25])
    assert list(total.text) == ["2.0 min", "1.7 min", "0.7 min"]


def test_figure_empty_state_has_a_trace_and_a_message() -> None:
    """A page checker needs a trace in every figure: the empty state is one text trace."""
    fig = workbook_runs_figure(pd.DataFrame(columns=list(RUN_COLUMNS)))
    (trace,) = fig.data
    assert trace.mode == "text" and "No finished workbook run yet" in trace.text[0]
    assert fig.layout.xaxis.visible is False
    with pytest.raises(DashboardError, match=r"missing column\(s\) \['seconds'\]"):
        workbook_runs_figure(pd.DataFrame(columns=[c for c in RUN_COLUMNS if c != "seconds"]))


def test_dashboard_figures_end_with_the_runs_panel(runs: Path) -> None:
    customers = pd.DataFrame(
        {
            "customer_id": [1],
            "order_count": [1],
            "avg_quantity": [1.0],
            "avg_revenue": [2.0],
            "total_revenue": [2.0],
        }
    )
    datasets = {
        "customers": customers,
        "sales_by_category": pd.DataFrame({"catname": ["Pop"], "tickets": [1], "revenue": [1.0]}),
        "sales_by_day": pd.DataFrame({"sale_date": ["2008-01-01"], "tickets": [1], "revenue": [1.0]}),
    }
    health = pd.DataFrame(
        {
            "table": ["sale"],
            "commit_time": [pd.Timestamp("2026-01-01", tz="UTC")],
            "lag_s": [1.0],
            "newest_lag_s": [1.0],
            "rows_changed": [1],
        }
    )
    assert FIGURE_IDS[-1] == "fig-workbook-runs"
    shown = dashboard_figures(datasets, health, runs=workbook_runs(runs))["fig-workbook-runs"]
    assert len(_bars(shown)) == 2
    empty = dashboard_figures(datasets, health)["fig-workbook-runs"]
    assert [t.mode for t in empty.data] == ["text"]
