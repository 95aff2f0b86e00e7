"""The continuous Silver job (DeltaStreamer's ``--continuous``): a background worker process.

:class:`SilverJob` starts ``python -m helpers.silver.job <directory>``, which runs
:func:`helpers.silver.ingest.ingest_all` in one long-lived Spark session until stopped and keeps a
``status.json``; :func:`pending_lag` counts the Bronze files not yet taken. The status fields and
what a ``kill -9`` does: ``docs/architecture.md``, "Silver ingestion".
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from helpers.bronze.store import BronzeStore
from helpers.bronze.watch import BronzeWatch
from helpers.errors import WorkbookError
from helpers.params import SilverParams, WorkbookParams
from helpers.proc import ModuleJob, read_status, stop_on_signal, write_status
from helpers.silver.hold import holders
from helpers.silver.ingest import ingest_all
from helpers.silver.streamer import run_streamer_job
from helpers.silver.tables import bronze_store, pending_bronze
from helpers.spark import build_spark_session

__all__ = [
    "REQUEST_CHECK_S",
    "REQUEST_NAME",
    "RETRY_MAX_S",
    "SilverJob",
    "main",
    "pause_between_rounds",
    "pending_lag",
    "round_interval",
]


@dataclass
class SilverJob(ModuleJob):
    """Start, stop and watch the continuous Silver job of a parameter set (the job process gets
    the same, already validated parameters; :class:`helpers.proc.ModuleJob` has the rest).

    Attributes:
        params: the workbook parameters.
    """

    params: WorkbookParams
    module: ClassVar[str] = "helpers.silver.job"
    pid_name: ClassVar[str] = "job.pid"
    log_name: ClassVar[str] = "job.log"

    @property
    def directory(self) -> Path:
        return self.params.state_path / "silver"

    def start(self) -> int:
        """Start the job unless it runs; returns its pid."""
        return self.launch(
            self.params.model_dump(mode="json", by_alias=True),
            {"state": "STARTING", "run_id": uuid.uuid4().hex, "loops": 0, "last_commit": {}, "error": None},
        )

    def request_round(self) -> None:
        """Ask the running job for a round now: it ends its pause within :data:`REQUEST_CHECK_S`
        instead of at the end of an idle pause (``silver.idle_interval_watched_s``). A held job
        serves the request once the hold ends; the streamer engine's job paces itself and ignores
        it."""
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / REQUEST_NAME).touch()


def pending_lag(params: WorkbookParams, store: Any = None) -> dict[str, Any]:
    """Per Silver table: Bronze files not yet ingested and the age in seconds of the oldest."""
    store = store or bronze_store(params)
    now = time.time()
    out = {}
    for table in params.silver.tables:
        pending, _ = pending_bronze(params, table, store)
        oldest = min((p.modified for p in pending), default=None)
        out[table.name] = {
            "pending_files": len(pending),
            "oldest_pending_s": round(now - oldest, 3) if oldest else 0.0,
        }
    return out


def _took_files_or_failed(result: Any) -> bool:
    """Whether a round (:func:`ingest_all`'s frame; None: it failed) took a file or failed."""
    return result is None or (not result.empty and bool(int(result["files"].sum())))


def _lag_after(params: WorkbookParams, store: Any, result: Any) -> dict[str, Any]:
    """The lag to report after a round: listed again (:func:`pending_lag`) when the round took
    files or failed; a round whose listing found nothing new in any table has nothing pending as
    of that listing, and an idle loop lists Bronze once, not twice."""
    if _took_files_or_failed(result):
        return pending_lag(params, store)
    return {t.name: {"pending_files": 0, "oldest_pending_s": 0.0} for t in params.silver.tables}


#: the file in the job's folder that asks for a round now (:meth:`SilverJob.request_round`)
REQUEST_NAME = "round.request"
#: how often a pause between two rounds looks for a request
REQUEST_CHECK_S = 0.5


def pause_between_rounds(
    watch: BronzeWatch, seconds: float, stopping: Any, request: Path, *, on_landing: bool = True
) -> None:
    """Sleep up to ``seconds``; less when a round is requested, the job is asked to stop or (with
    ``on_landing``) a Bronze file lands."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0 and not stopping.is_set():
        if request.exists():
            return
        if on_landing:
            if watch.wait(min(left, REQUEST_CHECK_S), stop=stopping):
                return
        else:
            stopping.wait(min(left, REQUEST_CHECK_S))


#: The longest pause after failed rounds (:func:`round_interval`).
RETRY_MAX_S = 30.0


def round_interval(silver: SilverParams, quiet_s: float, watching: bool = False, failures: int = 0) -> float:
    """Seconds from one round's start to the next: ``silver.min_interval_s``, or once no round
    took a file for ``silver.idle_after_s`` ``silver.idle_interval_s`` (never less), or
    ``silver.idle_interval_watched_s`` while Bronze's file notices wake the job (``watching``): a
    landing ends the pause at once, so an idle round then only looks for a file whose notice never
    came.

    After ``failures`` failed rounds in a row, ``silver.min_interval_s`` doubled that many times, up
    to :data:`RETRY_MAX_S`: an error that stays (a refused Bronze zone, a marker over set-aside
    events, a full disk) is tried again less and less often instead of a Spark job every
    ``silver.min_interval_s``, and a landing file does not cut that pause short (the job's loop)."""
    if failures:
        return float(min(RETRY_MAX_S, silver.min_interval_s * 2**failures))
    if quiet_s >= silver.idle_after_s:
        idle = silver.idle_interval_watched_s if watching else silver.idle_interval_s
        return max(silver.min_interval_s, idle)
    return silver.min_interval_s


def run(directory: Path) -> int:
    """The job's loop (the worker process)."""
    params = WorkbookParams.model_validate(json.loads((directory / "config.json").read_text()))
    if params.silver.engine == "streamer":
        return run_streamer_job(params, directory)
    previous = read_status(directory)
    stopping = stop_on_signal()
    status: dict[str, Any] = {
        "state": "STARTING",
        "pid": os.getpid(),
        "run_id": previous.get("run_id") or uuid.uuid4().hex,
        "loops": 0,
        "last_commit": {},
        "error": None,
    }
    write_status(directory, status)
    job_spark = params.spark.model_copy(update={"driver_memory": params.silver.job_driver_memory})
    spark = build_spark_session(
        params.model_copy(update={"spark": job_spark}), app_name="workbook-silver-job"
    )
    store = bronze_store(params)
    status["state"] = "RUNNING"
    with BronzeWatch(store.root, enabled=params.silver.watch_bronze) as watch:
        _loop(params, directory, spark, store, status, stopping, watch)
    status["state"] = "STOPPED"
    write_status(directory, status)
    return 0


def _loop(
    params: WorkbookParams,
    directory: Path,
    spark: Any,
    store: BronzeStore,
    status: dict[str, Any],
    stopping: Any,
    watch: BronzeWatch,
) -> None:
    """Rounds until stopped; between two rounds the pause of :func:`round_interval`, cut short by
    a Bronze file landing in a local Bronze folder (:class:`helpers.bronze.watch.BronzeWatch`) or
    a requested round (:meth:`SilverJob.request_round`).
    While another process holds the job (:mod:`helpers.silver.hold`) it skips its rounds and looks
    again every ``silver.min_interval_s``; the status names the holder."""
    last_taken = time.monotonic()  # the last round that took a file or failed
    failures = 0  # failed rounds in a row (the pause grows with them)
    while not stopping.is_set():
        watch.start()  # a no-op once watching; the folder may appear after the job starts
        started = time.monotonic()
        held = holders(directory)
        if held or status.get("held_by"):
            status["held_by"] = [f"pid {h.get('pid')}: {h.get('reason', '')}" for h in held] or None
            write_status(directory, status)
        if held:
            stopping.wait(params.silver.min_interval_s)
            continue
        (directory / REQUEST_NAME).unlink(missing_ok=True)  # served by this round
        watch.take()  # so are the files landed so far: only a later landing ends the next pause
        result = None
        try:
            result = ingest_all(params, spark=spark)
            for row in result.itertuples():
                if row.instant:
                    status["last_commit"][row.table] = {
                        "instant": row.instant,
                        "events": int(row.events),
                        "at": time.time(),
                        "seconds": round(float(row.seconds), 3),
                        "write_seconds": round(float(row.write_seconds), 3),
                    }
            status["error"] = None
            failures = 0
        except WorkbookError as exc:
            status["error"] = str(exc)
            failures += 1
        status["loops"] += 1
        status["lag"] = _lag_after(params, store, result)  # result: None when the round failed
        if _took_files_or_failed(result):
            last_taken = time.monotonic()
        quiet = time.monotonic() - last_taken
        interval = round_interval(params.silver, quiet, watching=watch.active, failures=failures)
        status["interval_s"] = interval
        status["watching"] = watch.active
        write_status(directory, status)
        pause_between_rounds(
            watch,
            interval - (time.monotonic() - started),
            stopping,
            directory / REQUEST_NAME,
            on_landing=not failures,
        )


def main(argv: list[str] | None = None) -> int:
    """Entry point: ``python -m helpers.silver.job <directory>``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m helpers.silver.job <directory>", file=sys.stderr)
        return 2
    return run(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
