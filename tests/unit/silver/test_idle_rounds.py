"""What an idle continuous job costs: its pause between rounds grows once nothing new has come for
a while and shrinks with the first new file, and a round with nothing new takes no table lock."""

from __future__ import annotations

import threading
import time
from typing import Any

import pandas as pd
import pytest

from helpers.bronze.events import marker_event
from helpers.bronze.watch import BronzeWatch
from helpers.bronze.writer import BronzeWriter
from helpers.params import load_params
from helpers.silver import job as job_module
from helpers.silver.ingest import ingest_table
from helpers.silver.job import (
    REQUEST_CHECK_S,
    REQUEST_NAME,
    RETRY_MAX_S,
    SilverJob,
    pause_between_rounds,
    round_interval,
)
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


def test_an_idle_pause_is_the_long_one_while_bronze_notices_wake_the_job(params: Any) -> None:
    pacing = {
        "min_interval_s": 0.5,
        "idle_after_s": 60.0,
        "idle_interval_s": 2.0,
        "idle_interval_watched_s": 15.0,
    }
    silver = params.silver.model_copy(update=pacing)
    assert round_interval(silver, 0.0, watching=True) == 0.5  # not idle: as without notices
    assert round_interval(silver, 60.0, watching=True) == 15.0
    assert round_interval(silver, 60.0, watching=False) == 2.0  # S3, or the watch could not start


def test_a_pause_ends_when_a_round_is_requested_and_the_round_takes_the_request(
    params: Any, tmp_path: Any, monkeypatch: Any
) -> None:
    directory = tmp_path / "job"
    directory.mkdir()
    job = SilverJob(params.model_copy(update={"state_dir": str(tmp_path / "st")}))
    monkeypatch.setattr(SilverJob, "directory", property(lambda self: directory))
    stopping = threading.Event()
    with BronzeWatch(tmp_path / "bronze", enabled=False) as watch:  # no notices: only the request
        threading.Timer(0.3, job.request_round).start()
        started = time.monotonic()
        pause_between_rounds(watch, 60.0, stopping, directory / REQUEST_NAME)
        # ended at a look for the request (every REQUEST_CHECK_S), not after the minute's pause;
        # the bound is loose for a busy two-core machine
        assert time.monotonic() - started < 0.3 + 20 * REQUEST_CHECK_S
    assert (directory / REQUEST_NAME).exists()  # the pause only ends; the next round takes it

    # in the loop, pausing a minute between rounds: a request made during a round (as the first
    # round here does) ends the pause after it; each round removes the request as it begins
    slow = params.model_copy(update={"silver": params.silver.model_copy(update={"min_interval_s": 60.0})})
    rounds: list[bool] = []

    def one_round(p: Any, spark: Any = None) -> pd.DataFrame:
        rounds.append((directory / REQUEST_NAME).exists())
        if len(rounds) == 1:
            job.request_round()
        else:
            stopping.set()
        return pd.DataFrame([{"table": "category", "files": 0, "instant": None}])

    monkeypatch.setattr(job_module, "ingest_all", one_round)
    status: dict[str, Any] = {"state": "RUNNING", "loops": 0, "last_commit": {}}
    started = time.monotonic()
    with BronzeWatch(tmp_path / "bronze", enabled=False) as watch:
        job_module._loop(slow, directory, None, None, status, stopping, watch)  # type: ignore[arg-type]
    assert rounds == [False, False]
    assert status["loops"] == 2
    assert time.monotonic() - started < 30  # not the minute's pause


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


def test_after_failed_rounds_the_pause_doubles_up_to_retry_max_s(params: Any) -> None:
    """An error that stays (a refused Bronze zone, a marker over set-aside events) is tried again
    less and less often; a round that works brings the usual pacing back (failures 0)."""
    silver = params.silver.model_copy(update={"min_interval_s": 0.5, "idle_after_s": 60.0})
    assert [round_interval(silver, 0.0, failures=n) for n in (0, 1, 2, 3)] == [0.5, 1.0, 2.0, 4.0]
    assert round_interval(silver, 3600.0, watching=True, failures=20) == RETRY_MAX_S


def test_a_pause_after_a_failed_round_is_not_cut_short_by_a_landing_file(tmp_path: Any) -> None:
    """A landing would only repeat the failing round; a requested round or a stop still ends it."""
    writer = BronzeWriter(tmp_path / "bronze", "avro")
    (tmp_path / "bronze").mkdir()
    stopping = threading.Event()
    request = tmp_path / REQUEST_NAME
    event = [marker_event("tickit.ems.t", "resnapshot", "t", {"__lsn": 1}, 1_767_225_600_000)]
    with BronzeWatch(tmp_path / "bronze") as watch:
        assert watch.active
        threading.Timer(0.2, lambda: writer.write_batch(event)).start()
        started = time.monotonic()
        pause_between_rounds(watch, 1.5, stopping, request, on_landing=False)
        assert time.monotonic() - started >= 1.4  # the landing did not end it
        assert watch.wait(5.0)  # the landing was noticed, for the round after the pause
        threading.Timer(0.2, request.touch).start()
        started = time.monotonic()
        pause_between_rounds(watch, 30.0, stopping, request, on_landing=False)
        assert time.monotonic() - started < 0.2 + 20 * REQUEST_CHECK_S  # loose: a busy machine
