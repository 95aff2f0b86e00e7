"""Time-travel reads: the official Rust reader against the official Spark datasource.

Not a test, and no servers: writes a Silver-shaped ``sale`` table (TICKIT scale 1.0, 172,456 rows,
with the Debezium columns Silver carries) with the official Hudi writer, Copy-on-Write and
Merge-on-Read: one bulk insert, then ``--commits`` upserts of 1% of the rows each. Then, in the
same run and the same Spark session, the median of ``--repeat`` reads of the table as of the
middle commit (instant from the timeline), each into pandas (what the notebooks show) and into
Arrow (what the local DuckDB engine registers):

* Rust reader: :func:`helpers.query.timetravel.as_of` (the official reader, PyPI ``hudi``) and
  ``read_snapshot`` (Arrow);
* the baseline, the official Spark datasource (``as.of.instant``): ``as_of(engine="spark")`` and
  ``spark.read.format("hudi")...toPandas()``.

The workbook keeps the Rust reader for pandas and DuckDB where this shows it faster.

Run::

    .venv/bin/python bench/bench_timetravel.py                 # CoW and MoR, median of 5
    .venv/bin/python bench/bench_timetravel.py --repeat 3 --commits 3
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.params import load_params  # noqa: E402
from helpers.silver.tableref import silver_table  # noqa: E402
from helpers.silver.tables import table_config  # noqa: E402

SEED = 20080101


def silver_sale() -> pa.Table:
    """The generator's sale table as Bronze types (int32, UTC timestamps) plus Debezium fields."""
    from helpers.sources.sample.tickit import generate_tickit

    sale = generate_tickit(1.0, seed=SEED)["sale"]
    fields = [
        pa.field(
            f.name,
            pa.int32()
            if pa.types.is_integer(f.type)
            else pa.timestamp("us", tz="UTC")
            if pa.types.is_timestamp(f.type)
            else f.type,
        )
        for f in sale.schema
    ]
    return with_cdc(sale.cast(pa.schema(fields)), "r", 0)


def with_cdc(table: pa.Table, op: str, position: int) -> pa.Table:
    """Add the columns the Silver writer gets from Debezium (MariaDB log position ordering)."""
    n = table.num_rows
    cdc = ("__op", "__source_ts_ms", "__file", "__pos", "__row", "_hoodie_is_deleted", "_cdc_position")
    table = table.drop_columns([c for c in cdc if c in table.column_names])
    rows = np.arange(n, dtype=np.int32)
    return (
        table.append_column("__op", pa.array([op] * n))
        .append_column("__source_ts_ms", pa.array(np.full(n, 1_700_000_000_000 + position), pa.int64()))
        .append_column("__file", pa.array(["mariadb-bin.000001"] * n))
        .append_column("__pos", pa.array(np.full(n, position), pa.int64()))
        .append_column("__row", pa.array(rows))
        .append_column("_hoodie_is_deleted", pa.array(np.zeros(n, dtype=bool)))
        .append_column("_cdc_position", pa.array([f"0000000001.{position:020d}.{r:010d}" for r in rows]))
    )


def changed(table: pa.Table, commit: int) -> pa.Table:
    """A seeded 1% of the rows with one more ticket sold."""
    rng = np.random.default_rng(SEED + commit)
    picked = np.sort(rng.choice(table.num_rows, size=table.num_rows // 100, replace=False))
    rows = table.take(pa.array(picked))
    index = rows.schema.get_field_index("qtysold")
    rows = rows.set_column(index, "qtysold", pa.compute.add(rows.column("qtysold"), 1))
    return with_cdc(rows, "u", commit)


def timed(fn: Callable[[], Any]) -> float:
    import gc

    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed reads per path (median)")
    parser.add_argument("--commits", type=int, default=5, help="upsert commits after the bulk insert")
    args = parser.parse_args()

    from helpers.hudi.api import read_hudi_df
    from helpers.hudi.read import read_snapshot
    from helpers.query import timetravel as tt
    from helpers.spark import build_spark_session

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from support.silver_tables import write_silver

    work = Path(tempfile.mkdtemp(prefix="bench_timetravel_", dir="/tmp"))
    try:
        params = load_params(  # local: what users run (the ci parameters' JIT is C1 only)
            "local", {"lake.silver": str(work / "silver"), "spark.catalog": "none", "silver.sync": False}
        )
        spark = build_spark_session(params, app_name="bench-timetravel")
        base_rows = silver_sale()
        print(
            f"# bench_timetravel  as of the middle of {args.commits + 1} commits, median of {args.repeat}\n"
            "\n| table | rows | into | Rust reader (s) | Spark datasource (s) | Spark / Rust |"
            "\n|---|---|---|---|---|---|"
        )
        for name in ("sale", "sale_mor"):
            spec = silver_table(params, name)
            write_silver(spark, params, spec, base_rows, precombine="_cdc_position", operation="bulk_insert")
            for commit in range(1, args.commits + 1):
                write_silver(spark, params, spec, changed(base_rows, commit), precombine="_cdc_position")
            base = table_config(params, spec).base_path
            instants = tt.timeline_frame(params, name)["instant"].tolist()
            middle = instants[len(instants) // 2]
            paths: list[tuple[str, Callable[[], Any], Callable[[], Any]]] = [
                (
                    "pandas (as_of)",
                    lambda t=name, i=middle: tt.as_of(params, t, i),
                    lambda t=name, i=middle: tt.as_of(params, t, i, engine="spark", spark=spark),
                ),
                (
                    "Arrow / pandas, whole table (DuckDB)",
                    lambda b=base, i=middle: read_snapshot(b, as_of=i),
                    lambda b=base, i=middle: read_hudi_df(spark, b, {"as.of.instant": i}).toPandas(),
                ),
            ]
            rows = len(tt.as_of(params, name, middle))
            for label, rust, by_spark in paths:
                rust()  # warm both once
                by_spark()
                t_rust = statistics.median(timed(rust) for _ in range(args.repeat))
                t_spark = statistics.median(timed(by_spark) for _ in range(args.repeat))
                ratio = t_spark / t_rust
                print(
                    f"| {name} | {rows:,} | {label} | {t_rust:.3f} | {t_spark:.3f} | {ratio:.1f}x |",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
