#!/usr/bin/env bash
# Every benchmark, one after the other (see bench/README.md); each prints its figures beside the
# baseline measured in the same run. The peers' jars (Delta Lake, Iceberg) and the local-kafka
# profile's (broker, Connect worker, Spark's Kafka source) are fetched first.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
py=".venv/bin/python"
bash scripts/fetch_jars.sh spark metastore trino bench kafka kafka-spark
WORKBOOK_JAR_SETS="spark metastore streamer" bash scripts/bootstrap.sh  # the streamer runtime
echo "== bench/bench_load.py: TICKIT full-scale bulk load into the local servers"
"$py" bench/bench_load.py
echo
echo "== bench/bench_capture.py: commit-to-Bronze latency and snapshot throughput (own servers)"
"$py" bench/bench_capture.py
echo
echo "== bench/bench_silver.py: (a) full load from Bronze, (b) commit-to-Silver latency (own servers)"
"$py" bench/bench_silver.py
echo
echo "== bench/bench_streamer.py: the streamer engine (HoodieStreamer 0.14.0) vs the PySpark engine (baseline), same Bronze"
"$py" bench/bench_streamer.py
echo
echo "== bench/bench_bronze_read.py: Bronze read by the driver's Python (baseline) vs on Spark's executors"
"$py" bench/bench_bronze_read.py
echo
echo "== bench/bench_backlog.py: first loads of 0.45 M, 2.25 M and 9 M events, beside the old driver-side path; the spread over a local cluster"
"$py" bench/bench_backlog.py
echo
echo "== bench/bench_profiles.py: the embedded capture profile (baseline) vs the local-kafka profile (own servers)"
"$py" bench/bench_profiles.py
echo
echo "== bench/bench_upsert.py: (c) upsert 10% of sale, Hudi CoW/MoR vs Delta Lake MERGE and Iceberg MERGE INTO, then what each Hudi option buys in Silver's layout"
"$py" bench/bench_upsert.py
echo
echo "== bench/bench_idle.py: CPU of the continuous Silver job and the capture workers while nothing changes, idle pacing vs a round every 0.5 s"
"$py" bench/bench_idle.py
echo
echo "== bench/bench_conformance.py: the short conformance set, scenarios side by side sharing their rounds vs one at a time (baseline), full scale"
"$py" bench/bench_conformance.py
echo
echo "== bench/bench_workbook.py: the whole workbook at full scale, first run and re-run, with peak memory"
"$py" bench/bench_workbook.py
echo
echo "== bench/bench_workbook.py --busy-cores 1: the first run beside one busy core vs a quiet first run (baseline)"
"$py" bench/bench_workbook.py --busy-cores 1
echo
echo "== bench/bench_compare.py: comparing a 172,000-row table, vectorised vs row by row"
"$py" bench/bench_compare.py
echo
echo "== bench/bench_timetravel.py: as-of reads, the official Rust reader vs the official Spark datasource"
"$py" bench/bench_timetravel.py
echo
echo "== bench/bench_query.py: notebook 05's SQL on Trino over the Hive Metastore vs DuckDB (baseline), same Silver"
"$py" bench/bench_query.py
