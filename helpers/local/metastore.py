"""The local Hive Metastore service: the catalog that Hudi's Hive sync fills and every engine reads.

:class:`LocalMetastore` runs Apache Hive's standalone metastore 3.1.3 (Maven Central, jar set
``metastore``) as a Thrift service on 127.0.0.1, as the Glue Data Catalog serves EMR and Athena
on AWS: Hudi's Hive sync (``hoodie.datasource.hive_sync.mode=hms``) registers Silver there over
``thrift://``, Spark SQL's Hive catalog reads it through the same service, and so does Trino
(:mod:`helpers.local.trino`). Its database is an embedded Derby inside the service's own process
(``<state_dir>/metastore/hms_db``). Hive's schema tool creates an empty catalog once per machine,
in the git-ignored ``.cache/metastore/``; each new state directory starts from a copy of it (a Derby
database is a folder with no absolute path inside). The small launcher beside this module
(``hms/LoopbackMetastore.java``) is compiled once into the same cache, by the ``javac`` beside the
``java`` that runs it. Measured on the 2-core machine: the schema tool took 7.9-8.5 s of CPU for
each new state and the JDK's source launcher about 3 s at every start. Why 3.1 and the launcher:
its docstring, and ``docs/architecture.md``, "Foundation".
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

from helpers.errors import StackError
from helpers.jars import project_archive, project_jars
from helpers.local.cache import publish_folder
from helpers.local.credentials import write_private
from helpers.local.s3 import local_s3_connection
from helpers.local.server import LOOPBACK, LocalServer, ServerPort, java_properties
from helpers.local.spark_cluster import pyspark_home
from helpers.params import WorkbookParams, project_root

__all__ = ["METASTORE_VERSION", "LocalMetastore"]

METASTORE_VERSION = "3.1.3"
#: The metastore archive's artifact in ``scripts/jars.tsv`` (set ``metastore``).
METASTORE_ARCHIVE = "hive-standalone-metastore"
_DATABASE = "hms_db"
_LAUNCHER = Path(__file__).parent / "hms" / "LoopbackMetastore.java"
#: Where the empty catalog and the compiled launcher are kept (git-ignored, per checkout).
_CACHE = Path(".cache") / "metastore"
#: Marks a finished empty catalog in the cache (written last, so a half-made one is never copied).
_COMPLETE = "complete"
#: What the archive lacks and pyspark's jars hold. Log4j 2 with its SLF4J 2 binding goes before the
#: archive's jars on the class path, so the service's log reaches its console file instead of
#: SLF4J's no-op logger; after them Hadoop's client (the 3.3.4 of Spark 3.5.6) and the commons
#: libraries Hadoop's configuration loads
_PYSPARK_LOGGING_JARS = ("log4j-slf4j2-impl-", "log4j-api-", "log4j-core-", "slf4j-api-")
_PYSPARK_HADOOP_JARS = (
    "hadoop-client-api-",
    "hadoop-client-runtime-",
    "commons-logging-",
    "commons-cli-",
    "commons-io-",
    "commons-collections-3",
)


def _site_xml(settings: Mapping[str, str]) -> str:
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
        for k, v in settings.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


class LocalMetastore(LocalServer):
    """Start, stop and describe the Hive Metastore service of a parameter set
    (:class:`~helpers.local.server.LocalServer`; its log, Derby's included, is ``metastore.log``)."""

    name = "metastore"
    title = "the local Hive Metastore"

    def __init__(self, params: WorkbookParams) -> None:
        self.params = params
        self.port = params.local.metastore.port
        home = params.state_path / "metastore"
        super().__init__(
            home,
            pid_file=home / "metastore.pid",
            log_file=home / "metastore.log",
            start_timeout_s=params.local.start_timeout_s,
        )

    @property
    def ports(self) -> list[ServerPort]:
        return [ServerPort(self.port, "local.metastore.port")]

    @property
    def version(self) -> str:
        return f"hive-metastore {METASTORE_VERSION}"

    @property
    def data_location(self) -> str:
        return str(self.home / _DATABASE)

    @property
    def uri(self) -> str:
        """The service's Thrift URI (``hive.metastore.uris``), what every client names."""
        return f"thrift://{LOOPBACK}:{self.port}"

    @property
    def warehouse(self) -> Path:
        """The catalog's warehouse folder (managed tables; Silver tables are external, in the lake)."""
        return self.home / "warehouse"

    @property
    def _conf_dir(self) -> Path:
        return self.home / "conf"

    def spark_conf(self) -> dict[str, str]:
        """Spark settings that make a session's Hive catalog, and Hudi's Hive sync inside it, use
        this service (no secret: the service is reachable from this machine only)."""
        return {
            "spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": str(self.warehouse),
            "spark.hadoop.hive.metastore.uris": self.uri,
        }

    def _classpath(self) -> str:
        lib = self._hive_home() / "lib"
        jars_dir = pyspark_home() / "jars"

        def pyspark_jars(prefixes: tuple[str, ...]) -> list[str]:
            out = []
            for prefix in prefixes:
                found = sorted(jars_dir.glob(f"{prefix}*.jar"))
                if not found:
                    raise StackError(
                        f"Failed to find {prefix}*.jar in {jars_dir}: reinstall pyspark (./workbook setup)"
                    )
                out.append(str(found[0]))
            return out

        s3 = []  # with the lake on the local S3 server: s3a, as Spark's sessions have it
        if local_s3_connection(self.params) is not None:
            s3 = [str(p) for p in project_jars(("s3",)) if not p.name.startswith("s3proxy-")]
        return os.pathsep.join(
            [
                str(self._conf_dir),
                *pyspark_jars(_PYSPARK_LOGGING_JARS),
                str(lib / "*"),
                *pyspark_jars(_PYSPARK_HADOOP_JARS),
                *s3,
            ]
        )

    def _java(self, main: list[str], classes: Path | None = None) -> list[str]:
        classpath = self._classpath()
        return [
            "java",
            f"-Xmx{self.params.local.metastore.heap}",
            *self.params.local.jit_options,
            "-Djava.net.preferIPv4Stack=true",
            f"-Dderby.stream.error.file={self.home / 'derby.log'}",
            "-cp",
            classpath if classes is None else os.pathsep.join([str(classes), classpath]),
            *main,
        ]

    def command(self) -> list[str]:
        return self._java([_LAUNCHER.stem, LOOPBACK, str(self.port)], classes=self._launcher_classes())

    def _launcher_classes(self) -> Path:
        """The folder of the compiled launcher, compiled on first use into the cache (named by
        the source's digest, so an edited launcher is compiled again)."""
        source = _LAUNCHER.read_bytes()
        folder = project_root() / _CACHE / f"launcher-{hashlib.sha256(source).hexdigest()[:12]}"
        if (folder / f"{_LAUNCHER.stem}.class").is_file():
            return folder
        java = shutil.which("java")
        javac = Path(java).resolve().parent / "javac" if java else None
        if javac is None or not javac.is_file():
            raise StackError(
                f"Failed to compile the launcher of {self.title}: no javac beside {java or 'java'}; "
                "install a JDK (Debian: openjdk-17-jdk-headless)"
            )
        folder.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="launcher-", dir=folder.parent))
        try:
            done = subprocess.run(  # noqa: S603 - the JDK's javac on the project's own source
                [str(javac), "-nowarn", "-d", str(work), "-cp", self._classpath(), str(_LAUNCHER)],
                capture_output=True,
                text=True,
                timeout=300,
                check=False,
            )
            if done.returncode != 0:
                raise StackError(
                    f"Failed to compile {_LAUNCHER.name} for {self.title} (javac exit status "
                    f"{done.returncode}):\n{(done.stdout + done.stderr).strip()[-2000:]}"
                )
            publish_folder(work, folder, f"{_LAUNCHER.stem}.class")
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return folder

    def _write_site(self) -> None:
        settings = {
            "javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={self.home / _DATABASE};create=true",
            "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
            "metastore.warehouse.dir": self.warehouse.as_uri(),
            "metastore.schema.verification": "true",
            "metastore.event.db.notification.api.auth": "false",
            # partition filters evaluated by the metastore itself (Hive's default proxy is in hive-exec)
            "metastore.expression.proxy": "org.apache.hadoop.hive.metastore.DefaultPartitionExpressionProxy",
            # the one housekeeping task a catalog without Hive's replication and ACID needs (the
            # default list names classes of Hive's server jars, which the service has not)
            "metastore.task.threads.always": "org.apache.hadoop.hive.metastore.events.EventCleanerTask",
            "metastore.server.min.threads": "4",
            "metastore.server.max.threads": "64",
        }
        self._conf_dir.mkdir(parents=True, exist_ok=True)
        (self._conf_dir / "metastore-site.xml").write_text(_site_xml(settings), encoding="utf-8")
        log4j = {  # the service's log goes to its console file
            "rootLogger.level": "WARN",
            "rootLogger.appenderRef.console.ref": "console",
            "appender.console.type": "Console",
            "appender.console.name": "console",
            "appender.console.layout.type": "PatternLayout",
            "appender.console.layout.pattern": "%d{ISO8601} %-5p %c{1}: %m%n",
        }
        (self._conf_dir / "log4j2.properties").write_text(java_properties(log4j, __name__), encoding="utf-8")
        # The service checks and creates a table's folder itself: with the lake on the local S3
        # server it needs s3a and the server's keys (core-site.xml, 0600, rewritten on each start)
        core_site = self._conf_dir / "core-site.xml"
        core_site.unlink(missing_ok=True)
        s3 = local_s3_connection(self.params)
        if s3 is not None:
            settings = {
                **s3.hadoop_settings(),
                "fs.s3a.access.key": s3.access_key,
                "fs.s3a.secret.key": s3.secret_key,
            }
            write_private(core_site, _site_xml(settings))

    def prepare(self) -> Mapping[str, str] | None:
        """Write ``metastore-site.xml``; on the first start copy the empty catalog of the cache
        (:meth:`empty_catalog`) into the state. A database is complete once its marker file is
        written, after the copy: one left by a failed or interrupted first start is removed and
        copied again."""
        self._write_site()
        env = self._env()
        database, marker = self.home / _DATABASE, self.home / f"{_DATABASE}.initialised"
        if marker.exists():
            return env
        shutil.rmtree(database, ignore_errors=True)
        template = self.empty_catalog()
        try:
            shutil.copytree(template, database)
        except BaseException:
            shutil.rmtree(database, ignore_errors=True)
            raise
        marker.write_text(f"hive-metastore {METASTORE_VERSION} schema\n", encoding="utf-8")
        return env

    def empty_catalog(self) -> Path:
        """The Derby database of an empty catalog in the cache, made once by Hive's schema tool
        (``MetastoreSchemaTool -initSchema``) in a folder of its own and moved into place when the
        tool succeeded; a folder left by a failed or interrupted tool is never used.

        Raises:
            StackError: when the schema tool fails (its last lines) or gives no answer in 300 s.
        """
        folder = project_root() / _CACHE / f"schema-{METASTORE_VERSION}"
        if (folder / _COMPLETE).is_file():
            return folder / _DATABASE
        shutil.rmtree(folder, ignore_errors=True)  # not from here: made by hand, or half made
        folder.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="schema-", dir=folder.parent))
        url = f"jdbc:derby:;databaseName={work / _DATABASE};create=true"
        argv = self._java(
            [
                "org.apache.hadoop.hive.metastore.tools.MetastoreSchemaTool",
                "-dbType",
                "derby",
                "-url",
                url,
                "-initSchema",
            ]
        )
        try:
            try:
                done = subprocess.run(  # noqa: S603 - our own java command line
                    argv, cwd=work, env=self._env(), capture_output=True, text=True, timeout=300, check=False
                )
            except subprocess.TimeoutExpired as exc:
                raise StackError(
                    f"Failed to create the catalog schema of {self.title}: no answer in 300 s"
                ) from exc
            if done.returncode != 0:
                lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
                raise StackError(
                    f"Failed to create the catalog schema of {self.title} in {work / _DATABASE} "
                    f"(schema tool exit status {done.returncode}):\n" + "\n".join(lines[-12:])
                )
            (work / _COMPLETE).write_text(f"hive-metastore {METASTORE_VERSION} schema\n", encoding="utf-8")
            publish_folder(work, folder, _COMPLETE)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return folder / _DATABASE

    def _env(self) -> dict[str, str]:
        """The environment of the service and its schema tool (``METASTORE_HOME``)."""
        return {**os.environ, "METASTORE_HOME": str(self._hive_home())}

    def _hive_home(self) -> Path:
        """The unpacked archive (``METASTORE_HOME``: the schema tool reads its scripts there)."""
        return (
            project_archive("metastore", METASTORE_ARCHIVE) / f"apache-hive-metastore-{METASTORE_VERSION}-bin"
        )
