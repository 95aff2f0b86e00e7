"""Measure generating and loading the full TICKIT data set (424,319 rows) into the local servers.

Not a test: a one-off measurement. It starts its own servers in a temporary state directory on
free ports (your ``.state`` is not touched), generates TICKIT at the given scale, loads it
(first load into empty tables), checks that a second call loads nothing, forces a reload
(delete + load in one transaction per table), and compares MariaDB's bulk paths on the
``listing`` table: ``LOAD DATA LOCAL INFILE`` versus batched multi-row ``INSERT``.

Run::

    .venv/bin/python bench/bench_load.py              # scale 1.0
    .venv/bin/python bench/bench_load.py --scale 0.1
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.isolation import isolated_folder, isolated_overrides
from helpers.local.stack import LocalStack  # noqa: E402
from helpers.params import load_params  # noqa: E402
from helpers.sources.sample.bulk import bulk_load_mariadb  # noqa: E402
from helpers.sources.sample.load import load_tickit  # noqa: E402
from helpers.sources.sample.tickit import generate_tickit  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=20080101)
    parser.add_argument("--skip-insert-comparison", action="store_true")
    args = parser.parse_args()

    state = isolated_folder("wbbench-")
    params = load_params(
        "local",
        overrides={**isolated_overrides(state), "tickit.scale": args.scale, "tickit.seed": args.seed},
    )
    stack = LocalStack(params)
    try:
        started = time.perf_counter()
        stack.start()
        print(f"servers started in {time.perf_counter() - started:.1f} s (state {state})")

        started = time.perf_counter()
        tables = generate_tickit(args.scale, args.seed)
        generate_s = time.perf_counter() - started
        rows = sum(t.num_rows for t in tables.values())
        print(f"generated {rows:,} rows in {generate_s:.2f} s")

        first_load_s = 0.0
        for label, reload in (("first load", False), ("second call", False), ("forced reload", True)):
            report = load_tickit(stack, params, reload=reload, tables=tables)
            first_load_s = first_load_s or report.seconds
            print(f"\n{label}: {report.rows_loaded:,} rows in {report.seconds:.2f} s", end="")
            if report.rows_loaded:
                print(f" = {report.rows_loaded / report.seconds:,.0f} rows/s", end="")
            print()
            for t in report.tables:
                rate = f"{t.rows / t.seconds:>10,.0f} rows/s" if t.loaded and t.seconds else ""
                print(f"  {t.source:6} {t.table:9} {t.rows:>8,} rows {t.seconds:6.2f} s {rate}  ({t.reason})")
        total = generate_s + first_load_s
        print(f"\ngenerate + first load: {total:.2f} s = {rows / total:,.0f} rows/s (goal: under 60 s)")

        if not args.skip_insert_comparison:
            listing = tables["listing"]
            with stack.connect_mariadb("ecomm") as conn, conn.cursor() as cur:
                for method in ("load_data", "insert"):
                    cur.execute("CREATE TABLE `ecomm`.`bench_listing` LIKE `ecomm`.`listing`")
                    started = time.perf_counter()
                    bulk_load_mariadb(conn, "ecomm", "bench_listing", listing, method=method)  # type: ignore[arg-type]
                    conn.commit()
                    seconds = time.perf_counter() - started
                    cur.execute("DROP TABLE `ecomm`.`bench_listing`")
                    print(
                        f"MariaDB {method:9}: listing {listing.num_rows:,} rows in {seconds:.2f} s "
                        f"= {listing.num_rows / seconds:,.0f} rows/s"
                    )
    finally:
        stack.stop()
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
