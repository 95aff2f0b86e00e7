"""The test session's Spark driver: what it listens on, and what it can load."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from helpers.spark import HUDI_DATASOURCE_CLASS, hudi_datasource_available, jvm_class_available

pytestmark = pytest.mark.integration


def test_the_driver_listens_on_loopback_only(spark: Any) -> None:
    """Every TCP socket the driver JVM listens on (Py4J gateway, RPC, block manager) is bound to
    127.0.0.1; there is at least the RPC endpoint and the block manager."""
    pid = spark.sparkContext._gateway.proc.pid
    out = subprocess.run(["ss", "-H", "-ltnp"], capture_output=True, text=True, check=True).stdout
    listening = [line.split()[3] for line in out.splitlines() if f"pid={pid}," in line]
    assert len(listening) >= 2, out
    addresses = {re.sub(r":\d+$", "", a).strip("[]").removeprefix("::ffff:") for a in listening}
    assert addresses == {"127.0.0.1"}, listening


def test_the_official_bundle_is_loaded_from_the_project_jars(spark: Any) -> None:
    """The Hudi datasource, its Hive sync tool and Spark's Avro format load in the driver."""
    assert hudi_datasource_available(spark)
    assert jvm_class_available(spark, "org.apache.hudi.hive.HiveSyncTool")
    assert jvm_class_available(spark, "org.apache.spark.sql.avro.AvroFileFormat")
    jvm = spark.sparkContext._jvm
    source = jvm.java.lang.Class.forName(HUDI_DATASOURCE_CLASS).getPackage()
    assert source.getImplementationTitle() == "hudi-spark3.5-bundle_2.12"
    assert source.getImplementationVersion() == "1.0.2"
    assert HUDI_DATASOURCE_CLASS == "org.apache.hudi.DefaultSource"
    assert spark.version == "3.5.6"


def test_the_metastore_password_is_in_no_command_line(spark: Any, spark_params: Any) -> None:
    """The catalog works through the session's metastore, yet its password is on no process's
    command line (PySpark passes builder settings to spark-submit as --conf arguments): it is in
    the client's hive-site.xml, readable by its owner only."""
    home = spark_params.state_path / "metastore"
    props = (home / "derby.properties").read_text(encoding="utf-8")
    password = next(line.split("=", 1)[1] for line in props.splitlines() if line.startswith("derby.user."))
    assert len(password) >= 16
    spark.sql("CREATE DATABASE IF NOT EXISTS password_probe")
    assert "password_probe" in {r[0] for r in spark.sql("SHOW DATABASES").collect()}
    seen = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if password.encode() in cmdline.read_bytes():
                seen.append(cmdline.parent.name)
        except OSError:
            continue
    assert seen == [], f"the metastore password is on the command line of pid(s) {seen}"
    client = home / "client" / "hive-site.xml"
    assert password in client.read_text(encoding="utf-8")
    assert client.stat().st_mode & 0o777 == 0o600
