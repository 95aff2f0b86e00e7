"""Hudi benchmark: each workload next to its baseline, measured in the same run.

    .venv/bin/python bench/bench_hudi.py              # full sizes (about 3-6 minutes)
    .venv/bin/python bench/bench_hudi.py --quick      # small sizes, smoke run

(a) upsert of 10% changed rows into a 172,456-row TICKIT ``sale`` table, CoW and MoR, through
    ``helpers.hudi.api.write_hudi``, vs the same merge with delta-rs (``deltalake``);
(b) bulk insert of 1,000,000 sale-shaped rows through ``write_hudi`` vs Spark's own
    ``df.write.parquet`` of the same cached DataFrame;
(c) time-travel read (as of the first commit) through ``helpers.hudi.read.read_snapshot`` and
    through the ``hudi_rs`` Spark data source, vs the official reader (``hudi``) called directly.

Data are deterministic (seeded numpy; the 172,456-row table is ``helpers.tickit``'s ``sale``).
Spark inputs are built from Arrow and cached before the clock starts, so the timings are of the
write itself. Each timing is the median of ``--repeat`` runs, each on a fresh copy of the table.
This is a benchmark, not a test: it asserts nothing beyond sanity checks of row counts.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

SALE_ROWS = 172_456
BULK_ROWS = 1_000_000
CHANGE_FRACTION = 0.10
SEED = 20080101
SETTLE_SECONDS = 0.5


@dataclass
class Row:
    """One line of the result table."""

    workload: str
    ours: str
    ours_rows_s: float | None
    baseline: str
    base_rows_s: float | None
    note: str = ""

    def cells(self) -> list[str]:
        ratio = (
            f"{self.ours_rows_s / self.base_rows_s:.2f}x" if self.ours_rows_s and self.base_rows_s else "n/a"
        )
        return [
            self.workload,
            self.ours,
            _fmt(self.ours_rows_s),
            self.baseline,
            _fmt(self.base_rows_s),
            ratio,
            self.note,
        ]


def _fmt(value: float | None) -> str:
    return f"{value:,.0f}" if value else "n/a"


# ---------------------------------------------------------------------------------- data


def sale_table(rows: int) -> pa.Table:
    """TICKIT-sale-shaped rows: the real generator's table at 172,456 rows, else seeded numpy."""
    from helpers.tickit import decimal_from_cents, generate_tickit

    if rows == SALE_ROWS:
        table = generate_tickit(1.0, seed=SEED)["sale"]
    else:
        rng = np.random.default_rng(SEED)
        qty = rng.integers(1, 9, rows).astype(np.int16)
        price_cents = rng.integers(2_000, 250_000, rows) // 100 * 100
        saletime = np.datetime64("2008-01-01T00:00:00", "s") + np.sort(rng.integers(0, 365 * 86_400, rows))
        table = pa.table(
            {
                "salesid": pa.array(np.arange(1, rows + 1, dtype=np.int32)),
                "listid": pa.array(rng.integers(1, 235_000, rows, dtype=np.int32)),
                "sellerid": pa.array(rng.integers(1, 50_000, rows, dtype=np.int32)),
                "buyerid": pa.array(rng.integers(1, 50_000, rows, dtype=np.int32)),
                "eventid": pa.array(rng.integers(1, 8_800, rows, dtype=np.int32)),
                "dateid": pa.array(
                    (1827 + (saletime - saletime[0]).astype(np.int64) // 86_400).astype(np.int16)
                ),
                "qtysold": pa.array(qty),
                "pricepaid": decimal_from_cents(price_cents),
                "commission": decimal_from_cents(price_cents * 15 // 100),
                "saletime": pa.array(saletime.astype("datetime64[us]")),
            }
        )
    # Spark's TimestampType is a UTC instant; give both engines the same zone-aware column.
    idx = table.schema.get_field_index("saletime")
    return table.set_column(idx, "saletime", table.column("saletime").cast(pa.timestamp("us", tz="UTC")))


def changed_rows(table: pa.Table, fraction: float) -> pa.Table:
    """A seeded ``fraction`` of the rows with new quantity, price, commission and a later time."""
    from helpers.tickit import decimal_from_cents

    rng = np.random.default_rng(SEED + 1)
    n = int(round(table.num_rows * fraction))
    picked = np.sort(rng.choice(table.num_rows, size=n, replace=False))
    changes = table.take(pa.array(picked))
    qty = rng.integers(1, 9, n).astype(np.int16)
    cents = rng.integers(2_000, 250_000, n) // 100 * 100
    later = pa.compute.add(changes.column("saletime"), pa.scalar(86_400_000_000, pa.duration("us")))
    for name, values in (
        ("qtysold", pa.array(qty)),
        ("pricepaid", decimal_from_cents(cents)),
        ("commission", decimal_from_cents(cents * 15 // 100)),
        ("saletime", later.cast(pa.timestamp("us", tz="UTC"))),
    ):
        changes = changes.set_column(changes.schema.get_field_index(name), name, values)
    return changes.cast(table.schema)


# ---------------------------------------------------------------------------------- timing


def settle() -> None:
    """Let background work of earlier runs finish before a timed run, so each run starts from the
    same quiet state: Python garbage, Spark's JVM, and above all the page cache. The table copies
    made for the next runs leave tens of MB of dirty pages; the Hudi writer fsyncs its files (a
    commit must survive a crash) and would otherwise wait for that unrelated writeback, while
    delta-rs does not fsync."""
    import gc

    gc.collect()
    os.sync()
    time.sleep(SETTLE_SECONDS)


def timed(fn: Callable[[], Any]) -> float:
    settle()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def median_rate(rows: int, seconds: list[float]) -> float:
    return rows / statistics.median(seconds)


def hudi_options(table_type: str, operation: str) -> dict[str, str]:
    return {
        "hoodie.table.name": "sale",
        "hoodie.datasource.write.recordkey.field": "salesid",
        "hoodie.datasource.write.precombine.field": "saletime",
        "hoodie.datasource.write.table.type": table_type,
        "hoodie.datasource.write.operation": operation,
    }


def failure(exc: BaseException) -> str:
    """One-line description of a failed workload for the note column."""
    import traceback

    text = str(exc).strip().splitlines()
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
    return f"FAILED {type(exc).__name__}{where}: {text[0][:100] if text else ''}"


def writer_available() -> str | None:
    """None if the workbook Hudi writer can be used, else the reason it cannot."""
    try:
        import helpers.hudi.spark_writer  # noqa: F401
    except ImportError as exc:
        return f"writer not available ({exc})"
    return None


# ---------------------------------------------------------------------------------- workloads


#: (a) entry points of the workbook writer: label -> (input kind, extra write options).
UPSERT_ENTRIES: tuple[tuple[str, str, dict[str, str]], ...] = (
    ("write_hudi(pyarrow.Table)", "arrow", {}),
    ("write_hudi(Spark DF), driver path", "spark", {}),
    ("write_hudi(Spark DF), Spark tasks", "spark", {"workbook.hudi.write.driver.max.bytes": "0"}),
)


def bench_upserts(spark: Any, work: Path, rows: int, repeat: int, out: list[Row]) -> dict[str, Path]:
    """(a) 10% upsert, Hudi CoW / MoR through each entry point vs delta-rs merge.

    Runs are interleaved (repeat i: delta-rs, then every Hudi variant, each on a fresh copy of its
    base table), so a slow phase of the machine hits all of them alike. Returns Hudi tables for (c).
    """
    from deltalake import DeltaTable, write_deltalake

    from helpers.hudi.api import write_hudi

    base = sale_table(rows)
    changes = changed_rows(base, CHANGE_FRACTION)
    n = changes.num_rows

    delta_seed = work / "delta_seed"
    write_deltalake(str(delta_seed), base, mode="overwrite")

    def delta_merge(target: Path) -> None:
        (
            DeltaTable(str(target))
            .merge(changes, predicate="t.salesid = s.salesid", source_alias="s", target_alias="t")
            .when_matched_update_all(predicate="s.saletime >= t.saletime")
            .when_not_matched_insert_all()
            .execute()
        )

    reason = writer_available()
    base_df = spark.createDataFrame(base).cache()
    change_df = spark.createDataFrame(changes).cache()
    base_df.count(), change_df.count()
    variants: dict[tuple[str, str], dict[str, Any]] = {}
    for table_type, label in (("COPY_ON_WRITE", "CoW"), ("MERGE_ON_READ", "MoR")):
        for entry, kind, extra in UPSERT_ENTRIES:
            variants[(label, entry)] = {
                "table_type": table_type,
                "input": changes if kind == "arrow" else change_df,
                "options": {**hudi_options(table_type, "upsert"), **extra},
                "times": [],
                "note": reason or "",
            }
    if not reason:
        for table_type, label in (("COPY_ON_WRITE", "CoW"), ("MERGE_ON_READ", "MoR")):
            try:
                write_hudi(base_df, hudi_options(table_type, "bulk_insert"), str(work / f"hudi_{label}_seed"))
            except Exception as exc:  # noqa: BLE001 - a failed workload is reported, the rest still runs
                for (lab, _), v in variants.items():
                    if lab == label:
                        v["note"] = failure(exc)
    # untimed warm-up of every path (imports, JIT, first Arrow compute call)
    for j, ((label, _entry), v) in enumerate(variants.items()):
        if not v["note"]:
            warm = work / f"warm_{j}"
            shutil.copytree(work / f"hudi_{label}_seed", warm)
            write_hudi(v["input"], v["options"], str(warm))
    shutil.copytree(delta_seed, work / "delta_warm")
    delta_merge(work / "delta_warm")

    delta_times: list[float] = []
    for i in range(repeat):
        target = work / f"delta_{i}"
        shutil.copytree(delta_seed, target)
        delta_times.append(timed(lambda t=target: delta_merge(t)))
        for j, ((label, _entry), v) in enumerate(variants.items()):
            if v["note"]:
                continue
            target = work / f"hudi_{label}_{j}_{i}"
            shutil.copytree(work / f"hudi_{label}_seed", target)
            try:
                v["times"].append(timed(lambda t=target, v=v: write_hudi(v["input"], v["options"], str(t))))
                v.setdefault("first", target)
            except Exception as exc:  # noqa: BLE001
                v["note"] = failure(exc)
    check = DeltaTable(str(work / "delta_0")).to_pyarrow_table()
    assert check.num_rows == base.num_rows, "delta merge changed the row count"
    delta_rate = median_rate(n, delta_times)

    from helpers.hudi.read import read_snapshot

    tables: dict[str, Path] = {}
    expected = {r["salesid"]: r["pricepaid"] for r in changes.select(["salesid", "pricepaid"]).to_pylist()}
    for (label, entry), v in variants.items():
        rate: float | None = None
        if not v["note"] and v["times"]:
            after = read_snapshot(str(v["first"]), columns=["salesid", "pricepaid"])
            assert after.num_rows == base.num_rows, f"Hudi {label} {entry} changed the row count"
            got = {
                r["salesid"]: r["pricepaid"]
                for r in after.filter(pa.compute.is_in(after["salesid"], changes["salesid"])).to_pylist()
            }
            assert got == expected, f"Hudi {label} {entry}: changed rows do not hold the new values"
            tables.setdefault(label, v["first"])
            rate = median_rate(n, v["times"])
        out.append(
            Row(
                f"(a) upsert 10% of {rows:,} ({n:,} rows)",
                f"Hudi {label} {entry}",
                rate,
                "delta-rs merge",
                delta_rate,
                v["note"],
            )
        )
    base_df.unpersist(), change_df.unpersist()
    return tables


def bench_bulk_insert(spark: Any, work: Path, rows: int, repeat: int, out: list[Row]) -> None:
    """(b) bulk insert through write_hudi vs df.write.parquet, same cached DataFrame."""
    from helpers.hudi.api import write_hudi

    df = spark.createDataFrame(sale_table(rows)).cache()
    assert df.count() == rows
    df.write.mode("overwrite").parquet(str(work / "parquet_warmup"))  # JIT/class loading, untimed
    parquet_times = [
        timed(lambda i=i: df.write.mode("overwrite").parquet(str(work / f"parquet_{i}")))
        for i in range(repeat)
    ]
    parquet_rate = median_rate(rows, parquet_times)
    rate: float | None = None
    note = writer_available() or ""
    if not note:
        try:
            times = [
                timed(
                    lambda i=i: write_hudi(
                        df, hudi_options("COPY_ON_WRITE", "bulk_insert"), str(work / f"bulk_{i}")
                    )
                )
                for i in range(repeat)
            ]
            from helpers.hudi.read import read_snapshot

            written = read_snapshot(str(work / "bulk_0"), columns=["salesid"]).num_rows
            assert written == rows, f"bulk insert wrote {written} rows, expected {rows}"
            rate = median_rate(rows, times)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            note = failure(exc)
    out.append(
        Row(
            f"(b) bulk insert {rows:,} rows",
            "Hudi CoW (write_hudi)",
            rate,
            "Spark df.write.parquet",
            parquet_rate,
            note,
        )
    )
    df.unpersist()


def arrow_written_tables(work: Path, rows: int) -> dict[str, Path]:
    """Fallback for (c) when (a) wrote no table: the same bulk insert + upsert, written by the
    writer's in-process pyarrow core (``helpers.hudi.writer.write_arrow``)."""
    try:
        from helpers.hudi.writer import write_arrow

        from helpers.hudi.api import parse_write_options, to_table_config

        base = sale_table(rows)
        changes = changed_rows(base, CHANGE_FRACTION)
        out: dict[str, Path] = {}
        for table_type, label in (("COPY_ON_WRITE", "CoW"), ("MERGE_ON_READ", "MoR")):
            path = work / f"arrow_{label}"
            config = to_table_config(parse_write_options(hudi_options(table_type, "upsert")), str(path))
            write_arrow(base, config, "bulk_insert")
            write_arrow(changes, config, "upsert")
            out[f"{label}, written by write_arrow"] = path
        return out
    except Exception as exc:  # noqa: BLE001 - reported by the caller as "no table"
        print(f"# (c) fallback tables not written: {failure(exc)}", flush=True)
        return {}


def bench_time_travel(
    spark: Any, work: Path, rows: int, tables: dict[str, Path], repeat: int, out: list[Row]
) -> None:
    """(c) as-of read of the first commit: our paths vs the official reader alone."""
    from helpers.hudi.spark_source import read_hudi_df
    from hudi import HudiReadOptions, HudiTableBuilder

    from helpers.hudi.read import read_snapshot

    if not tables:
        tables = arrow_written_tables(work, rows)
    if not tables:
        out.append(
            Row(
                "(c) time-travel read",
                "read_snapshot(as_of)",
                None,
                "hudi (official) alone",
                None,
                writer_available() or "no table",
            )
        )
        return
    for label, path in tables.items():
        timeline = HudiTableBuilder.from_base_uri(str(path)).build().get_timeline()
        instants = sorted(
            i.timestamp for i in timeline.get_completed_commits() + timeline.get_completed_deltacommits()
        )
        first = instants[0]

        def official(p: Path = path, t: str = first) -> int:
            table = HudiTableBuilder.from_base_uri(str(p)).build()
            return pa.Table.from_batches(table.read(HudiReadOptions().with_as_of_timestamp(t))).num_rows

        rows = official()
        official_rate = median_rate(rows, [timed(official) for _ in range(repeat)])
        ours_rate = median_rate(
            rows, [timed(lambda p=path, t=first: read_snapshot(str(p), as_of=t)) for _ in range(repeat)]
        )
        read_hudi_df(spark, str(path), {"as.of.instant": first}).toArrow()  # warm-up, untimed
        spark_rate = median_rate(
            rows,
            [
                timed(lambda p=path, t=first: read_hudi_df(spark, str(p), {"as.of.instant": t}).toArrow())
                for _ in range(repeat)
            ],
        )
        workload = f"(c) as-of read, {label} ({rows:,} rows)"
        out.append(Row(workload, "read_snapshot(as_of)", ours_rate, "hudi (official) alone", official_rate))
        out.append(
            Row(
                workload,
                "Spark hudi_rs .toArrow()",
                spark_rate,
                "hudi (official) alone",
                official_rate,
                "includes Spark job + Arrow transfer",
            )
        )


# ---------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes (20,000 / 100,000 rows), 1 repeat")
    parser.add_argument("--repeat", type=int, default=5, help="runs per timing; the median is reported")
    parser.add_argument("--workdir", help="where tables are written (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the written tables")
    parser.add_argument("--only", default="abc", help="workloads to run, e.g. 'a' or 'bc' (default: abc)")
    args = parser.parse_args(argv)
    sale_rows, bulk_rows, repeat = (20_000, 100_000, 1) if args.quick else (SALE_ROWS, BULK_ROWS, args.repeat)

    from tabulate import tabulate

    from helpers.spark import build_spark_session

    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench_hudi_"))
    work.mkdir(parents=True, exist_ok=True)
    spark = build_spark_session(app_name="bench-hudi")
    import deltalake
    import hudi
    import pyspark

    print(
        f"# bench_hudi  python {platform.python_version()}  cores {os.cpu_count()}"
        f"  pyspark {pyspark.__version__}"
        f"  hudi {hudi.__version__}  deltalake {deltalake.__version__}  pyarrow {pa.__version__}"
        f"  repeat {repeat} (median)  workdir {work}",
        flush=True,
    )
    rows: list[Row] = []
    try:
        tables: dict[str, Path] = {}
        if "a" in args.only:
            tables = bench_upserts(spark, work, sale_rows, repeat, rows)
        if "b" in args.only:
            bench_bulk_insert(spark, work, bulk_rows, repeat, rows)
        if "c" in args.only:
            bench_time_travel(spark, work, sale_rows, tables, repeat, rows)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(work, ignore_errors=True)
    print(
        tabulate(
            [r.cells() for r in rows],
            headers=["workload", "ours", "rows/s", "baseline", "rows/s", "ours/baseline", "note"],
            tablefmt="github",
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
