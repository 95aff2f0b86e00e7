"""Time travel on live Silver tables (``helpers.query.timetravel``, ``helpers.query.history``),
checked against the source database (changed through ``helpers.sources.edits``).

The test changes ``ecomm.sale`` at the source in scripted steps, records the source rows after
each step (queried from MariaDB), waits until Silver shows the step, and takes each table's
instant from its timeline. As-of, incremental, history and diff results must equal exactly what
was recorded: row by row, every source column, decimals to the cent.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pandas as pd
import pytest
from support.pipeline import Capture

from helpers.checks.parity import bronze_vs_source
from helpers.errors import WaitTimeoutError
from helpers.instants import instant_to_datetime
from helpers.params import SilverTableParams, WorkbookParams
from helpers.pipeline import wait_for_silver
from helpers.query import history
from helpers.query import timetravel as tt
from helpers.query.changefeed import scd2
from helpers.sources import edits

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SALE = "sale"
TABLES = ("sale", "sale_mor", "sale_soft")  # CoW, MoR, CoW with soft deletes


def _source(params: WorkbookParams, key: int) -> list[dict[str, Any]]:
    """The source rows of sale ``key`` (MariaDB ``ecomm.sale``)."""
    return edits.source_rows(params, "ecomm", "sale", {"salesid": key})


def _with_soft_delete_table(params: WorkbookParams) -> WorkbookParams:
    """The session's params plus a soft-delete CoW copy of ``sale`` (its own base path)."""
    soft = SilverTableParams(
        name="sale_soft", source="ecomm", table="sale", record_key=("salesid",), delete_mode="soft"
    )
    silver = params.silver.model_copy(update={"tables": (*params.silver.tables, soft)})
    return params.model_copy(update={"silver": silver})


def _plain(value: Any) -> Any:
    """A Silver value as the database driver gives it: naive UTC datetimes, Python ints."""
    if value is None or (not isinstance(value, Decimal | str) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    if hasattr(value, "item") and not isinstance(value, Decimal):
        return value.item()
    return value


def _assert_row(silver: dict[str, Any], source: dict[str, Any], what: str) -> None:
    """Every source column equal; decimals also in their text (same scale, to the cent)."""
    for column, want in source.items():
        got = _plain(silver.get(column))
        assert got == want, f"{what}: {column} is {got!r}, the source had {want!r}"
        if isinstance(want, Decimal):
            assert str(got) == str(want), f"{what}: {column} {got!r} is not exactly {want!r}"


def _one(frame: pd.DataFrame, what: str) -> dict[str, Any]:
    assert len(frame) == 1, f"{what}: expected one row, got {len(frame)}"
    row: dict[str, Any] = frame.iloc[0].to_dict()
    return row


def _flagged(row: dict[str, Any]) -> bool:
    return str(row.get("__deleted", "")).lower() == "true"


def _expected_diff(
    key: str,
    updated: dict[int, tuple[dict[str, Any], dict[str, Any]]],
    inserted: list[dict[str, Any]],
    deleted: list[dict[str, Any]],
) -> set[tuple[Any, ...]]:
    out: set[tuple[Any, ...]] = set()
    for ident, (old, new) in updated.items():
        out |= {("update", ident, c, old[c], new[c]) for c in old if c != key and old[c] != new[c]}
    for row in inserted:
        out |= {("insert", row[key], c, None, v) for c, v in row.items() if c != key}
    for row in deleted:
        out |= {("delete", row[key], c, v, None) for c, v in row.items() if c != key}
    return out


def _diff_set(frame: pd.DataFrame, key: str) -> set[tuple[Any, ...]]:
    return {
        (r["change"], _plain(r[key]), r["column"], _plain(r["before"]), _plain(r["after"]))
        for r in frame.to_dict("records")
    }


@dataclass(frozen=True)
class Story:
    """The scripted steps at the source and what was recorded after each: the keys (A updated twice
    then deleted, B deleted, N inserted), the source rows (``a0`` at the start, ``a1`` after step
    1...), each table's instant at the start and after each step, and the error of a wait for step 2
    without ingestion."""

    params: WorkbookParams
    key_a: int
    key_b: int
    key_n: int
    a0: dict[str, Any]
    a1: dict[str, Any]
    a2: dict[str, Any]
    b0: dict[str, Any]
    n1: dict[str, Any]
    start: pd.Series
    step1: pd.Series
    step2: pd.Series
    step3: pd.Series
    unwaited: str

    def instants(self, table: str) -> tuple[str, str, str, str]:
        return self.start[table], self.step1[table], self.step2[table], self.step3[table]


@pytest.fixture(scope="module")
def story(capture: Capture) -> Story:
    """Steps at the source: (1) one transaction updates sale A (qtysold, pricepaid), inserts sale N
    and deletes sale B; (2) updates A again (commission); (3) deletes A. Each step is waited for in
    Silver (CoW, MoR and a soft-delete CoW table) and each table's instant recorded."""
    params = _with_soft_delete_table(capture.stack.params)
    assert bronze_vs_source(params, list(capture.specs.values()), wait_s=60)["equal"].all()
    key_a, key_b = 200, 201
    for key in (key_a, key_b):
        edits.restore_sample_row(params, "ecomm", "sale", {"salesid": key})
    wait_for_silver(params, TABLES, key_a)
    wait_for_silver(params, TABLES, key_b)
    start = pd.Series(tt.latest_instants(params, TABLES))
    assert start.tolist() == [tt.timeline_frame(params, t)["instant"].iloc[-1] for t in TABLES]
    a0 = _source(params, key_a)[0]
    b0 = _source(params, key_b)[0]

    # step 1: one transaction, bound parameters
    conn = capture.stack.connect_mariadb(params.source("ecomm").database)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT max(salesid) + 1 FROM sale")
            fetched = cur.fetchone()
            assert fetched is not None
            key_n = int(fetched[0])
            cur.execute(
                "UPDATE sale SET qtysold = %s, pricepaid = %s WHERE salesid = %s",
                (a0["qtysold"] + 1, a0["pricepaid"] + Decimal("10.05"), key_a),
            )
            columns = list(a0)
            values = [key_n if c == "salesid" else a0[c] for c in columns]
            values[columns.index("pricepaid")] = Decimal("123456.78")
            cur.execute(
                f"INSERT INTO sale ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})",  # noqa: S608
                values,
            )
            cur.execute("DELETE FROM sale WHERE salesid = %s", (key_b,))
        conn.commit()
    finally:
        conn.close()
    a1 = _source(params, key_a)[0]
    n1 = _source(params, key_n)[0]
    assert _source(params, key_b) == []
    for key in (key_a, key_b, key_n):
        wait_for_silver(params, TABLES, key)
    step1 = pd.Series(tt.latest_instants(params, TABLES))

    # step 2 and 3
    commission = a1["commission"] + Decimal("0.01")
    a2 = edits.update_source_row(params, "ecomm", "sale", {"salesid": key_a}, {"commission": commission})[0]
    unwaited = ""
    try:  # nothing ingests it but wait_for_silver itself: without ingestion the wait runs out
        wait_for_silver(params, [SALE], key_a, timeout_s=1, ingest=False)
    except WaitTimeoutError as exc:
        unwaited = str(exc)
    step2 = wait_for_silver(params, TABLES, key_a).set_index("table")["instant"]
    edits.delete_source_row(params, "ecomm", "sale", {"salesid": key_a})
    assert _source(params, key_a) == []
    step3 = wait_for_silver(params, TABLES, key_a).set_index("table")["instant"]
    return Story(params, key_a, key_b, key_n, a0, a1, a2, b0, n1, start, step1, step2, step3, unwaited)


def test_as_of_each_step_equals_the_source_recorded_after_it(story: Story) -> None:
    """As of each step's instant, A, N and B equal the source rows recorded after that step (absent
    once deleted; flagged in soft mode); a datetime works like the instant; waiting for step 2
    without ingestion runs out of time naming the table."""
    params, key_a, key_b, key_n = story.params, story.key_a, story.key_b, story.key_n
    assert re.search(r"change of key 200 in Silver within 1 s: table\(s\) \['sale'\]", story.unwaited), story
    for table in TABLES:
        soft = table == "sale_soft"
        t0, t1, t2, t3 = story.instants(table)
        assert t0 < t1 < t2 < t3, (table, t0, t1, t2, t3)
        _assert_row(_one(tt.as_of(params, table, t0, key_a), table), story.a0, f"{table} A as of start")
        _assert_row(_one(tt.as_of(params, table, t0, key_b), table), story.b0, f"{table} B as of start")
        before_n = tt.as_of(params, table, t0, key_n)
        # N is new at the source; a soft table may hold an earlier life of the key, flagged deleted
        assert before_n.empty or (soft and bool(before_n["__deleted"].all())), before_n
        _assert_row(_one(tt.as_of(params, table, t1, key_a), table), story.a1, f"{table} A as of step 1")
        _assert_row(_one(tt.as_of(params, table, t1, key_n), table), story.n1, f"{table} N as of step 1")
        _assert_row(_one(tt.as_of(params, table, t2, key_a), table), story.a2, f"{table} A as of step 2")
        for when in (t3, None):
            gone = tt.as_of(params, table, when, key_a)
            if soft:
                row = _one(gone, table)
                assert _flagged(row)
                _assert_row(row, story.a2, f"{table} flagged A")
            else:
                assert gone.empty, f"{table}: A still there as of {when}"
        b_after = tt.as_of(params, table, t1, key_b)
        assert (len(b_after) == 1 and _flagged(_one(b_after, table))) if soft else b_after.empty
        at_datetime = tt.as_of(params, table, instant_to_datetime(t1), key_a)
        _assert_row(_one(at_datetime, table), story.a1, table)


def test_each_increment_holds_exactly_the_keys_its_step_wrote(story: Story) -> None:
    params, key_a, key_n = story.params, story.key_a, story.key_n
    for table in TABLES:
        soft = table == "sale_soft"
        t0, t1, t2, t3 = story.instants(table)
        inc1 = tt.incremental(params, table, t0, t1)
        expected_keys = {key_a, key_n} | ({story.key_b} if soft else set())
        assert set(inc1["salesid"]) == expected_keys, (table, inc1["salesid"].tolist())
        _assert_row(
            _one(tt.incremental(params, table, t0, t1, key_a), table), story.a1, f"{table} increment 1"
        )
        _assert_row(
            _one(tt.incremental(params, table, t1, t2, key_a), table), story.a2, f"{table} increment 2"
        )
        assert set(tt.incremental(params, table, t1, t2)["salesid"]) == {key_a}
        inc3 = tt.incremental(params, table, t2, t3)
        assert set(inc3["salesid"]) == ({key_a} if soft else set())


def test_history_and_scd2_of_a_record_are_its_recorded_versions(story: Story) -> None:
    """A's history after the start is update, update, delete with the recorded values (the delete
    with A as it was before it); its SCD2 rows are the same versions, each valid until the next
    change, the last ended by the delete (CoW from Hudi's CDC log, MoR from its timeline)."""
    params, key_a = story.params, story.key_a
    for table in TABLES:
        t0, t1, t2, t3 = story.instants(table)
        versions_of_a = history.record_history(params, table, key_a)
        old = versions_of_a[versions_of_a["commit_time"] <= t0]
        new = versions_of_a[versions_of_a["commit_time"] > t0]
        assert len(old) >= 1 and old["operation"].iloc[-1] != "delete"
        _assert_row(old.iloc[-1].to_dict(), story.a0, f"{table} history before the start")
        assert new["operation"].tolist() == ["update", "update", "delete"], new
        commits = new["commit_time"].tolist()
        assert t0 < commits[0] <= t1 < commits[1] <= t2 < commits[2] <= t3, (commits, t0, t1, t2, t3)
        _assert_row(new.iloc[0].to_dict(), story.a1, f"{table} history version 1")
        _assert_row(new.iloc[1].to_dict(), story.a2, f"{table} history version 2")
        _assert_row(
            new.iloc[2].to_dict(), story.a2, f"{table} history: the delete holds the record before it"
        )

        versions = scd2(params, table, key_a)
        assert set(versions["salesid"]) == {key_a}
        assert versions["valid_from"].tolist()[-2:] == commits[:2], (table, versions)
        assert versions["valid_to"].tolist()[-2:] == commits[1:], (table, versions)
        assert versions["operation"].tolist()[-2:] == ["update", "update"]
        assert versions["ended_by"].tolist()[-2:] == ["update", "delete"]
        assert not versions["is_current"].any()
        _assert_row(versions.iloc[-2].to_dict(), story.a1, f"{table} SCD2 version 1")
        _assert_row(versions.iloc[-1].to_dict(), story.a2, f"{table} SCD2 version 2")
        earlier = versions[versions["valid_from"] <= t0]
        _assert_row(earlier.iloc[-1].to_dict(), story.a0, f"{table} SCD2 version at the start")
        assert earlier["valid_to"].iloc[-1] == commits[0]


def test_the_diff_of_each_step_is_exactly_its_scripted_changes(story: Story) -> None:
    """Step 1: A's two changed columns, N inserted and B deleted; step 2: A's commission; step 3:
    A deleted."""
    params, key_a = story.params, story.key_a
    for table in TABLES:
        t0, t1, t2, t3 = story.instants(table)
        got1 = _diff_set(history.diff(params, table, t0, t1), "salesid")
        assert got1 == _expected_diff("salesid", {key_a: (story.a0, story.a1)}, [story.n1], [story.b0]), table
        got2 = _diff_set(history.diff(params, table, t1, t2), "salesid")
        assert got2 == {("update", key_a, "commission", story.a1["commission"], story.a2["commission"])}, (
            table
        )
        got3 = _diff_set(history.diff(params, table, t2, t3), "salesid")
        assert got3 == _expected_diff("salesid", {}, [], [story.a2]), table


def test_notebook_04_s_tables_give_the_same_answers(story: Story) -> None:
    """A consistent "as of" over the tables (each one's latest commit at the moment, and the skew),
    and notebook 04's tables (A at named points, the increments around step 2, the diffs per step,
    per-table history, the readers' agreement) over the same instants."""
    params, key_a, step1, step2, step3 = story.params, story.key_a, story.step1, story.step2, story.step3
    a1, a2 = story.a1, story.a2
    moment = instant_to_datetime(step2["sale"])
    consistent = tt.consistent_as_of(params, TABLES, moment).set_index("table")
    for table in TABLES:
        timeline = tt.timeline_frame(params, table)["instant"]
        assert consistent.loc[table, "instant"] == timeline[timeline <= step2["sale"]].iloc[-1]
    assert consistent.loc["sale", "lag_s"] == 0.0
    assert consistent["skew_s"].min() == 0.0 and (consistent["skew_s"] >= 0).all()

    at = {"step 1": step1.to_dict(), "step 2": step2.to_dict()}
    points = history.as_of_points(params, TABLES, at, key_a)
    assert list(zip(points["point"], points["table"], strict=True)) == [(p, t) for p in at for t in TABLES]
    assert points["instant"].tolist() == [at[p][t] for p in at for t in TABLES]
    for row in points.to_dict("records"):
        _assert_row(row, a1 if row["point"] == "step 1" else a2, f"{row['table']} A at {row['point']}")

    ranges = history.increments_around(params, TABLES, at["step 1"], at["step 2"], key_a, ["commission"])
    for table in TABLES:
        got = ranges[ranges["table"] == table].set_index("range")
        assert got.index.tolist() == ["before", "around", "after"]
        assert got["end"].tolist() == [step1[table], step2[table], "latest"]
        assert got.loc["before", "commission"] == a1["commission"]
        assert got.loc["around", "commission"] == a2["commission"]
        assert got["rows"].tolist() == [1, 1, 1 if table == "sale_soft" else 0]  # a hard delete emits nothing

    steps = history.diff_steps(
        params, TABLES, {"2": (at["step 1"], at["step 2"]), "3": (at["step 2"], step3.to_dict())}
    )
    for table in TABLES:
        two = steps[(steps["step"] == "2") & (steps["table"] == table)]
        assert _diff_set(two, "salesid") == {
            ("update", key_a, "commission", a1["commission"], a2["commission"])
        }
        three = steps[(steps["step"] == "3") & (steps["table"] == table)]
        assert _diff_set(three, "salesid") == _expected_diff("salesid", {}, [], [a2]), table

    every = tt.per_table(history.record_history, params, TABLES, key_a)
    assert every["table"].unique().tolist() == list(TABLES)
    assert (every["table"] == "sale").sum() == len(history.record_history(params, SALE, key_a))

    agree = tt.readers_agree_points(params, [SALE], {"step 1": at["step 1"]}, key_a)
    assert agree.to_dict("records") == [
        {"table": SALE, "point": "step 1", "instant": step1[SALE], "rows": 1, "equal": True}
    ]
