"""``write_hudi`` (workbook branch here) then the read path, end to end through the front-ends.

Expected final state, per table type: a bulk insert of 100 TICKIT-sale-like rows (instant t1),
then an upsert changing the price of ids 1..10 (t2) and inserting ids 101..105; id 3 is also sent
with an *older* ordering value in the same batch, which must not win. Snapshot: 105 rows, ids 1..10
with the new price; as of t1: the 100 original rows; incremental (t1, t2]: the 15 rows of t2. The
pandas/Arrow path and the Spark data source return the same values. Instants come from the
commit results and the timeline, never hard-coded.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from helpers.hudi.api import write_hudi
from helpers.hudi.read import read_incremental, read_snapshot

pytestmark = pytest.mark.integration

T0 = dt.datetime(2008, 1, 1, tzinfo=dt.UTC)


def _rows(ids: range, price_cents: int, minutes: int) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "salesid": pa.array(list(ids), pa.int32()),
            "dateid": pa.array([1827 + i % 3 for i in ids], pa.int16()),
            "pricepaid": pa.array([decimal.Decimal(price_cents + i) / 100 for i in ids], pa.decimal128(8, 2)),
            "saletime": pa.array([T0 + dt.timedelta(minutes=minutes)] * n, pa.timestamp("us", tz="UTC")),
        }
    )


def _instants(base: str) -> list[str]:
    from hudi import HudiTableBuilder

    timeline = HudiTableBuilder.from_base_uri(base).build().get_timeline()
    return sorted(
        i.timestamp for i in timeline.get_completed_commits() + timeline.get_completed_deltacommits()
    )


@pytest.mark.parametrize("write_path", ["spark", "driver", "arrow"])
@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_write_then_read_through_the_front_ends(
    table_type: str, write_path: str, tmp_path: Path, spark: Any
) -> None:
    """Bulk insert + upsert via write_hudi (Spark DataFrame through Spark tasks or the driver, or an
    Arrow table); snapshot, as-of and incremental via both read paths."""
    from helpers.hudi.spark_source import read_hudi_df

    base = str(tmp_path / "sale")
    options = {
        "hoodie.table.name": "sale",
        "hoodie.datasource.write.recordkey.field": "salesid",
        "hoodie.datasource.write.precombine.field": "saletime",
        "hoodie.datasource.write.partitionpath.field": "dateid",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.table.type": table_type,
        "workbook.hudi.write.driver.max.bytes": "0" if write_path == "spark" else str(1 << 30),
    }

    def rows_in(table: pa.Table) -> Any:  # noqa: ANN401 - Spark DataFrame or Arrow table
        return table if write_path == "arrow" else spark.createDataFrame(table)

    first = write_hudi(
        rows_in(_rows(range(1, 101), 1000, 0)),
        {**options, "hoodie.datasource.write.operation": "bulk_insert"},
        base,
    )
    assert first.engine == "workbook"
    assert first.commit is not None
    assert first.commit.executed_by == ("spark" if write_path == "spark" else "driver")
    stale = _rows(range(3, 4), 1, -60)  # older than the stored row: must not win
    changes = pa.concat_tables([_rows(range(1, 11), 5000, 10), _rows(range(101, 106), 7000, 10), stale])
    write_hudi(rows_in(changes), {**options, "hoodie.datasource.write.operation": "upsert"}, base)
    t1, t2 = _instants(base)[:2]

    snap = {r["salesid"]: r for r in read_snapshot(base).to_pylist()}
    assert sorted(snap) == list(range(1, 106))
    assert all(snap[i]["pricepaid"] == decimal.Decimal(5000 + i) / 100 for i in range(1, 11))
    assert all(snap[i]["pricepaid"] == decimal.Decimal(1000 + i) / 100 for i in range(11, 101))
    assert {snap[i]["_hoodie_commit_time"] for i in range(11, 101)} == {t1}
    assert read_snapshot(base, as_of=t1).num_rows == 100
    incremental = read_incremental(base, t1, t2)
    assert sorted(incremental.column("salesid").to_pylist()) == [*range(1, 11), *range(101, 106)]

    for options_read, expected in (
        ({}, read_snapshot(base)),
        ({"as.of.instant": t1}, read_snapshot(base, as_of=t1)),
        (
            {"hoodie.datasource.query.type": "incremental", "hoodie.datasource.read.begin.instanttime": t1},
            incremental,
        ),
    ):
        got = read_hudi_df(spark, base, options_read).toArrow()
        assert got.sort_by("salesid").to_pylist() == expected.sort_by("salesid").to_pylist()
