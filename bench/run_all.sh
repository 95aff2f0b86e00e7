#!/usr/bin/env bash
# Every benchmark, one after the other (see bench/README.md); each prints its figures beside the
# baseline measured in the same run. The peers' jars (Delta Lake, Iceberg) and the local-kafka
# profile's (broker, Connect worker, schema registry, Spark's Kafka source) are fetched first.
#   bash bench/run_all.sh                      all of them (./workbook bench)
#   bash bench/run_all.sh --from bench_idle    that one and the ones after it (a run stopped there)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
py=".venv/bin/python"
from=""
if [ "${1:-}" = --from ]; then
  from="${2:?--from needs a benchmark name, e.g. bench_idle}"
  from="${from%.py}"
  from="${from#bench/}"
fi

# script | arguments | what it measures (one line each, in run order)
BENCHES=(
  "bench_load||TICKIT full-scale bulk load into the local servers"
  "bench_capture||commit-to-Bronze latency and snapshot throughput (own servers)"
  "bench_silver||(a) full load from Bronze, (b) commit-to-Silver latency (own servers)"
  "bench_streamer||the streamer engine (HoodieStreamer 0.14.0) vs the PySpark engine (baseline), same Bronze"
  "bench_bronze_read||Bronze read by the driver's Python (baseline) vs on Spark's executors"
  "bench_backlog||first loads of 0.45 M, 2.25 M and 9 M events, beside the old driver-side path; the spread over a local cluster"
  "bench_profiles||the embedded capture profile (baseline) vs the local-kafka profile (own servers)"
  "bench_upsert||(c) upsert 10% of sale, Hudi CoW/MoR vs Delta Lake MERGE and Iceberg MERGE INTO, then what each Hudi option buys in Silver's layout"
  "bench_settings||one-row upserts into sale with Silver's Hudi settings (baseline) vs each setting put back to Hudi's default"
  "bench_idle||CPU of the continuous Silver job and the capture workers while nothing changes, idle pacing vs a round every 0.5 s"
  "bench_conformance||the short conformance set, scenarios side by side sharing their rounds vs one at a time (baseline), full scale"
  "bench_workbook||the whole workbook at full scale, first run and re-run, with peak memory"
  "bench_workbook|--busy-cores 1|the first run beside one busy core vs a quiet first run (baseline)"
  "bench_compare||comparing a 172,000-row table, vectorised vs row by row"
  "bench_timetravel||as-of reads, the official Rust reader vs the official Spark datasource"
  "bench_query||notebook 05's SQL on Trino over the Hive Metastore vs DuckDB (baseline), same Silver"
)
if [ -n "$from" ]; then
  known=0
  for entry in "${BENCHES[@]}"; do [ "${entry%%|*}" = "$from" ] && known=1; done
  if [ "$known" = 0 ]; then
    echo "run_all.sh: no benchmark named $from (one of: $(printf '%s\n' "${BENCHES[@]}" | cut -d'|' -f1 | sort -u | tr '\n' ' '))" >&2
    exit 2
  fi
fi

bash scripts/fetch_jars.sh spark metastore trino bench kafka kafka-spark registry
WORKBOOK_JAR_SETS="spark metastore streamer" bash scripts/bootstrap.sh  # the streamer runtime
started=""
[ -z "$from" ] && started=1
# each benchmark records the issues' targets it measures (bench/_targets.py); a full run starts a
# new record, a run resumed with --from keeps the earlier benchmarks' figures
if [ -n "$started" ]; then "$py" bench/_targets.py --new; fi
for entry in "${BENCHES[@]}"; do
  IFS='|' read -r name args what <<<"$entry"
  [ "$name" = "$from" ] && started=1
  [ -n "$started" ] || continue
  echo "== bench/$name.py${args:+ $args}: $what"
  # shellcheck disable=SC2086 # the arguments are words
  "$py" "bench/$name.py" $args
  echo
done
"$py" bench/_targets.py
