"""What an idle continuous job costs: its pause between rounds grows once nothing new has come for
a while and shrinks with the first new file, and a round with nothing new takes no table lock."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from helpers.params import load_params
from helpers.silver.ingest import ingest_table
from helpers.silver.job import round_interval
from helpers.silver.tables import table_lock


@pytest.fixture
def params(tmp_path: Any) -> Any:
    return load_params(
        "ci",
        {
            "state_dir": str(tmp_path / "st"),
            "lake.bronze": str(tmp_path / "bronze"),
            "lake.silver": str(tmp_path / "silver"),
        },
    )


def test_the_pause_is_the_short_one_until_the_job_has_been_quiet_for_idle_after_s(params: Any) -> None:
    pacing = {"min_interval_s": 0.5, "idle_after_s": 60.0, "idle_interval_s": 2.0}
    silver = params.silver.model_copy(update=pacing)
    assert round_interval(silver, 0.0) == 0.5
    assert round_interval(silver, 59.9) == 0.5
    assert round_interval(silver, 60.0) == 2.0
    assert round_interval(silver, 3600.0) == 2.0


def test_an_idle_pause_is_never_shorter_than_min_interval_s(params: Any) -> None:
    pacing = {"min_interval_s": 5.0, "idle_after_s": 0.0, "idle_interval_s": 2.0}
    silver = params.silver.model_copy(update=pacing)
    assert round_interval(silver, 0.0) == 5.0


def test_a_round_with_nothing_new_returns_while_another_writer_holds_the_lock(params: Any) -> None:
    table = next(t for t in params.silver.tables if t.name == "category")
    results: list[Any] = []
    with table_lock(params, table):  # another writer, mid-commit
        # spark=object(): a round that found nothing must not touch Spark either
        worker = threading.Thread(
            target=lambda: results.append(ingest_table(params, table, spark=object())), daemon=True
        )
        worker.start()
        worker.join(60)  # the lock is held for good here: a round that waited for it never returns
        assert not worker.is_alive(), "an idle round waited for the table lock"
    assert [(r.table, r.files, r.events, r.instant) for r in results] == [("category", 0, 0, None)]
