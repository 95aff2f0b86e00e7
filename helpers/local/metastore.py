"""The local Hive-compatible metastore: where Hudi's Hive sync registers Silver for Spark SQL.

:class:`LocalMetastore` runs an Apache Derby network server on 127.0.0.1 that every process of the
workbook shares; on EMR the Glue Data Catalog takes its place. Its files, its password and why
Derby: ``docs/architecture.md``, "Foundation".
"""

from __future__ import annotations

import os
import secrets
import tempfile
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

from helpers.errors import StackError
from helpers.jars import project_jars
from helpers.local.credentials import write_private
from helpers.local.server import LocalServer, ServerPort
from helpers.params import WorkbookParams

__all__ = ["DERBY_VERSION", "LocalMetastore"]

DERBY_VERSION = "10.14.2.0"  # the Derby of Spark 3.5's bundled Hive client
_USER = "workbook"
_SERVER_JARS = ("derby", "derbynet", "derbytools")
_DATABASE = "metastore_db"
_LOOPBACK = "127.0.0.1"


class LocalMetastore(LocalServer):
    """Start, stop and describe the local metastore database of a parameter set
    (:class:`~helpers.local.server.LocalServer`: its log is Derby's ``derby.log``, its console output
    ``server.out``)."""

    name = "metastore"
    title = "the local metastore"

    def __init__(self, params: WorkbookParams) -> None:
        self.params = params
        self.port = params.local.metastore.port
        home = params.state_path / "metastore"
        super().__init__(
            home,
            pid_file=home / "derby.pid",
            log_file=home / "derby.log",
            console_file=home / "server.out",
            start_timeout_s=params.local.start_timeout_s,
        )

    @property
    def ports(self) -> list[ServerPort]:
        return [ServerPort(self.port, "local.metastore.port")]

    @property
    def version(self) -> str:
        return f"derby {DERBY_VERSION}"

    @property
    def data_location(self) -> str:
        return str(self.home / _DATABASE)

    @property
    def _properties(self) -> Path:
        return self.home / "derby.properties"

    @property
    def warehouse(self) -> Path:
        """Spark's warehouse folder (managed tables; Silver tables are external, in the lake)."""
        return self.home / "warehouse"

    def _password(self) -> str:
        """The server's password, generated into ``derby.properties`` (0600) on first use."""
        self.home.mkdir(parents=True, exist_ok=True)
        path = self._properties
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.startswith(f"derby.user.{_USER}="):
                    return line.split("=", 1)[1]
            raise StackError(
                f"Failed to read the metastore password: {path} names no user {_USER!r}; delete it and "
                f"{self.home / _DATABASE} (the local catalog is rebuilt by the next Hudi sync)"
            )
        password = secrets.token_urlsafe(24)
        text = "\n".join(
            [
                "# written by helpers.local.metastore: the local Hive metastore's Derby network server",
                "derby.connection.requireAuthentication=true",
                "derby.authentication.provider=BUILTIN",
                f"derby.user.{_USER}={password}",
                f"derby.drda.host={_LOOPBACK}",
                f"derby.drda.portNumber={self.port}",
                "derby.stream.error.file=derby.log",
                "",
            ]
        )
        if not write_private(path, text):  # a concurrent first caller keeps its own file
            return self._password()
        return password

    @property
    def client_conf_dir(self) -> Path:
        """The folder holding the metastore client's ``hive-site.xml`` (put on the driver's class
        path; see :meth:`write_client_conf`)."""
        return self.home / "client"

    def write_client_conf(self) -> Path:
        """Write the client's connection settings, password included, to ``hive-site.xml`` (0600)
        in :attr:`client_conf_dir`, and return that folder.

        Spark loads ``hive-site.xml`` from the driver's class path into the Hive client's
        configuration. Settings passed to the session builder would not do for the password:
        PySpark hands each of them to ``spark-submit`` as ``--conf KEY=VALUE``, on a command line
        that any local user sees in ``ps``.
        """
        settings = {
            "javax.jdo.option.ConnectionURL": f"jdbc:derby://{_LOOPBACK}:{self.port}/{_DATABASE};create=true",
            "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.ClientDriver",
            "javax.jdo.option.ConnectionUserName": _USER,
            "javax.jdo.option.ConnectionPassword": self._password(),
            "datanucleus.schema.autoCreateAll": "true",
            "hive.metastore.schema.verification": "false",
        }
        body = "".join(
            f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
            for k, v in settings.items()
        )
        text = f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'
        folder = self.client_conf_dir
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        target = folder / "hive-site.xml"
        # a temporary file of its own (0600 from mkstemp): two sessions built at once, in threads or
        # processes, each replace the file whole; a shared temporary name lost one writer's file
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".hive-site.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return folder

    def spark_conf(self) -> dict[str, str]:
        """Spark settings that make a session's Hive catalog (and Hudi's Hive sync) use this
        metastore. They hold no secret: the connection, password included, is in the client's
        ``hive-site.xml`` (:meth:`write_client_conf`), whose folder the caller puts on the
        driver's class path."""
        return {
            "spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": str(self.warehouse),
        }

    def command(self) -> list[str]:
        jars = [p for p in project_jars(("metastore",)) if p.name.split("-")[0] in _SERVER_JARS]
        return [
            "java",
            f"-Xmx{self.params.local.metastore.heap}",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dderby.system.home={self.home}",
            "-cp",
            os.pathsep.join(str(j) for j in jars),
            "org.apache.derby.drda.NetworkServerControl",
            "start",
            "-h",
            _LOOPBACK,
            "-p",
            str(self.port),
            "-noSecurityManager",
        ]

    def prepare(self) -> Mapping[str, str] | None:
        """The password file (Derby reads its users from ``derby.properties``) before it starts."""
        self._password()
        return None
