"""Time-travel benchmark: ``helpers.timetravel.as_of`` vs the official Hudi reader alone.

Not a test, and no servers: builds a Silver-shaped ``sale`` table (TICKIT scale 1.0, 172,456
rows, with the Debezium columns Silver carries) in a temporary folder with the workbook's writer
(``helpers.hudi.writer.write_arrow``): one bulk insert, then ``--commits`` upserts of 1% of the
rows each. Then, in the same run, the median of ``--repeat`` reads of the table as of the middle
commit (instant taken from the timeline):

* ours: :func:`helpers.timetravel.as_of` (resolves the table from the params, checks the
  cleaner's retention, returns a pandas DataFrame);
* the official reader alone: ``hudi.HudiTableBuilder`` + ``read`` with an as-of timestamp,
  returning Arrow batches; and the same plus ``to_pandas()``, the like-for-like output.

Run::

    .venv/bin/python bench/bench_timetravel.py                 # CoW and MoR, median of 7
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
from helpers.silver import table_config  # noqa: E402

SEED = 20080101


def silver_sale() -> pa.Table:
    """The generator's sale table as Bronze types (int32, UTC timestamps) plus Debezium fields."""
    from helpers.tickit import generate_tickit

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
    for name in ("__op", "__source_ts_ms", "__file", "__pos", "__row", "_hoodie_is_deleted"):
        if name in table.column_names:
            table = table.drop_columns([name])
    return (
        table.append_column("__op", pa.array([op] * n))
        .append_column("__source_ts_ms", pa.array(np.full(n, 1_700_000_000_000 + position), pa.int64()))
        .append_column("__file", pa.array(["mariadb-bin.000001"] * n))
        .append_column("__pos", pa.array(np.full(n, position), pa.int64()))
        .append_column("__row", pa.array(np.arange(n, dtype=np.int32)))
        .append_column("_hoodie_is_deleted", pa.array(np.zeros(n, dtype=bool)))
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
    parser.add_argument("--repeat", type=int, default=7, help="timed reads per path (median)")
    parser.add_argument("--commits", type=int, default=5, help="upsert commits after the bulk insert")
    args = parser.parse_args()

    from helpers.hudi.writer import write_arrow
    from hudi import HudiReadOptions, HudiTableBuilder

    from helpers import timetravel as tt

    work = Path(tempfile.mkdtemp(prefix="bench_timetravel_", dir="/tmp"))
    try:
        params = load_params("ci", {"lake.silver": str(work / "silver")})
        base_rows = silver_sale()
        print(
            f"{'table':<10} {'rows':>8} {'ours as_of (s)':>15} {'official (s)':>13} "
            f"{'official+pandas (s)':>20} {'ours/official':>14} {'ours/official+pandas':>21}"
        )
        for name in ("sale", "sale_mor"):
            config = table_config(params, tt.silver_table(params, name))
            write_arrow(base_rows, config, "bulk_insert")
            for commit in range(1, args.commits + 1):
                write_arrow(changed(base_rows, commit), config, "upsert")
            instants = tt.timeline_frame(params, name)["instant"].tolist()
            middle = instants[len(instants) // 2]

            def official(path: str = config.base_path, instant: str = middle) -> pa.Table:
                table = HudiTableBuilder.from_base_uri(path).build()
                return pa.Table.from_batches(table.read(HudiReadOptions().with_as_of_timestamp(instant)))

            def ours(table: str = name, instant: str = middle) -> Any:
                return tt.as_of(params, table, instant)

            rows = official().num_rows
            assert len(ours()) == rows, "ours and the official reader disagree on the row count"
            t_official = statistics.median(timed(official) for _ in range(args.repeat))
            t_pandas = statistics.median(timed(lambda: official().to_pandas()) for _ in range(args.repeat))
            t_ours = statistics.median(timed(ours) for _ in range(args.repeat))
            print(
                f"{name:<10} {rows:>8,} {t_ours:>15.3f} {t_official:>13.3f} {t_pandas:>20.3f} "
                f"{t_ours / t_official:>13.2f}x {t_ours / t_pandas:>20.2f}x",
                flush=True,
            )
        print(f"# as of the middle of {args.commits + 1} commits; median of {args.repeat} reads each")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
