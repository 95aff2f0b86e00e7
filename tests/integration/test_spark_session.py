"""The test session's Spark driver: what it listens on, and what it can load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.sockets import listening

from helpers.local.metastore import LocalMetastore
from helpers.spark import (
    HUDI_DATASOURCE_CLASS,
    build_spark_session,
    hudi_datasource_available,
    jvm_class_available,
)

pytestmark = pytest.mark.integration


def test_the_driver_listens_on_loopback_only(spark: Any) -> None:
    """Every TCP socket the driver JVM listens on (Py4J gateway, RPC, block manager) is bound to
    127.0.0.1; there is at least the RPC endpoint and the block manager."""
    sockets = listening(spark.sparkContext._gateway.proc.pid)
    assert len(sockets) >= 2, sockets
    assert {address for address, _ in sockets} == {"127.0.0.1"}, sockets


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


def test_the_catalog_is_the_metastore_service(spark: Any, spark_params: Any) -> None:
    """Spark's Hive catalog is a client of the local Hive Metastore service over Thrift, as an EMR
    session is of Glue: no metastore of its own in the driver, no database login anywhere. A
    database Spark creates lands in the service's Derby database, which its process holds."""
    uri = spark.sparkContext._jsc.hadoopConfiguration().get("hive.metastore.uris")
    assert (
        uri == LocalMetastore(spark_params).uri == f"thrift://127.0.0.1:{spark_params.local.metastore.port}"
    )
    spark.sql("CREATE DATABASE IF NOT EXISTS catalog_probe")
    assert "catalog_probe" in {r[0] for r in spark.sql("SHOW DATABASES").collect()}
    database = spark_params.state_path / "metastore" / "hms_db"
    assert (database / "db.lck").is_file()  # Derby's lock: the service's process has it open
    assert not Path("metastore_db").exists()  # no embedded metastore in the driver's folder


def test_the_driver_maps_its_classes_from_the_set_up_s_class_data_archive(spark: Any) -> None:
    """The set-up made the archive of a local driver with the project jars; the session's driver
    was started with it, and the JVM uses it (``sharing``: a class path the archive does not match
    turns class-data sharing off altogether, so ``sharing`` means this archive was mapped)."""
    from helpers.local.class_data import archive_for

    jvm = spark.sparkContext._jvm
    jars = [j for j in spark.sparkContext.getConf().get("spark.driver.extraClassPath").split(":") if j]
    archive = archive_for(jars)
    assert archive is not None, "no class-data archive for the project jars: ./workbook setup makes it"
    arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    assert f"-XX:SharedArchiveFile={archive}" in arguments, arguments
    assert "sharing" in jvm.System.getProperty("java.vm.info")


def test_a_running_session_on_another_master_is_returned_with_a_warning(
    spark: Any, spark_params: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Asked for a session on another master while one runs, the builder returns the running one
    (a JVM's static settings cannot change) and says so, naming both masters; asked for the
    running one's master, it says nothing."""
    other = spark_params.model_copy(
        update={"spark": spark_params.spark.model_copy(update={"master": "spark://127.0.0.1:7078"})}
    )
    with caplog.at_level("WARNING", logger="helpers.spark"):
        assert build_spark_session(spark_params) is spark
        assert not caplog.records
        assert build_spark_session(other) is spark
    [record] = caplog.records
    assert spark.sparkContext.master in record.getMessage()
    assert "not on spark.master spark://127.0.0.1:7078" in record.getMessage()


def test_the_local_file_system_sets_permissions_without_a_chmod_process(spark: Any, tmp_path: Path) -> None:
    """``file:`` is the workbook's ``NioLocalFileSystem`` and, for ``FileContext``, ``NioLocalFs``
    (``helpers.spark.LOCAL_FILE_SYSTEMS``): a file created through either gets the mode Hadoop asks
    for under Hadoop's umask, with its checksum beside it, its new folder too, and a mode set
    afterwards is the file's; a mode with the sticky bit, which Java's file API cannot set, still
    reaches the folder (Hadoop's own ``chmod``). ``FileContext``'s atomic rename over an existing
    file (Structured Streaming's checkpoint files) keeps the new content and its checksum."""
    import stat

    from helpers.spark import LOCAL_FILE_SYSTEMS

    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    fs = jvm.org.apache.hadoop.fs.FileSystem.get(jvm.java.net.URI("file:///"), conf)
    assert fs.getClass().getName() == LOCAL_FILE_SYSTEMS["spark.hadoop.fs.file.impl"]
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission
    umask = permission.getUMask(conf).toShort()

    path = jvm.org.apache.hadoop.fs.Path(str(tmp_path / "made" / "part.bin"))
    out = fs.create(path, True)
    out.write(7)
    out.close()
    made = tmp_path / "made" / "part.bin"
    assert stat.S_IMODE(made.stat().st_mode) == 0o666 & ~umask
    assert (tmp_path / "made" / ".part.bin.crc").is_file()
    assert stat.S_IMODE((tmp_path / "made").stat().st_mode) == 0o777 & ~umask

    fs.setPermission(path, permission(0o640))
    assert stat.S_IMODE(made.stat().st_mode) == 0o640
    fs.setPermission(jvm.org.apache.hadoop.fs.Path(str(tmp_path / "made")), permission(0o1750))
    assert stat.S_IMODE((tmp_path / "made").stat().st_mode) == 0o1750

    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)
    layer = context.getDefaultFileSystem()
    assert layer.getClass().getName() == LOCAL_FILE_SYSTEMS["spark.hadoop.fs.AbstractFileSystem.file.impl"]
    file_context = jvm.org.apache.hadoop.fs.FileContext
    elsewhere = file_context.getFileContext(jvm.java.net.URI("file://elsewhere/"), conf)
    assert elsewhere.getDefaultFileSystem().getUri().toString() == "file:///"  # as Hadoop's LocalFs
    flags = jvm.java.util.EnumSet.of(jvm.org.apache.hadoop.fs.CreateFlag.CREATE)
    offsets = tmp_path / "checkpoint" / "offsets"
    context.mkdir(jvm.org.apache.hadoop.fs.Path(str(offsets)), permission.getDirDefault(), True)
    no_options = spark.sparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.CreateOpts, 0)
    for name, value in (("1", 1), (".1.tmp", 2)):
        stream = context.create(jvm.org.apache.hadoop.fs.Path(str(offsets / name)), flags, no_options)
        stream.write(value)
        stream.close()
    assert stat.S_IMODE((offsets / "1").stat().st_mode) == 0o666 & ~umask
    assert stat.S_IMODE(offsets.stat().st_mode) == 0o777 & ~umask
    rename = jvm.org.apache.hadoop.fs.Options.Rename
    overwrite = spark.sparkContext._gateway.new_array(rename, 1)
    overwrite[0] = rename.OVERWRITE
    hadoop_path = jvm.org.apache.hadoop.fs.Path
    context.rename(hadoop_path(str(offsets / ".1.tmp")), hadoop_path(str(offsets / "1")), overwrite)
    assert (offsets / "1").read_bytes() == bytes([2])
    assert sorted(p.name for p in offsets.iterdir()) == [".1.crc", "1"]


_PROBE = """
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.*;
import org.apache.hadoop.fs.permission.FsPermission;
public class Probe {
    public static void main(String[] args) throws Exception {
        Configuration conf = new Configuration();
        Path file = new Path(args[2], "made/part.bin");
        if (args[0].equals("FileSystem")) {
            conf.set("fs.file.impl", args[1]);
            FileSystem fs = FileSystem.get(new java.net.URI("file:///"), conf);
            try (FSDataOutputStream out = fs.create(file, true)) { out.write(7); }
            fs.setPermission(file, new FsPermission((short) 0640));
            System.out.println(fs.getClass().getName());
        } else {
            conf.set("fs.AbstractFileSystem.file.impl", args[1]);
            FileContext fc = FileContext.getFileContext(new java.net.URI("file:///"), conf);
            fc.mkdir(file.getParent(), FsPermission.getDirDefault(), true);
            try (FSDataOutputStream out = fc.create(file, java.util.EnumSet.of(CreateFlag.CREATE))) {
                out.write(7);
            }
            fc.setPermission(file, new FsPermission((short) 0640));
            System.out.println(fc.getDefaultFileSystem().getClass().getName());
        }
    }
}
"""


@pytest.mark.parametrize(
    ("api", "hadoop_s", "setting"),
    [
        ("FileSystem", "org.apache.hadoop.fs.LocalFileSystem", "spark.hadoop.fs.file.impl"),
        ("FileContext", "org.apache.hadoop.fs.local.LocalFs", "spark.hadoop.fs.AbstractFileSystem.file.impl"),
    ],
)
def test_no_chmod_program_is_needed_where_hadoop_s_own_file_system_needs_one(
    api: str, hadoop_s: str, setting: str, tmp_path: Path
) -> None:
    """In a JVM that cannot start programs (an empty ``PATH``), Hadoop's local file system fails to
    create a file or its folder through each of Hadoop's two APIs (it runs ``chmod`` for the new
    file's or folder's mode); the workbook's creates them and the checksum, and sets the mode."""
    import stat
    import subprocess

    import pyspark

    from helpers.jars import hadoop_classes_jar
    from helpers.local.class_data import driver_java
    from helpers.spark import LOCAL_FILE_SYSTEMS

    java = driver_java()
    assert java is not None
    probe = tmp_path / "Probe.java"
    probe.write_text(_PROBE)
    classpath = f"{Path(pyspark.__file__).parent / 'jars'}/*:{hadoop_classes_jar()}"

    def run(impl: str, folder: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(java), "-cp", classpath, str(probe), api, impl, str(folder)],
            env={"PATH": "", "HOME": str(tmp_path)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    hadoop = run(hadoop_s, tmp_path / "hadoop")
    assert hadoop.returncode != 0 and 'Cannot run program "chmod"' in hadoop.stderr, hadoop.stderr[-2000:]
    ours = run(LOCAL_FILE_SYSTEMS[setting], tmp_path / "ours")
    assert ours.returncode == 0 and ours.stdout.strip() == LOCAL_FILE_SYSTEMS[setting], ours.stderr[-2000:]
    assert stat.S_IMODE((tmp_path / "ours" / "made" / "part.bin").stat().st_mode) == 0o640
    assert (tmp_path / "ours" / "made" / ".part.bin.crc").is_file()
