"""Set-up of the JVM side: the pinned jars (fetched, checked, found) and the Spark settings every
session gets (the official Hudi bundle, loopback only, the metastore)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.project import project_copy

from helpers.errors import SparkSetupError
from helpers.jars import hadoop_classes_jar, manifest, project_jars
from helpers.params import LEAN_JIT, load_params, project_root
from helpers.spark import LOCAL_FILE_SYSTEMS, local_driver_options, spark_conf

ROOT = project_root()


def test_manifest_pins_the_official_bundle_and_what_emr_runs() -> None:
    """Hudi 1.0.2's Spark 3.5 bundle and the matching spark-avro, each with a SHA-256."""
    spark = {coords for coords, _, _ in manifest(("spark",))}
    assert spark == {
        "org.apache.hudi:hudi-spark3.5-bundle_2.12:1.0.2",
        "org.apache.spark:spark-avro_2.12:3.5.6",
    }
    for _, name, sha in manifest(("spark", "metastore", "bench")):
        assert name.endswith(".jar") and len(sha) == 64 and int(sha, 16) >= 0


def test_a_missing_jar_names_the_set_up_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project copy without .jars/: building a session's settings fails before the JVM starts,
    naming the missing coordinates and ./workbook setup."""
    monkeypatch.setenv("WORKBOOK_ROOT", str(project_copy(tmp_path)))
    with pytest.raises(SparkSetupError, match=r"hudi-spark3.5-bundle_2.12:1.0.2.*run ./workbook setup"):
        spark_conf(load_params("ci", overrides={"spark.catalog": "none"}))


@pytest.fixture
def jars_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project copy whose ``.jars/`` holds an empty file for every pinned jar of the default sets:
    the settings are built without the set-up (the unit tier needs none)."""
    monkeypatch.setenv("WORKBOOK_ROOT", str(project_copy(tmp_path, jars=("spark", "metastore"))))


@pytest.mark.usefixtures("jars_in_place")
def test_every_session_loads_the_project_jars_and_binds_to_loopback() -> None:
    """The settings: the official bundle on spark.jars and the driver class path, Hudi's Kryo
    registrar, SQL extension and catalog, driver and block manager on 127.0.0.1, UI off. A local
    session also loads the workbook's Hadoop classes for its ``file:`` file system; a cluster's
    (spark.master empty) keeps its own."""
    params = load_params("ci", overrides={"spark.catalog": "none"})
    conf = spark_conf(params)
    jars = conf["spark.jars"].split(",")
    assert [Path(j) for j in jars] == [*project_jars(), hadoop_classes_jar()]
    assert {key: conf[key] for key in LOCAL_FILE_SYSTEMS} == {
        "spark.hadoop.fs.file.impl": "workbook.hadoop.NioLocalFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.file.impl": "workbook.hadoop.NioLocalFs",
    }
    cluster = spark_conf(load_params("ci", overrides={"spark.catalog": "none", "spark.master": ""}))
    assert [Path(j) for j in cluster["spark.jars"].split(",")] == project_jars()
    assert not set(LOCAL_FILE_SYSTEMS) & set(cluster)
    assert any(j.endswith("hudi-spark3.5-bundle_2.12-1.0.2.jar") for j in jars)
    assert conf["spark.driver.extraClassPath"].split(os.pathsep) == jars
    assert conf["spark.kryo.registrator"] == "org.apache.spark.HoodieSparkKryoRegistrar"
    assert conf["spark.sql.extensions"] == "org.apache.spark.sql.hudi.HoodieSparkSessionExtension"
    assert (conf["spark.driver.bindAddress"], conf["spark.driver.host"]) == ("127.0.0.1", "127.0.0.1")
    assert conf["spark.ui.enabled"] == "false"
    assert "spark.sql.catalogImplementation" not in conf


@pytest.mark.usefixtures("jars_in_place")
def test_a_local_driver_uses_the_serial_collector_and_a_cluster_keeps_its_own() -> None:
    """Local mode: the driver (its own executor) runs the serial collector without the
    performance-data file, after the UTC, IPv4 and JOL options (executors get those three too),
    then ``local.jit``'s options: C2 for hot code only by default, the C1 compiler only when it is
    ``quick`` (the ci overlay); with spark.master empty (EMR, spark-submit) the cluster's collector
    and JIT are left alone."""
    local = spark_conf(load_params("local", overrides={"spark.catalog": "none"}))
    options = [
        "-Duser.timezone=UTC",
        "-Djava.net.preferIPv4Stack=true",
        "-Djol.skipHotspotSAAttach=true",
        "-XX:+UseSerialGC",
        "-XX:-UsePerfData",
    ]
    tmpdir = f"-Djava.io.tmpdir={local['spark.local.dir']}"
    assert local["spark.driver.extraJavaOptions"].split() == [*options, *LEAN_JIT, tmpdir]
    assert "-XX:" not in local["spark.executor.extraJavaOptions"]
    assert "-Djol.skipHotspotSAAttach=true" in local["spark.executor.extraJavaOptions"].split()
    ci = spark_conf(load_params("ci", overrides={"spark.catalog": "none"}))
    quick = ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=128m"]
    ci_scratch = ci["spark.local.dir"]
    assert ci["spark.driver.extraJavaOptions"].split() == [*options, *quick, f"-Djava.io.tmpdir={ci_scratch}"]
    cluster = spark_conf(load_params("ci", overrides={"spark.catalog": "none", "spark.master": ""}))
    assert "-XX:" not in cluster["spark.driver.extraJavaOptions"]
    assert "-XX:" not in cluster["spark.executor.extraJavaOptions"]  # nor its executors
    assert "tmpdir" not in cluster["spark.driver.extraJavaOptions"] and "spark.local.dir" not in cluster
    # a read of many files lists them in a few tasks here, in one task per file on a cluster; and
    # shuffles are sized for two cores here, by Spark's defaults (the data, the executors) there
    for sized in (
        "spark.sql.sources.parallelPartitionDiscovery.parallelism",
        "spark.sql.shuffle.partitions",
        "spark.default.parallelism",
    ):
        assert local[sized] == ci[sized] == "4" and sized not in cluster


@pytest.mark.usefixtures("jars_in_place")
def test_a_driver_of_the_local_cluster_is_a_local_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With spark.master naming the local standalone cluster (running: its pids faked here), the
    driver still runs on this machine: the same JVM options, class-data archive, scratch folder and
    sizes as a local-mode driver; its executors get the same JVM options (serial collector, no
    performance-data file, ``local.jit``), the cluster's bounds and the archive."""
    from helpers.local.spark_cluster import LocalSparkCluster

    monkeypatch.setattr(LocalSparkCluster, "pids", lambda self: {"master": 1, "worker": 2})
    monkeypatch.setattr("helpers.spark.archive_for", lambda jars: tmp_path / "x.jsa")
    overrides = {"state_dir": str(tmp_path / "st"), "spark.catalog": "none"}
    params = load_params("local", overrides=overrides)
    local = spark_conf(params)
    url = LocalSparkCluster(params).url
    cluster = spark_conf(load_params("local", overrides={**overrides, "spark.master": url}))
    assert cluster["spark.driver.extraJavaOptions"] == local["spark.driver.extraJavaOptions"]
    assert cluster["spark.driver.extraJavaOptions"].endswith(f" -XX:SharedArchiveFile={tmp_path / 'x.jsa'}")
    for key in ("spark.local.dir", "spark.sql.shuffle.partitions", "spark.default.parallelism"):
        assert cluster[key] == local[key]
    executor = cluster["spark.executor.extraJavaOptions"].split()
    assert set(local_driver_options(params)) <= set(executor) and set(LEAN_JIT) <= set(executor)
    assert "-XX:+UseSerialGC" in executor and "-XX:-UsePerfData" in executor
    # its executors have the driver's class path, so they map the same archive; local mode has none
    assert cluster["spark.executor.extraJavaOptions"].endswith(f" -XX:SharedArchiveFile={tmp_path / 'x.jsa'}")
    assert "SharedArchiveFile" not in local["spark.executor.extraJavaOptions"]
    assert cluster["spark.executor.memory"] == params.local.spark.executor_memory


def test_a_local_session_without_the_built_hadoop_classes_names_the_set_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every pinned jar in place but the workbook's own Hadoop classes not built: a clear error
    naming the set-up command, before the JVM starts."""
    root = project_copy(tmp_path, jars=("spark", "metastore"))
    for built in (root / ".jars" / "workbook-hadoop").iterdir():
        built.unlink()
    monkeypatch.setenv("WORKBOOK_ROOT", str(root))
    with pytest.raises(SparkSetupError, match=r"Hadoop classes jar.*run ./workbook setup.*build_java.sh"):
        spark_conf(load_params("ci", overrides={"spark.catalog": "none"}))


@pytest.mark.usefixtures("jars_in_place")
def test_the_local_catalog_needs_a_running_metastore(tmp_path: Path) -> None:
    """spark.catalog: local with no metastore running in the state directory: a clear error."""
    params = load_params("ci", overrides={"state_dir": str(tmp_path / "st"), "local.metastore.port": 15999})
    with pytest.raises(SparkSetupError, match=r"local metastore \(127.0.0.1:15999.*not running.*stack start"):
        spark_conf(params)


def test_only_the_run_s_own_kernels_are_lent_its_driver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process whose parent is not the run named in the environment (a process a kernel starts)
    does not ask the run for its driver, and asks nothing when no run names one; a cluster master
    gets no lent driver (no JVM is started here)."""
    from helpers.spark import RUN_DRIVER_ENV, RunDriver, attach_run_driver

    info = tmp_path / "spark-driver-1.json"
    for value in ("", f"{os.getppid() + 1}:{info}", f"{os.getppid()}:", f"x:{info}"):
        monkeypatch.setenv(RUN_DRIVER_ENV, value)
        assert attach_run_driver() is False
    assert not list(tmp_path.iterdir())  # no request written
    assert RunDriver.wanted(load_params("ci", {"spark.catalog": "none"}))
    assert not RunDriver.wanted(load_params("ci", {"spark.master": "spark://127.0.0.1:17077"}))
    assert not RunDriver.wanted(load_params("ci", {"spark.master": ""}))  # EMR's: the cluster's
