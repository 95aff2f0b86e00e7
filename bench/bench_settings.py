"""What each Hudi setting of Silver buys for small commits: one-row upserts into TICKIT ``sale``.

    .venv/bin/python bench/bench_settings.py            # 172,456 rows, median of 15 one-row upserts

No servers. Writes ``sale`` (the generator's 172,456 rows, Silver's columns) with the official
Hudi writer the way ingestion creates a table (bulk insert into key-range file groups of
``silver.file_group_rows``), then times single-row upserts through ``write_hudi`` with exactly the
options ingestion uses (the baseline, measured in the same run), and with one setting at a time
put back to Hudi's default: the embedded timeline server, timeline-server markers, the metadata
table, Hive sync on every commit (against the workbook's local metastore); then without Hudi's
CDC log, with the cleaner planned every 10 commits, without the archival check on each commit,
without Hudi's combine before the upsert, and with the table in one file group or in groups of a
half and a quarter of ``silver.file_group_rows``. Copy-on-Write and Merge-on-Read. Prints the
median and the difference to the baseline.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_timetravel import changed, silver_sale  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="one-row upserts per variant (median)")
    args = parser.parse_args(argv)

    import pyarrow as pa

    from helpers.hudi.api import write_hudi
    from helpers.local.metastore import LocalMetastore
    from helpers.params import SilverTableParams, load_params
    from helpers.silver.ingest import file_groups
    from helpers.silver.tables import silver_write_options, table_config
    from helpers.spark import build_spark_session

    work = Path(tempfile.mkdtemp(prefix="bench_settings_", dir="/tmp"))
    params = load_params(
        "local",  # what users run (the ci parameters' C1-only JIT would slow every write)
        {
            "state_dir": str(work / "st"),
            "lake.silver": str(work / "silver"),
            "local.metastore.port": 15421,
            "silver.database": "bench_settings",
        },
    )
    metastore = LocalMetastore(params)
    metastore.start()
    try:
        spark = build_spark_session(params, app_name="bench-settings")
        rows = silver_sale()
        staged = work / "in" / "base.parquet"
        staged.parent.mkdir(parents=True)
        import pyarrow.parquet as pq

        pq.write_table(rows, staged)
        base_df = spark.read.parquet(str(staged)).cache()
        base_df.count()
        one = changed(rows, 1).slice(0, 1)

        def single_row(i: int) -> Any:
            row = one.set_column(
                one.schema.get_field_index("_cdc_position"),
                "_cdc_position",
                pa.array([f"0000000002.{i:020d}.0000000000"]),
            )
            path = work / "in" / f"row{i}.parquet"
            pq.write_table(row, path)
            return spark.read.parquet(str(path))

        default_rows = params.silver.file_group_rows
        # (label, options put back or changed, rows per file group of the bulk insert; 0: one group)
        variants: list[tuple[str, dict[str, str], int]] = [
            ("the workbook's settings (baseline)", {}, default_rows),
            ("+ embedded timeline server", {"hoodie.embed.timeline.server": "true"}, default_rows),
            (
                "+ timeline-server markers",
                {
                    "hoodie.embed.timeline.server": "true",
                    "hoodie.write.markers.type": "TIMELINE_SERVER_BASED",
                },
                default_rows,
            ),
            ("+ metadata table", {"hoodie.metadata.enable": "true"}, default_rows),
            ("+ Hive sync on every commit", {"__sync": "true"}, default_rows),
            ("- Hudi's CDC log", {"hoodie.table.cdc.enabled": "false"}, default_rows),
            ("cleaner scheduled every 10 commits", {"hoodie.clean.max.commits": "10"}, default_rows),
            ("- archival check on every commit", {"hoodie.archive.automatic": "false"}, default_rows),
            ("- Hudi's combine before the upsert", {"hoodie.combine.before.upsert": "false"}, default_rows),
            ("+ the table in one file group", {}, 0),
            *[
                (f"file groups of {n:,} rows", {}, n)
                for n in (default_rows // 2, default_rows // 4)
                if n >= 1000
            ],
        ]
        print(
            f"# bench_settings  {rows.num_rows:,} rows, one-row upserts, median of {args.repeat}\n\n"
            "| table | settings | median s | p95 s | vs baseline |\n|---|---|---|---|---|",
            flush=True,
        )
        for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
            prepared = []
            for n, (label, extra, group_rows) in enumerate(variants):
                name = f"s_{table_type[:3].lower()}_{n}"
                table = SilverTableParams(
                    name=name, source="ecomm", table="sale", record_key=("salesid",), table_type=table_type
                )  # type: ignore[arg-type]
                options = silver_write_options(params, table)
                settings = dict(extra)
                sync = settings.pop("__sync", None)
                options.update(settings)
                base = table_config(params, table).base_path
                seed = {**options, "hoodie.datasource.write.operation": "bulk_insert"}
                config = table_config(params, table)
                frame = (
                    base_df.coalesce(1)
                    if not group_rows
                    else file_groups(base_df, rows.num_rows, config, group_rows)
                )
                write_hudi(frame, seed, base)
                if sync is None:
                    options["hoodie.datasource.hive_sync.enable"] = "false"
                prepared.append((label, options, base, []))
            # interleaved: every round upserts one row into each variant, so JVM warm-up and
            # machine noise fall on all of them alike; the first round is not counted
            for i in range(args.repeat + 1):
                for _label, options, base, times in prepared:
                    frame = single_row(i)
                    started = time.perf_counter()
                    write_hudi(frame, options, base)
                    if i:
                        times.append(time.perf_counter() - started)
            baseline = statistics.median(prepared[0][3])
            kind = "CoW" if table_type == "COPY_ON_WRITE" else "MoR"
            for label, _options, _base, times in prepared:
                median = statistics.median(times)
                p95 = statistics.quantiles(times, n=20)[18] if len(times) >= 4 else max(times)
                delta = "" if label == prepared[0][0] else f"{median - baseline:+.2f} s"
                print(f"| sale ({kind}) | {label} | {median:.2f} | {p95:.2f} | {delta} |", flush=True)
        spark.stop()
    finally:
        metastore.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
