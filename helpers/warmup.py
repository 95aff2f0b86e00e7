"""The set-up step that trains the local JVMs' start-up caches, each once per Java and jar set:

- the class-data archive of local Spark drivers (:mod:`helpers.local.class_data`): a training
  driver runs what the workbook's drivers run, a first Silver round of a small synthetic ``sale``
  backlog into a Copy-on-Write and a Merge-on-Read table and snapshot reads of both, while the JVM
  lists every class it loads; then the archive is written;
- the AOT cache of the local Trino (:meth:`helpers.local.trino.LocalTrino.make_aot_cache`, Java 25
  or newer): a Trino of its own runs a few statements and writes the cache as it stops.

    python -m helpers.warmup      # scripts/bootstrap.sh runs it; nothing to do when made

It prints one line per cache: made or found. A failure is reported and the set-up goes on: without
a cache the JVM loads its classes from the jars, as before.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from helpers.bronze.synthetic import write_sale_backlog
from helpers.errors import JarsMissingError
from helpers.isolation import isolated_params
from helpers.local.class_data import archive_for, publish_archive
from helpers.local.trino import LocalTrino
from helpers.silver.ingest import ingest_table
from helpers.spark import build_spark_session, spark_conf

__all__ = ["main", "train", "train_trino"]

#: The training backlog: a snapshot of every key, then updates and deletes, in two Bronze files.
_EVENTS, _KEYS, _BATCH = 3_000, 1_000, 2_000


def train() -> Path:
    """Make the archive for the drivers of the ``ci`` parameters' jars (every local session's,
    unless the lake is on S3), or find it made.

    Returns:
        The archive.

    Raises:
        SparkSetupError: when the archive cannot be written.
    """
    overrides = {"spark.catalog": "none", "silver.sync": False}
    with isolated_params("wb-warmup-", overrides) as params:
        conf = spark_conf(params)
        jars = [j for j in conf.get("spark.driver.extraClassPath", "").split(os.pathsep) if j]
        found = archive_for(jars)
        if found is not None:
            return found
        with tempfile.TemporaryDirectory(prefix="wb-warmup-classes-") as folder:
            class_list = Path(folder) / "classes.lst"
            options = f"{conf['spark.driver.extraJavaOptions']} -XX:DumpLoadedClassList={class_list}"
            spark = build_spark_session(
                params, app_name="workbook-warmup", conf={"spark.driver.extraJavaOptions": options}
            )
            try:
                write_sale_backlog(params.path(params.lake.bronze), events=_EVENTS, keys=_KEYS, batch=_BATCH)
                for name in ("sale", "sale_mor"):
                    table = next(t for t in params.silver.tables if t.name == name)
                    ingest_table(params, table, spark=spark)
                    silver = Path(params.path(params.lake.silver)) / name
                    spark.read.format("hudi").load(str(silver)).groupBy("qtysold").count().collect()
                system: Any = spark.sparkContext._jvm.System  # type: ignore[union-attr]
                classpath = str(system.getProperty("java.class.path"))
                java = Path(str(system.getProperty("java.home"))) / "bin" / "java"
            finally:
                spark.stop()
            return publish_archive(jars, class_list, classpath, java.resolve())


def train_trino() -> Path | None:
    """Make the local Trino's AOT cache, or find it made, with a Trino of its own (free ports, a
    state folder of its own, removed after).

    Returns:
        The cache, or None when the ``java`` that runs Trino is older than Java 25.

    Raises:
        JarsMissingError: when the set-up did not fetch Trino (jar set ``trino``).
        StackError: when the training server fails, or writes no usable cache.
    """
    with isolated_params("wb-warmup-trino-") as params:
        return LocalTrino(params).make_aot_cache()


def _report_archive() -> str:
    started = time.monotonic()
    try:
        archive = train()
    except Exception as exc:  # noqa: BLE001 - reported; the set-up goes on without it
        return (
            "[warmup] no class-data archive for Spark drivers (they load their classes from the jars): "
            f"{type(exc).__name__}: {exc}"
        )
    return f"[warmup] Spark drivers' class-data archive: {archive} ({time.monotonic() - started:.0f} s)"


def _report_trino() -> str:
    started = time.monotonic()
    try:
        cache = train_trino()
    except JarsMissingError:
        return "[warmup] no AOT cache for Trino: its jar set (trino) is not fetched"
    except Exception as exc:  # noqa: BLE001 - reported; the set-up goes on without it
        cause = f"{type(exc).__name__}: {exc}"
        return f"[warmup] no AOT cache for Trino (it loads its classes from the jars): {cause}"
    if cache is None:
        return "[warmup] no AOT cache for Trino: its java is older than Java 25"
    return f"[warmup] Trino's AOT cache: {cache} ({time.monotonic() - started:.0f} s)"


def main() -> int:
    """Train both caches side by side (each is mostly one JVM's single-threaded work: on a fresh
    clone of this machine kind 66 s together against 108 s one after the other) and print a line
    for each, the archive's first."""
    with ThreadPoolExecutor(2, thread_name_prefix="warmup") as pool:
        lines = [pool.submit(_report_archive), pool.submit(_report_trino)]
        for line in lines:
            print(line.result(), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
