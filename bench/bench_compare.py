"""Comparing a 172,000-row table: the vectorised comparator against the row-by-row one.

The table is shaped like TICKIT ``sale`` at full scale (172,456 rows: integer keys and ids, two
decimals, a timestamp), seeded. Silver is the same rows as the official reader returns them
(int32 ids, aware UTC timestamps, Hudi's meta columns). Each figure is one check as conformance
runs it: compare Silver with the source, then a tampered copy (one value changed) that must be
reported. The named baseline, ``compare_rows``, is the row-by-row comparator every check used
before (rows as Python dicts, ``to_pylist`` included); ``compare_tables`` is the vectorised one.
A Bronze replay of 250,000 events (the table's snapshot plus updates and deletes) is timed the
same way: ``replay`` (row by row) against ``replay_arrow``.

    .venv/bin/python bench/bench_compare.py [--rows N] [--repeat K]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from helpers.bronze.replay import replay, replay_arrow
from helpers.checks.compare import compare_rows, compare_tables
from helpers.checks.conformance import tamper_table

TARGET_S = 5.0  # issue 16: 5 s or less per 172,000-row table


def _sale(rows: int) -> pa.Table:
    r = random.Random(20240229)
    start = dt.datetime(2008, 1, 1, tzinfo=dt.UTC)
    return pa.table(
        {
            "salesid": pa.array(range(1, rows + 1), pa.int64()),
            "listid": pa.array([r.randrange(1, 200_000) for _ in range(rows)], pa.int64()),
            "sellerid": pa.array([r.randrange(1, 50_000) for _ in range(rows)], pa.int64()),
            "buyerid": pa.array([r.randrange(1, 50_000) for _ in range(rows)], pa.int64()),
            "eventid": pa.array([r.randrange(1, 9_000) for _ in range(rows)], pa.int64()),
            "dateid": pa.array([r.randrange(1827, 2192) for _ in range(rows)], pa.int64()),
            "qtysold": pa.array([r.randrange(1, 9) for _ in range(rows)], pa.int64()),
            "pricepaid": pa.array(
                [Decimal(r.randrange(100, 1_000_000)) / 100 for _ in range(rows)], pa.decimal128(8, 2)
            ),
            "commission": pa.array(
                [Decimal(r.randrange(10, 150_000)) / 100 for _ in range(rows)], pa.decimal128(8, 2)
            ),
            "saletime": pa.array(
                [start + dt.timedelta(seconds=r.randrange(31_536_000)) for _ in range(rows)],
                pa.timestamp("us", tz="UTC"),
            ),
        }
    )


def _silver(source: pa.Table) -> pa.Table:
    silver = source
    for name in ("salesid", "listid", "sellerid", "buyerid", "eventid", "dateid", "qtysold"):
        silver = silver.set_column(
            silver.column_names.index(name), name, pc.cast(silver.column(name), pa.int32())
        )
    meta = pa.array(["20261124000000000"] * source.num_rows)
    return silver.append_column("_hoodie_commit_time", meta).append_column(
        "_hoodie_partition_path", pa.array([""] * source.num_rows)
    )


def _events(source: pa.Table, extra: int) -> pa.Table:
    r = random.Random(7)
    snapshot = source.append_column("__op", pa.array(["r"] * source.num_rows))
    snapshot = snapshot.append_column("__lsn", pa.array(range(source.num_rows), pa.int64()))
    snapshot = snapshot.append_column("__deleted", pa.array(["false"] * source.num_rows))
    picks = pa.array([r.randrange(source.num_rows) for _ in range(extra)], pa.int64())
    changes = snapshot.take(picks)
    ops = [r.choice(["u", "u", "u", "d"]) for _ in range(extra)]
    changes = changes.set_column(changes.column_names.index("__op"), "__op", pa.array(ops))
    changes = changes.set_column(
        changes.column_names.index("__lsn"),
        "__lsn",
        pa.array(range(source.num_rows, source.num_rows + extra), pa.int64()),
    )
    changes = changes.set_column(
        changes.column_names.index("__deleted"),
        "__deleted",
        pa.array(["true" if o == "d" else "false" for o in ops]),
    )
    events = pa.concat_tables([snapshot, changes])
    return events.take(
        pa.array(r.sample(range(events.num_rows), events.num_rows), pa.int64())
    )  # any file order


def _timed(repeat: int, work: Callable[[], Any]) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=172_456)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    source = _sale(args.rows)
    silver = _silver(source)
    key = ["salesid"]
    tampered = tamper_table(silver, key, [(args.rows // 2,)], [], "hard")
    source_rows = source.to_pylist()  # the drivers' rows, read once in both paths

    def row_by_row() -> tuple[list[str], list[str]]:
        return compare_rows(source_rows, silver.to_pylist(), key), compare_rows(
            source_rows, tampered.to_pylist(), key
        )

    def vectorised() -> tuple[list[str], list[str]]:
        return compare_tables(source, silver, key), compare_tables(source, tampered, key)

    base_s, (base_equal, base_caught) = _timed(args.repeat, row_by_row)
    ours_s, (ours_equal, ours_caught) = _timed(args.repeat, vectorised)
    assert base_equal == [] and ours_equal == [], (base_equal, ours_equal)
    assert base_caught and ours_caught, "a tampered copy was not reported"
    events = _events(source, args.rows // 2)
    event_rows = events.to_pylist()
    base_r, replayed_rows = _timed(args.repeat, lambda: replay(event_rows, key))
    ours_r, replayed = _timed(args.repeat, lambda: replay_arrow(events, key))
    assert len(replayed_rows) == replayed.num_rows, (len(replayed_rows), replayed.num_rows)

    print(f"{args.rows:,} rows, median of {args.repeat}; check = compare + compare a tampered copy")
    header = ("what", "baseline (row by row)", "vectorised", "speed-up", "target")
    print(f"{header[0]:<44} {header[1]:>22} {header[2]:>12} {header[3]:>9} {header[4]:>8}")
    figures = [
        ("compare Silver with the source (one check)", base_s, ours_s, f"{TARGET_S:.1f} s"),
        (f"replay Bronze ({events.num_rows:,} events)", base_r, ours_r, ""),
    ]
    for what, base, ours, target in figures:
        print(f"{what:<44} {base:>20.2f} s {ours:>10.2f} s {base / ours:>8.1f}x {target:>8}")
    print(f"tampered copy: {ours_caught[0]}")


if __name__ == "__main__":
    main()
