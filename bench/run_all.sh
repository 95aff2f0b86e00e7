#!/usr/bin/env bash
# Every benchmark, one after the other (see bench/README.md). Extra arguments,
# e.g. `./workbook bench --quick`, go to bench_hudi.py.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
py=".venv/bin/python"
echo "== bench/bench_load.py: TICKIT full-scale bulk load into the local servers"
"$py" bench/bench_load.py
echo
echo "== bench/bench_hudi.py: Hudi upsert / bulk insert / time travel vs delta-rs, Spark Parquet, hudi-rs"
"$py" bench/bench_hudi.py "$@"

echo
echo "== bench/bench_capture.py: commit-to-Bronze latency and snapshot throughput (own servers)"
"$py" bench/bench_capture.py

echo
echo "== bench/bench_silver.py: full load from Bronze and commit-to-Silver latency (own servers)"
"$py" bench/bench_silver.py

echo
echo "== bench/bench_timetravel.py: as-of read of sale, helpers.timetravel.as_of vs the official reader (no servers)"
"$py" bench/bench_timetravel.py
