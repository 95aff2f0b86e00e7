"""The local Trino server: Athena's engine, reading Silver through the local Hive Metastore.

Athena (engine v3) is Trino reading the Glue Data Catalog. :class:`LocalTrino` runs Trino 476 from
Maven Central (jar set ``trino``, on Java 24+: :func:`helpers.local.java.find_java`) on 127.0.0.1,
one coordinator that also executes, with two catalogs over the metastore service
(:mod:`helpers.local.metastore`) that Hudi's Hive sync fills:

- ``hudi``: Trino's Hudi connector, what Athena uses for Hudi tables (snapshot queries of
  Copy-on-Write tables and read-optimized queries of Merge-on-Read tables);
- ``hive``: the Hive connector, the session's catalog. It holds the views the SQL files create (as
  Athena stores views in Glue) and sends every query of a Hudi table on to ``hudi``
  (``hive.hudi-catalog-name``), as Athena reads a Glue table by its format.

Only those two plugins are loaded (links in ``<state_dir>/trino/plugin``), which keeps the start
short. There is no authentication: the HTTP port listens on 127.0.0.1 only. With the lake on the
local S3 server, both catalogs read it through Trino's native S3 file system with the server's
generated keys, in catalog files of mode 0600 that no API returns.

Trino runs on demand: the query engine starts it when it opens (:meth:`LocalTrino.acquire`) and
stops it when the last engine using it closes (:meth:`LocalTrino.release`), so its memory (about
0.85 GiB) and idle CPU are spent only while SQL runs. ``./workbook stack stop`` also stops it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path

import filelock
import requests
import trino

from helpers.jars import project_archive
from helpers.local.credentials import write_private
from helpers.local.java import find_java
from helpers.local.metastore import LocalMetastore
from helpers.local.s3 import local_s3_connection
from helpers.local.server import LOOPBACK, LocalServer, ServerPort, java_properties
from helpers.params import WorkbookParams
from helpers.proc import ServerStatus, pid_alive

__all__ = ["HIVE_CATALOG", "HUDI_CATALOG", "TRINO_VERSION", "LocalTrino"]

TRINO_VERSION = "476"
#: Trino 476's classes are built for Java 24 (class file version 68).
MIN_JAVA = 24
TRINO_ARCHIVE = "trino-server"
#: The catalog of every session: Hive connector, Hudi tables redirected to :data:`HUDI_CATALOG`.
HIVE_CATALOG = "hive"
HUDI_CATALOG = "hudi"
_PLUGINS = ("hive", "hudi")


class LocalTrino(LocalServer):
    """Start, stop and describe the Trino server of a parameter set
    (:class:`~helpers.local.server.LocalServer`; ready when it answers ``SELECT 1``)."""

    name = "trino"
    title = "the local Trino server"

    def __init__(self, params: WorkbookParams) -> None:
        self.params = params
        self.settings = params.local.trino
        self.port = self.settings.port
        home = params.state_path / "trino"
        super().__init__(
            home,
            pid_file=home / "trino.pid",
            log_file=home / "trino.log",
            start_timeout_s=self.settings.start_timeout_s,
        )

    @property
    def ports(self) -> list[ServerPort]:
        return [ServerPort(self.port, "local.trino.port")]

    @property
    def version(self) -> str:
        return f"trino {TRINO_VERSION}"

    @property
    def data_location(self) -> str:
        return str(self.home / "data")

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def _install(self) -> Path:
        return project_archive("trino", TRINO_ARCHIVE) / f"trino-server-{TRINO_VERSION}"

    def command(self) -> list[str]:
        java = find_java(
            MIN_JAVA, self.settings.java, setting="local.trino.java", server=f"Trino {TRINO_VERSION}"
        )
        install = self._install()
        return [
            str(java),
            f"-Xmx{self.settings.heap}",
            "-XX:+UseG1GC",
            "-XX:+ExitOnOutOfMemoryError",
            *self.settings.jit_options,  # local.trino.jit: C1 only by default (helpers.params)
            "-Djdk.attach.allowAttachSelf=true",
            "-Djava.net.preferIPv4Stack=true",
            # the node's settings, as Trino's launcher passes them (system properties)
            "-Dnode.environment=workbook",
            "-Dnode.id=workbook-local",
            f"-Dnode.data-dir={self.home / 'data'}",
            f"-Dnode.bind-ip={LOOPBACK}",
            f"-Dnode.internal-address={LOOPBACK}",
            f"-Dconfig={self.home / 'etc' / 'config.properties'}",
            "-cp",
            str(install / "lib" / "*"),
            "io.trino.server.TrinoServer",
        ]

    def _catalogs(self) -> dict[str, dict[str, str]]:
        common = {
            "hive.metastore.uri": LocalMetastore(self.params).uri,
            "fs.hadoop.enabled": "true",  # file: locations (the local lake)
        }
        s3 = local_s3_connection(self.params)
        if s3 is not None:
            common.update(
                {
                    "fs.native-s3.enabled": "true",
                    "s3.endpoint": s3.endpoint_url,
                    "s3.region": s3.region,
                    "s3.path-style-access": "true",
                    "s3.aws-access-key": s3.access_key,
                    "s3.aws-secret-key": s3.secret_key,
                }
            )
        return {
            HUDI_CATALOG: {"connector.name": "hudi", **common},
            HIVE_CATALOG: {
                "connector.name": "hive",
                "hive.hudi-catalog-name": HUDI_CATALOG,
                # views and managed tables only: no table over a folder a query names
                "hive.non-managed-table-creates-enabled": "false",
                **common,
            },
        }

    def prepare(self) -> Mapping[str, str] | None:
        """Write the server's settings and catalogs, and link the two plugins it loads."""
        etc = self.home / "etc"
        catalogs = etc / "catalog"
        plugins = self.home / "plugin"
        for folder in (etc, catalogs, plugins, self.home / "data"):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        config = {
            "coordinator": "true",
            "node-scheduler.include-coordinator": "true",
            "http-server.http.port": str(self.port),
            "discovery.uri": self.url,
            "catalog.config-dir": str(catalogs),
            "plugin.dir": str(plugins),
        }
        (etc / "config.properties").write_text(java_properties(config, __name__), encoding="utf-8")
        for name, settings in self._catalogs().items():
            path = catalogs / f"{name}.properties"
            path.unlink(missing_ok=True)  # rewritten on every start (the S3 keys may change)
            write_private(path, java_properties(settings, __name__))
        install = self._install()
        for plugin in _PLUGINS:
            link = plugins / plugin
            if link.is_symlink() and Path(os.readlink(link)) != install / "plugin" / plugin:
                link.unlink()
            if not link.is_symlink():
                link.symlink_to(install / "plugin" / plugin, target_is_directory=True)
        return None

    def ready(self) -> bool:
        """Whether it answers queries: ``/v1/info`` says it has started, and ``SELECT 1`` runs (the
        node announces itself to its own discovery a moment later: until then a query fails with
        ``NO_NODES_AVAILABLE``)."""
        try:
            answer = requests.get(f"{self.url}/v1/info", timeout=2)
            if not (answer.ok and answer.json().get("starting") is False):
                return False
            connection = trino.dbapi.connect(  # type: ignore[no-untyped-call]
                host=LOOPBACK, port=self.port, user="workbook-ready", request_timeout=10
            )
            try:
                cursor = connection.cursor()
                cursor.execute("SELECT 1")
                return bool(cursor.fetchall() == [[1]])
            finally:
                connection.close()
        except (requests.RequestException, trino.exceptions.Error):
            return False

    # --- on demand: started by the first query engine that opens, stopped after the last closes

    @property
    def _users(self) -> Path:
        return self.home / "users"

    def _users_lock(self) -> filelock.FileLock:
        self.home.mkdir(parents=True, exist_ok=True)
        return filelock.FileLock(str(self.home / "users.lock"), timeout=self.settings.start_timeout_s * 2)

    def _claims(self) -> list[Path]:
        return list(self._users.glob("*")) if self._users.exists() else []

    def _live_users(self) -> list[Path]:
        """The users' claim files whose process still runs (a dead process's claim is removed)."""
        live = []
        for claim in self._claims():
            if pid_alive(int(claim.name.split("-", 1)[0])):
                live.append(claim)
            else:
                claim.unlink(missing_ok=True)
        return live

    def stop(self, timeout_s: float = 30.0) -> ServerStatus:
        """Stop Trino whatever engines still use it (``./workbook stack stop``); their claims go too."""
        status = super().stop(timeout_s)
        for claim in self._claims():
            claim.unlink(missing_ok=True)
        return status

    def acquire(self) -> str:
        """Start Trino unless it runs, and record a user of it (a claim file named by this process).

        Returns:
            The claim, for :meth:`release`.

        Raises:
            StackError: as :meth:`start`.
        """
        claim = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        with self._users_lock():
            self._users.mkdir(exist_ok=True)
            (self._users / claim).touch()
            try:
                self.start()
            except BaseException:
                (self._users / claim).unlink(missing_ok=True)
                raise
        return claim

    def release(self, claim: str) -> bool:
        """Forget a user; stop Trino when no running process uses it any more.

        Returns:
            Whether Trino was stopped.
        """
        with self._users_lock():
            (self._users / claim).unlink(missing_ok=True)
            if self._live_users():
                return False
            self.stop()
            return True
