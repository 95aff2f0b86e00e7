"""The one place that builds the workbook's SparkSession.

Every notebook, test and benchmark gets its session from :func:`build_spark_session`, so the
settings that matter for correctness (UTC session time zone, the worker Python interpreter,
Arrow) are the same everywhere. On EMR the same function is called with ``master=None``-like
overrides coming from the parameters; locally it starts ``local[2]``.

Example:
    >>> from helpers.spark import build_spark_session, hudi_datasource_available
    >>> spark = build_spark_session()                     # doctest: +SKIP
    >>> hudi_datasource_available(spark)                  # doctest: +SKIP
    False
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

from helpers.errors import WorkbookError

if TYPE_CHECKING:  # pragma: no cover - typing only
    from pyspark.sql import SparkSession

__all__ = [
    "AVRO_FORMAT_CLASS",
    "DEFAULT_SPARK_CONF",
    "HUDI_DATASOURCE_CLASS",
    "SparkSetupError",
    "avro_format_name",
    "build_spark_session",
    "hudi_datasource_available",
    "jvm_class_available",
]

#: Class of the official Hudi Spark datasource (present in the Hudi Spark bundle, e.g. on EMR).
HUDI_DATASOURCE_CLASS = "org.apache.hudi.DefaultSource"

#: Fully qualified Avro file format; works where the short name ``avro`` is not registered.
AVRO_FORMAT_CLASS = "org.apache.spark.sql.avro.AvroFileFormat"

#: Settings applied to every session (caller's ``conf`` wins). Sized for 2 cores / 24 GiB.
DEFAULT_SPARK_CONF: Mapping[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.memory": "6g",
    "spark.driver.maxResultSize": "2g",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.sql.execution.pythonUDF.arrow.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.python.filterPushdown.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
}

_QUIET_LOG_LEVEL = "WARN"


class SparkSetupError(WorkbookError):
    """The SparkSession could not be built or inspected."""


def build_spark_session(
    app_name: str = "cdc-lakehouse-workbook",
    master: str | None = "local[2]",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Build (or return the running) SparkSession with the workbook's settings.

    ``getOrCreate`` semantics: when a session is already running in this process it is returned
    and only runtime-modifiable settings from ``conf`` are applied to it (static settings such as
    ``spark.driver.memory`` only take effect on the first call, before the JVM starts).

    The worker Python is pinned to this interpreter (``PYSPARK_PYTHON`` and
    ``PYSPARK_DRIVER_PYTHON`` = ``sys.executable``), so workers import the same pyarrow,
    hudi and ``helpers`` as the driver.

    Args:
        app_name: Spark application name.
        master: Spark master URL; ``None`` leaves it to the environment (``spark-submit``,
            EMR Studio, ``SPARK_MASTER``).
        conf: Extra or overriding Spark settings; they win over :data:`DEFAULT_SPARK_CONF`.

    Returns:
        The active SparkSession, session time zone UTC, Arrow enabled, log level WARN.

    Raises:
        SparkSetupError: if the JVM or the session cannot be started (e.g. no Java).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    settings: dict[str, str] = dict(DEFAULT_SPARK_CONF)
    settings.update(conf or {})
    try:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            _apply_runtime_conf(active, conf or {})
            return active
        builder = SparkSession.builder.appName(app_name)
        if master is not None:
            builder = builder.master(master)
        for key, value in settings.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(_QUIET_LOG_LEVEL)
    except Exception as exc:  # noqa: BLE001 - JVM start-up errors have many types
        raise SparkSetupError(
            f"Failed to build SparkSession {app_name!r} on {master!r}: {exc}. "
            "Check that Java 17 is installed (java -version) and JAVA_HOME is set."
        ) from exc
    return spark


def _apply_runtime_conf(spark: SparkSession, conf: Mapping[str, str]) -> None:
    """Apply the runtime-modifiable settings of ``conf`` to a running session."""
    for key, value in conf.items():
        try:
            if spark.conf.isModifiable(key):
                spark.conf.set(key, value)
        except Exception:  # noqa: BLE001 - static settings cannot change after start-up
            continue


def jvm_class_available(spark: SparkSession, class_name: str) -> bool:
    """Tell whether a JVM class can be loaded by the session's context class loader.

    Args:
        spark: A classic (non-Connect) SparkSession.
        class_name: Fully qualified Java class name.

    Returns:
        True if ``Class.forName`` succeeds with the thread's context class loader (which sees
        ``spark.jars``), False otherwise, including on Spark Connect where no JVM is reachable.
    """
    try:
        jvm = spark.sparkContext._jvm
        if jvm is None:
            return False
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(class_name, False, loader)
        return True
    except Exception:  # noqa: BLE001 - Py4JJavaError (ClassNotFound), Connect sessions, ...
        return False


def hudi_datasource_available(spark: SparkSession) -> bool:
    """Tell whether the official Hudi Spark datasource (``format("hudi")``) can be used.

    True on EMR (Hudi bundle on the classpath), False here where Maven is unreachable.

    Args:
        spark: The active SparkSession.

    Returns:
        True if :data:`HUDI_DATASOURCE_CLASS` loads in the driver JVM.
    """
    return jvm_class_available(spark, HUDI_DATASOURCE_CLASS)


def avro_format_name(spark: SparkSession) -> str:
    """Return the format name to pass to ``spark.read.format`` for Avro files.

    Args:
        spark: The active SparkSession.

    Returns:
        ``"avro"`` if the short name is registered (spark-avro on the classpath, e.g. EMR),
        else :data:`AVRO_FORMAT_CLASS`, which pyspark's bundled jars can load by class name.
    """
    try:
        jvm = spark.sparkContext._jvm
        if jvm is None:
            return AVRO_FORMAT_CLASS
        conf = spark._jsparkSession.sessionState().conf()
        jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource("avro", conf)
        return "avro"
    except Exception:  # noqa: BLE001 - AnalysisException when the short name is unknown
        return AVRO_FORMAT_CLASS
