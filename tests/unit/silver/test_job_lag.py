"""The continuous job's lag report: listed again after a round that took files or failed, not
after an idle round (whose own listing found nothing new)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

import helpers.silver.job as job
from helpers.params import load_params


@pytest.fixture
def params(tmp_path: Any) -> Any:
    return load_params("ci", {"state_dir": str(tmp_path / "st"), "lake.bronze": str(tmp_path / "b")})


def test_an_idle_round_reports_nothing_pending_without_listing_again(params: Any, monkeypatch: Any) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(job, "pending_lag", lambda p, store=None: calls.append(p) or {"listed": True})
    idle = pd.DataFrame([{"table": t.name, "files": 0} for t in params.silver.tables])
    lag = job._lag_after(params, None, idle)
    assert calls == []
    assert set(lag) == {t.name for t in params.silver.tables}
    assert all(v == {"pending_files": 0, "oldest_pending_s": 0.0} for v in lag.values())


@pytest.mark.parametrize("files", [1, None])
def test_a_round_that_took_files_or_failed_lists_again(params: Any, monkeypatch: Any, files: Any) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(job, "pending_lag", lambda p, store=None: calls.append(p) or {"listed": True})
    result = None if files is None else pd.DataFrame([{"table": "sale", "files": files}])
    assert job._lag_after(params, None, result) == {"listed": True}
    assert calls == [params]
