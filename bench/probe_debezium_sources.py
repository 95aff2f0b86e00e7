"""Probe: Hudi 0.14.0's own Debezium Kafka source (``PostgresDebeziumSource``) on the local-kafka
profile, without Confluent's deserializer (issue 27's third mode: "measure and report what works").

Not a benchmark of figures against a baseline: it runs once and prints what happened, step by step.

1. An isolated local-kafka stack at CI scale (PostgreSQL, MariaDB, broker, Connect worker, Apicurio
   Registry), the workbook's connectors registered as usual.
2. One more connector, the unflattened twin of ``helpers.capture.raw_topics``, for ``ems.event``
   only, **without** the workbook's transforms: Hudi's Debezium sources read Debezium's envelope
   (``after.*``, ``source.lsn``), which the workbook's ``ExtractNewRecordState`` flattens away.
   Same Apicurio Avro converter (Confluent wire format).
3. HoodieStreamer 0.14.0 on the streamer runtime (pyspark 3.4.1) with ``PostgresDebeziumSource``,
   ``PostgresDebeziumAvroPayload``, the registry's Confluent-compatible API for the envelope's
   schema (the source's own ``SchemaRegistryProvider``; no ``--schemaprovider-class``: given one,
   0.14.0 converts the flattened rows with the envelope's schema and fails with "null value for
   (non-nullable) Source at Envelope.source", measured) and Apicurio's ``AvroKafkaDeserializer``
   in place of Confluent's ``KafkaAvroDeserializer`` (``io.confluent``, not on Maven Central), plus Spark's
   ``spark-streaming-kafka-0-10`` and ``spark-token-provider-kafka-0-10`` 3.4.1 (jar set ``streamer``).
4. The Silver table it wrote against the source, row by row; then an update and a delete at the
   source, a second run, and the comparison again.

Run: ``.venv/bin/python bench/probe_debezium_sources.py [--keep]``. What became of it: the streamer's
third mode, ``silver.streamer.source: kafka`` (``docs/streamer.md``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from psycopg import sql  # noqa: E402
from support.kafka_profile import kafka_overrides  # noqa: E402

from helpers.capture.raw_topics import raw_spec  # noqa: E402
from helpers.capture.register import connector_specs  # noqa: E402
from helpers.hudi.read import read_snapshot  # noqa: E402
from helpers.isolation import isolated_params  # noqa: E402
from helpers.jars import project_archive, project_jars, shaded_jar  # noqa: E402
from helpers.local.kafka import LocalKafka  # noqa: E402
from helpers.local.registry import LocalRegistry  # noqa: E402
from helpers.local.stack import LocalStack  # noqa: E402
from helpers.params import project_root  # noqa: E402
from helpers.pipeline import ensure_pipeline  # noqa: E402
from helpers.poll import wait_until  # noqa: E402
from helpers.silver.streamer import SPARK_CONF, runtime_python  # noqa: E402
from helpers.sources.api import LocalSources  # noqa: E402

TABLE, KEY = "event", "eventid"
TOPIC = f"tickit_raw.ems.{TABLE}"  # helpers.capture.raw_topics
TABLE_ID, KEY_ID = sql.Identifier("ems", TABLE), sql.Identifier(KEY)


def _register_raw_connector(params: object, kafka: LocalKafka) -> None:
    spec = next(s for s in connector_specs(params, LocalSources(params).endpoints()) if s.source == "ems")  # type: ignore[arg-type]
    raw = raw_spec(params, spec)  # type: ignore[arg-type]
    config = {**raw.config, "table.include.list": f"ems.{TABLE}"}  # one table is enough here
    import requests

    answer = requests.put(f"{kafka.url}/connectors/{raw.name}/config", json=config, timeout=30)
    answer.raise_for_status()


def _props(folder: Path, params: object, kafka: LocalKafka, registry: LocalRegistry) -> Path:
    lines = {
        "bootstrap.servers": kafka.bootstrap,
        "auto.offset.reset": "earliest",
        "group.id": "probe-debezium",
        "hoodie.deltastreamer.source.kafka.topic": TOPIC,
        "hoodie.deltastreamer.schemaprovider.registry.url": (
            f"{registry.ccompat_url}/subjects/{TOPIC}-value/versions/latest"
        ),
        # 0.14.0 looks this key up without a default and fails when it is absent ("Property
        # ...schemaconverter not found", measured); empty means no converter
        "hoodie.streamer.schemaprovider.registry.schemaconverter": "",
        "hoodie.deltastreamer.source.kafka.value.deserializer.class": (
            "io.apicurio.registry.serde.avro.AvroKafkaDeserializer"
        ),
        "apicurio.registry.url": f"{registry.url}/apis/registry/v2",
        "apicurio.registry.as-confluent": "true",
        "apicurio.registry.use-id": "contentId",
        "apicurio.registry.headers.enabled": "false",
        "hoodie.datasource.write.recordkey.field": KEY,
        "hoodie.datasource.write.partitionpath.field": "",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
        "hoodie.datasource.write.precombine.field": "_event_lsn",
        "hoodie.table.name": f"{TABLE}_raw",
    }
    path = folder / "debezium.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in lines.items()))
    return path


def _run_streamer(folder: Path, props: Path, extra: list[Path]) -> subprocess.CompletedProcess[str]:
    jars = [*project_jars(("streamer",)), *extra]
    python = runtime_python()
    spark_submit = project_root() / ".venv-streamer" / "bin" / "spark-submit"
    argv = [
        str(spark_submit),
        "--master",
        "local[2]",
        "--driver-memory",
        "1g",
        "--jars",
        ",".join(str(j) for j in jars),
        *[f"--conf={k}={v}" for k, v in SPARK_CONF.items()],
        "--class",
        "org.apache.hudi.utilities.streamer.HoodieStreamer",
        str(shaded_jar("hudi-utilities-streamer", "streamer")),
        "--table-type",
        "COPY_ON_WRITE",
        "--source-class",
        "org.apache.hudi.utilities.sources.debezium.PostgresDebeziumSource",
        "--payload-class",
        "org.apache.hudi.common.model.debezium.PostgresDebeziumAvroPayload",
        "--source-ordering-field",
        "_event_lsn",
        "--target-base-path",
        str(folder / f"{TABLE}_raw"),
        "--target-table",
        f"{TABLE}_raw",
        "--props",
        str(props),
        "--op",
        "UPSERT",
    ]
    env = {
        **os.environ,
        "PYSPARK_PYTHON": str(python),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_HOME": str(next((python.parent.parent / "lib").glob("python3*/site-packages/pyspark"))),
    }
    return subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=900)


def _update_and_delete(stack: LocalStack) -> None:
    """At the source: the first row renamed, the second deleted."""
    with stack.connect_postgres("ems", autocommit=True) as conn:
        keys = [
            r[0]
            for r in conn.execute(sql.SQL("SELECT {} FROM {} ORDER BY 1 LIMIT 2").format(KEY_ID, TABLE_ID))
        ]
        rename = sql.SQL("UPDATE {} SET eventname = eventname || ' (moved)' WHERE {} = %s")
        conn.execute(rename.format(TABLE_ID, KEY_ID), (keys[0],))
        conn.execute(sql.SQL("DELETE FROM {} WHERE {} = %s").format(TABLE_ID, KEY_ID), (keys[1],))


def _plain(value: object) -> object:
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


def _compare(stack: LocalStack, folder: Path) -> tuple[int, int, list[str]]:
    """Source and Silver row counts, and per differing column one example (key, source, Silver)."""
    with stack.connect_postgres("ems") as conn:
        cur = conn.execute(sql.SQL("SELECT * FROM {}").format(TABLE_ID))
        names = [c.name for c in cur.description]
        source = {r[0]: dict(zip(names, r, strict=True)) for r in cur.fetchall()}
    silver = {int(r[KEY]): r for r in read_snapshot(str(folder / f"{TABLE}_raw")).to_pylist()}
    differing: dict[str, str] = {}
    for key in source.keys() & silver.keys():
        for name in names:
            ours, theirs = _plain(source[key][name]), _plain(silver[key].get(name))
            if ours != theirs and name not in differing:
                differing[name] = f"{name}: key {key} source {ours!r} Silver {theirs!r}"
    if source.keys() != silver.keys():
        only_source, only_silver = len(source.keys() - silver.keys()), len(silver.keys() - source.keys())
        differing["keys"] = f"keys only in the source {only_source}, only in Silver {only_silver}"
    return len(source), len(silver), list(differing.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    overrides = {**kafka_overrides(avro=True), "tickit.scale": 0.1}
    with isolated_params("dbzprobe-", overrides, env="ci", keep=args.keep) as params:
        started = time.monotonic()
        ensure_pipeline(params)
        print(f"1. stack and the workbook's connectors: {time.monotonic() - started:.1f} s")
        kafka, registry, stack = LocalKafka(params), LocalRegistry(params), LocalStack(params)
        _register_raw_connector(params, kafka)
        wait_until(
            lambda: requests_subject(registry),
            timeout_s=120,
            what=f"the subject {TOPIC}-value in the registry",
        )
        print(f"2. the unflattened twin registered; {TOPIC}-value in the registry")
        folder = params.state_path / "probe"
        folder.mkdir(parents=True, exist_ok=True)
        props = _props(folder, params, kafka, registry)
        converter = project_archive("registry", "apicurio-registry-distro-connect-converter")
        extra = sorted(converter.glob("apicurio-*.jar"))  # Spark's Kafka jars: in the streamer set
        for step in ("snapshot", "update and delete"):
            if step != "snapshot":
                _update_and_delete(stack)
                time.sleep(5)
            t0 = time.monotonic()
            done = _run_streamer(folder, props, extra)
            print(f"3. HoodieStreamer ({step}): exit {done.returncode} in {time.monotonic() - t0:.1f} s")
            if done.returncode != 0:
                errors = [
                    line for line in (done.stdout + done.stderr).splitlines()
                    if "Exception" in line or "Error" in line or "Caused by" in line
                ]  # fmt: skip
                print("\n".join(errors[:15]))
                return
            source_n, silver_n, differing = _compare(stack, folder)
            print(f"4. ({step}) source {source_n} rows, Silver {silver_n} rows, equal: {not differing}")
            for line in differing:
                print(f"   differs: {line}")


def requests_subject(registry: LocalRegistry) -> bool:
    import requests

    try:
        answer = requests.get(f"{registry.ccompat_url}/subjects", timeout=5)
        return f"{TOPIC}-value" in json.loads(answer.text)
    except (requests.RequestException, ValueError):
        return False


if __name__ == "__main__":
    main()
