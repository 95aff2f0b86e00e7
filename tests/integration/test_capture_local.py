"""Capture with real servers and real Debezium: snapshot, ordering, kill -9, failures.

A module-scoped local stack (PostgreSQL and MariaDB on free loopback ports) loaded with the CI
TICKIT sample and CDC enabled as notebook 01 does; the four embedded connectors are registered
as notebook 02 does, with Bronze in a temporary directory. A ``kill -9`` of a capture worker while
rows are committed is in ``test_faults.py``, checked in Bronze and in Silver.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from support.pipeline import Capture, own_job_params
from support.threads import RaisingThread
from support.timer_slack import timer_slack_ns

from helpers.bronze.events import position_of
from helpers.capture import read_bronze
from helpers.capture.backends import wait_until_running
from helpers.capture.owner import OWNER_FILE, state_id
from helpers.errors import CaptureError
from helpers.poll import wait_until
from helpers.proc import live_pid
from helpers.sources.connect import max_value

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def norm(value: Any) -> Any:
    """Bronze decodes timestamps as aware UTC datetimes; the sources hold naive UTC values."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def key_of(row: dict[str, Any], columns: list[str]) -> tuple[Any, ...]:
    return tuple(row[c] for c in columns)


def test_snapshot_rows_arrive_as_r_and_equal_every_source_table(capture: Capture) -> None:
    """Every table of every source: the initial snapshot's op=r events in Bronze equal the rows
    the table held when the connectors started, row by row (count and every column), once each.

    The initial snapshot is one consistent read at one log position, which every one of its
    events carries; a later re-snapshot (another module's test, on this shared pipeline) reads
    at later positions, so the test holds whichever modules ran before it."""
    for topic, expected in capture.initial_rows.items():
        columns = list(expected[0]) if expected else []

        def snapshot(t: str = topic) -> list[dict[str, Any]]:
            reads = [r for r in read_bronze(capture.bronze, t) if r["__op"] == "r"]
            return [r for r in reads if position_of(r) == position_of(reads[0])] if reads else []

        n = len(expected)
        got = wait_until(
            lambda n=n, s=snapshot: len(s()) >= n and s(), timeout_s=120, what=f"snapshot of {topic}"
        )
        assert len(got) == len(expected), topic
        # jsonb arrives as its JSON text (io.debezium.data.Json): compare parsed
        parsed = {c for c in columns if any(isinstance(r[c], dict | list) for r in expected)}

        def cell(r: dict[str, Any], c: str, parsed: set[str] = parsed) -> Any:
            return json.loads(r[c]) if c in parsed and isinstance(r[c], str) else norm(r[c])

        want = sorted((tuple(norm(r[c]) for c in columns) for r in expected), key=repr)
        have = sorted((tuple(cell(r, c) for c in columns) for r in got), key=repr)
        assert have == want, topic
        assert {r["__deleted"] for r in got} == {"false"}


def fresh_key(capture: Capture, source: str, table: str, column: str, topic: str) -> int:
    """A key no row of the table has, nor had: one past the largest at the source and in the
    topic's Bronze (other tests of this shared pipeline insert and delete keys of their own)."""
    in_bronze = [r[column] for r in read_bronze(capture.bronze, topic) if r.get(column) is not None]
    return max([int(max_value(capture.stack.params, source, table, column) or 0), *in_bronze]) + 1


@pytest.mark.parametrize("source", ["ems", "ecomm"])
def test_insert_updates_delete_arrive_in_order_per_key(capture: Capture, source: str) -> None:
    """c, u, u, d of one key arrive in that order with increasing log positions and the values
    each statement wrote; the delete is a row with __deleted=true."""
    sp = capture.stack.params.source(source)
    if sp.engine == "postgres":
        topic, key_col = "tickit.ems.category", "catid"
        key = fresh_key(capture, source, "category", key_col, topic)
        with capture.stack.connect_postgres(sp.database, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO ems.category (catid, catgroup, catname, catdesc) VALUES (%s, 'G', 'n0', 'd')",
                (key,),
            )
            for name in ("n1", "n2"):
                conn.execute("UPDATE ems.category SET catname = %s WHERE catid = %s", (name, key))
            conn.execute("DELETE FROM ems.category WHERE catid = %s", (key,))
        field, values = "catname", ["n0", "n1", "n2", "n2"]
    else:
        topic, key_col = "tickit.ecomm.sale", "salesid"
        key = fresh_key(capture, source, "sale", key_col, topic)
        conn2 = capture.stack.connect_mariadb(sp.database, autocommit=True)
        try:
            with conn2.cursor() as cur:
                cur.execute(
                    "INSERT INTO sale (salesid, listid, sellerid, buyerid, eventid, dateid, qtysold,"
                    " pricepaid, commission, saletime) SELECT %s, listid, sellerid, buyerid, eventid,"
                    " dateid, 1, 10.05, 1.51, saletime FROM sale ORDER BY salesid LIMIT 1",
                    (key,),
                )
                for qty in (2, 3):
                    cur.execute("UPDATE sale SET qtysold = %s WHERE salesid = %s", (qty, key))
                cur.execute("DELETE FROM sale WHERE salesid = %s", (key,))
        finally:
            conn2.close()
        field, values = "qtysold", [1, 2, 3, 3]

    def events() -> list[dict[str, Any]]:
        rows = [r for r in read_bronze(capture.bronze, topic) if r.get(key_col) == key]
        return rows if len(rows) >= 4 else []

    rows = wait_until(events, timeout_s=30, what=f"4 changes of key {key} on {topic}")
    rows.sort(key=position_of)
    assert [r["__op"] for r in rows] == ["c", "u", "u", "d"]
    assert [r[field] for r in rows] == values
    assert [r["__deleted"] for r in rows] == ["false", "false", "false", "true"]
    assert len({position_of(r) for r in rows}) == 4


def test_wrong_password_and_missing_table_fail_fast_with_the_database_message(capture: Capture) -> None:
    """A misconfigured connector turns FAILED within seconds and says why in the server's words."""
    ems = capture.specs["ems"]
    ecomm = capture.specs["ecomm"]
    bad = [
        (
            dataclasses.replace(
                ems,
                name="tickit-badpw",
                config={**ems.config, "name": "tickit-badpw", "database.password": "wrong"},
            ),
            "password authentication failed",
        ),
        (
            dataclasses.replace(ems, name="tickit-notable", topics={"ems.nope": "tickit.ems.nope"}),
            'relation "ems.nope" does not exist',
        ),
        (
            dataclasses.replace(
                ecomm,
                name="tickit-badpw-m",
                config={**ecomm.config, "name": "tickit-badpw-m", "database.password": "wrong"},
            ),
            "Access denied",
        ),
    ]
    try:
        for spec, message in bad:
            started = time.monotonic()
            capture.backend.create_or_update(spec)
            with pytest.raises(CaptureError, match=message):
                wait_until_running(capture.backend, spec.name, timeout_s=30)
            assert time.monotonic() - started < 30
            status = capture.backend.status(spec.name)
            assert status.state == "FAILED" and message in (status.error or "")
            log = (capture.backend.directory(spec.name) / "worker.log").read_text(errors="replace")
            assert "wrong" not in (status.error or "") and "password=wrong" not in log
    finally:
        for spec, _ in bad:
            capture.backend.delete(spec.name)


def test_a_second_state_directory_is_refused_the_pipeline_s_bronze(capture: Capture, tmp_path: Path) -> None:
    """Registration claimed the Bronze zone for the pipeline's state directory (its owner file names
    it). The same connector from a state directory of its own, as after ``.state`` was deleted
    with the lake kept, is refused before any worker starts, naming both directories: no
    configuration, status or offsets of it appear. The pipeline's own backend goes on."""
    state = capture.stack.params.state_path
    owner = json.loads((capture.bronze / OWNER_FILE).read_text())
    assert owner == {"state_id": state_id(state), "state_dir": str(state.resolve())}
    new_state = tmp_path / "new-state"
    other = dataclasses.replace(capture.backend, state_dir=new_state)
    ems = capture.specs["ems"]
    with pytest.raises(CaptureError) as refused:
        other.create_or_update(ems)
    assert f"({state.resolve()}) wrote it, not this one ({new_state.resolve()})" in str(refused.value)
    assert not other.directory(ems.name).exists()
    assert json.loads((capture.bronze / OWNER_FILE).read_text()) == owner
    capture.backend.create_or_update(ems)  # its own state: the same configuration, still running
    assert wait_until_running(capture.backend, ems.name, timeout_s=30).state == "RUNNING"


def test_worker_logs_and_status_never_hold_the_password(capture: Capture) -> None:
    """The real password is in the 0600 config file only; never in logs or status files."""
    secrets = {
        capture.stack.credentials.postgres_password.get_secret_value(),
        capture.stack.credentials.mariadb_password.get_secret_value(),
    }
    for spec in capture.specs.values():
        d = capture.backend.directory(spec.name)
        assert (d / "config.json").stat().st_mode & 0o077 == 0
        for name in ("worker.log", "status.json"):
            text = (d / name).read_text(errors="replace")
            assert not any(s in text for s in secrets), f"{spec.name}/{name}"


def test_each_running_worker_waits_with_the_configured_timer_slack(capture: Capture) -> None:
    """``capture.timer_slack_us`` reaches each worker process, set before its JVM started (the
    JVM's threads inherit it: ``tests/unit/foundation/test_timer_slack.py``)."""
    for spec in capture.specs.values():
        d = capture.backend.directory(spec.name)
        assert json.loads((d / "config.json").read_text())["timer_slack_us"] == 2000
        pid = live_pid(d / "worker.pid")
        assert pid is not None, spec.name
        assert timer_slack_ns(pid) == 2_000_000, spec.name


@pytest.mark.parametrize(
    "scenario",
    [
        "deletes_postgres",
        "delete_reinsert_postgres",
        "rapid_updates_mariadb",
        "partition_move_mariadb",
        "add_column_postgres",
        "exact_values_mariadb",
        "burst_postgres",
    ],
)
def test_scripted_edge_cases_reach_bronze_and_replay_to_the_source(capture: Capture, scenario: str) -> None:
    """Each scripted edge case: its changes arrive, and replaying Bronze by log position gives
    back the source table exactly (deletes, re-inserts, same-second updates, a moved partition
    value, a new column, extreme decimals, a burst)."""
    from helpers.checks.parity import bronze_vs_source
    from helpers.sources.edge_cases.catalogue import apply_edge_case

    result = apply_edge_case(capture.stack.params, scenario)
    assert result.statements and result.keys
    specs = [s for s in capture.specs.values() if result.topic in s.topics.values()]
    check = bronze_vs_source(capture.stack.params, specs, wait_s=30)
    row = check[check["topic"] == result.topic].iloc[0]
    assert bool(row["equal"]), f"{scenario}: {row.to_dict()}"


def test_toast_placeholder_is_visible_in_bronze_for_silver_to_handle(capture: Capture) -> None:
    """Edge case 7 at the Bronze level, stated as measured: with REPLICA IDENTITY FULL the update
    that leaves a large text value untouched carries the full value, so Bronze alone replays it."""
    from helpers.sources.edge_cases.catalogue import apply_edge_case

    result = apply_edge_case(capture.stack.params, "toast_full_identity_postgres")
    key = result.keys[0]

    def updates() -> list[dict[str, Any]]:
        return [
            r for r in read_bronze(capture.bronze, result.topic) if r["eventid"] == key and r["__op"] == "u"
        ]

    rows = wait_until(updates, timeout_s=30, what="the TOAST update")
    assert rows[-1]["eventname"] == "x" * 20_000


def test_toast_placeholders_keep_the_stored_value_in_silver(capture: Capture) -> None:
    """Edge case 7 without full row images (REPLICA IDENTITY DEFAULT): updates that leave a
    12.8 kB out-of-line value untouched carry Debezium's placeholder (checked in Bronze first);
    Silver keeps the real value, taken from an earlier event of the same batch, and in a later
    batch from the stored row."""
    from helpers.bronze.events import UNAVAILABLE_VALUE
    from helpers.checks.parity import silver_vs_source
    from helpers.silver.ingest import ingest_all
    from helpers.sources.edge_cases.catalogue import apply_edge_case

    params = capture.stack.params
    ingest_all(params, ["event"])
    result = apply_edge_case(params, "toast_postgres")
    key = result.keys[0]

    def updates(count: int) -> Callable[[], list[dict[str, Any]] | None]:
        def rows() -> list[dict[str, Any]] | None:
            found = [
                r
                for r in read_bronze(capture.bronze, result.topic)
                if r["eventid"] == key and r["__op"] == "u"
            ]
            return found if len(found) >= count else None

        return rows

    rows = wait_until(updates(2), timeout_s=30, what="the two TOAST updates")
    assert [r["eventname"] for r in rows] == [UNAVAILABLE_VALUE] * 2
    first = ingest_all(params, ["event"]).iloc[0]
    assert (first["unavailable_filled"], first["unavailable_unresolved"]) == (2, 0)
    assert silver_vs_source(params, ["event"])["equal"].all()

    db = params.source("ems").database
    with capture.stack.connect_postgres(db, autocommit=True) as conn:
        conn.execute("ALTER TABLE ems.event REPLICA IDENTITY DEFAULT")
        conn.execute("UPDATE ems.event SET venueid = venueid WHERE eventid = %s", (key,))
        conn.execute("ALTER TABLE ems.event REPLICA IDENTITY FULL")
    rows = wait_until(updates(3), timeout_s=30, what="the third TOAST update")
    assert rows[-1]["eventname"] == UNAVAILABLE_VALUE
    second = ingest_all(params, ["event"]).iloc[0]
    assert (second["unavailable_filled"], second["unavailable_unresolved"]) == (1, 0)
    check = silver_vs_source(params, ["event"])
    assert check["equal"].all(), check


def test_continuous_silver_job_survives_kill_9_mid_commit(capture: Capture, tmp_path: Path) -> None:
    """The continuous job keeps Silver equal to the source; killed with SIGKILL while it ingests a
    burst of changes, then restarted, it catches up: no change lost, none applied twice (an
    interrupted commit is rolled back and its Bronze files taken again). The kill is sent the
    moment a Copy-on-Write commit of ``category`` is in flight, and that is checked. The job has a
    Silver root and state folder of its own with ``category`` only (test_faults.py kills a
    Merge-on-Read delta commit the same way), so the shared pipeline's Silver stays as it was.

    Its pause between rounds is 90 s, longer than the wait for the burst's commit: only the
    landing of the burst's Bronze files wakes it in time (:mod:`helpers.bronze.watch`)."""
    from helpers.checks.parity import silver_vs_source
    from helpers.hudi.timeline import pending_instants
    from helpers.silver.job import SilverJob
    from helpers.silver.tables import table_config
    from helpers.sources.edge_cases.catalogue import apply_edge_case

    base = capture.stack.params
    pause = {"min_interval_s": 90.0, "idle_interval_s": 90.0}
    params, job_params = own_job_params(base, "category", tmp_path, **pause)
    job = SilverJob(job_params)
    writer: RaisingThread | None = None
    job.start()
    try:
        wait_until(lambda: job.status().get("loops", 0) >= 1, timeout_s=60, what="the job's first round")
        assert job.status().get("watching") is True, job.status()
        path = table_config(params, params.silver.tables[0]).base_path
        writer = RaisingThread(lambda: [apply_edge_case(base, "burst_postgres") for _ in range(5)])
        writer.start()
        wait_until(
            lambda: pending_instants(path),
            timeout_s=60,
            what="a category commit in flight (woken by the burst's Bronze files, not the 90 s pause)",
            interval_s=0.001,
            max_interval_s=0.001,  # an instant is pending for a moment only
        )
        assert job.kill() is not None
        assert pending_instants(path), "the kill did not hit a commit in flight"
        assert job.status()["state"] == "DEAD"
        writer.join()
        job.start()

        def caught_up() -> bool:
            return bool(silver_vs_source(params, ["category"])["equal"].all()) and not pending_instants(path)

        wait_until(caught_up, timeout_s=120, what="Silver to equal the source after the restart")
        wait_until(  # the status is written after the round's commit
            lambda: (job.status().get("lag") or {}).get("category", {}).get("pending_files") == 0,
            timeout_s=30,
            what="the job's status to show no Bronze file pending",
        )
    finally:
        try:
            if writer is not None and writer.is_alive():
                writer.join()  # no burst goes on into later tests; its error, if any, is raised
        finally:
            job.stop()
    assert job.status()["state"] == "STOPPED"


def _silver_equals_category(params: Any, timeout_s: float, what: str) -> None:
    """Wait until a job's own Silver ``category`` equals the source, row by row."""
    from helpers.checks.parity import silver_vs_source

    wait_until(
        lambda: bool(silver_vs_source(params, ["category"])["equal"].all()), timeout_s=timeout_s, what=what
    )


def test_an_idle_watching_job_rounds_at_once_when_asked_or_when_a_file_lands(
    capture: Capture, tmp_path: Path
) -> None:
    """An idle job whose Bronze notices wake it pauses ``silver.idle_interval_watched_s`` between
    rounds (here 600 s): a wait for its next round asks for one and gets it at once
    (:func:`helpers.silver.backend.wait_for_job_round`), and a burst's Bronze files still reach
    Silver at once. Without the request, or without the watch, each would wait out the pause."""
    from helpers.silver.backend import wait_for_job_round
    from helpers.silver.job import SilverJob
    from helpers.sources.edge_cases.catalogue import apply_edge_case

    base = capture.stack.params
    pause = {"min_interval_s": 0.2, "idle_after_s": 5.0, "idle_interval_watched_s": 600.0}
    params, job_params = own_job_params(base, "category", tmp_path, **pause)
    job = SilverJob(job_params)
    job.start()
    try:
        _silver_equals_category(params, 120, "the job's first load of category")
        status = wait_until(
            lambda: (s := job.status()).get("interval_s") == 600.0 and s, timeout_s=30, what="an idle pause"
        )
        assert status["watching"] is True, status
        for _ in range(2):
            loops = job.status()["loops"]
            assert wait_for_job_round(job, timeout_s=10)["loops"] > loops
        apply_edge_case(base, "burst_postgres")
        _silver_equals_category(params, 60, "Silver to equal the source (woken by the burst's files)")
    finally:
        job.stop()


def test_a_held_continuous_job_ingests_nothing_until_the_hold_ends(capture: Capture, tmp_path: Path) -> None:
    """While a process holds the job (the conformance harness does, :mod:`helpers.silver.hold`),
    changes reach Bronze but no round commits, and the status names the holder; when the hold
    ends, the next round takes them all and Silver equals the source. A claim left by a process
    that is gone holds nothing."""
    import subprocess
    import sys

    from helpers.checks.parity import bronze_vs_source, silver_vs_source
    from helpers.hudi.timeline import completed_instants
    from helpers.silver.hold import HOLDS_DIR, hold_rounds
    from helpers.silver.job import SilverJob
    from helpers.silver.tables import table_config
    from helpers.sources.edge_cases.catalogue import apply_edge_case

    base = capture.stack.params
    params, job_params = own_job_params(base, "category", tmp_path, min_interval_s=0.2, idle_interval_s=0.2)
    path = table_config(params, params.silver.tables[0]).base_path
    job = SilverJob(job_params)
    job.start()
    try:
        _silver_equals_category(params, 120, "the job's first load of category")
        with hold_rounds(job_params, "a test"):
            commits = completed_instants(path)
            apply_edge_case(base, "burst_postgres")
            assert bronze_vs_source(base, [capture.specs["ems"]], wait_s=30)["equal"].all()
            loops = job.status()["loops"]
            held = wait_until(
                lambda: job.status().get("held_by"), timeout_s=10, what="the job's status to name its holder"
            )
            assert held == [f"pid {os.getpid()}: a test"]
            time.sleep(2.0)  # ten of the job's pauses: each would have been a round
            assert completed_instants(path) == commits
            assert job.status()["loops"] == loops
            assert not silver_vs_source(params, ["category"])["equal"].all()
        gone = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, check=True
        )
        stale = job_params.state_path / "silver" / HOLDS_DIR / f"{int(gone.stdout)}-1-gone.json"
        stale.write_text(json.dumps({"pid": int(gone.stdout), "reason": "a killed run"}))
        _silver_equals_category(params, 60, "Silver to equal the source once the hold ended")
        assert len(completed_instants(path)) > len(commits)
        assert job.status().get("held_by") is None
        assert not stale.exists()
    finally:
        job.stop()


def test_two_concurrent_ingestions_never_take_a_file_twice(capture: Capture) -> None:
    """The checkpoint is read and committed under the table lock: two ingestion runs at the same
    moment (a notebook while the continuous job runs) record every Bronze file in one commit only."""
    import json as json_

    from helpers.checks.parity import bronze_vs_source, silver_vs_source
    from helpers.hudi.timeline import completed_instants, read_commit_metadata
    from helpers.silver.ingest import FILES_KEY, ingest_table
    from helpers.silver.tables import table_config
    from helpers.sources.edge_cases.catalogue import apply_edge_case

    params = capture.stack.params
    apply_edge_case(params, "burst_postgres")
    assert bronze_vs_source(params, [capture.specs["ems"]], wait_s=30)["equal"].all()
    category = next(t for t in params.silver.tables if t.name == "category")
    with ThreadPoolExecutor(2) as pool:
        runs = [pool.submit(ingest_table, params, category) for _ in range(2)]
        results = [run.result() for run in runs]  # a run that failed (a lock timeout, say) fails the test
    # the burst's files are all in Bronze: the run that got the lock first takes them, the other
    # then finds them in the committed checkpoint
    assert sorted(r.files > 0 for r in results) == [False, True], results
    base = table_config(params, category).base_path
    recorded: list[str] = []
    for instant in completed_instants(base):
        raw = (read_commit_metadata(base, instant).get("extraMetadata") or {}).get(FILES_KEY)
        recorded += json_.loads(raw) if raw else []
    assert len(recorded) == len(set(recorded))
    assert silver_vs_source(params, ["category"])["equal"].all()
