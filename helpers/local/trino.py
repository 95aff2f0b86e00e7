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

On Java 25 or newer it starts from an ahead-of-time cache (Java's AOT cache, JEPs 483, 514 and
515: its classes loaded and linked, and method profiles, from one file), which the set-up trains
once per Java and Trino install (:meth:`LocalTrino.make_aot_cache`, run by
:mod:`helpers.warmup`) into the git-ignored ``.cache/trino-aot/<key>/``. Alternated three times on
this machine kind (``bench/bench_query.py``): ready in 7.4-7.5 s against 10.4-10.5 s without it,
7.4 s of Trino's CPU against 10.6-10.8 s, and its first query of the catalog in 1.7-1.9 s against
4.7-5.2 s (``bench/README.md``, "Trino's AOT cache"). Without the cache (not made yet, or Java 24)
Trino starts as before; a cache the JVM cannot use it ignores, with a warning in Trino's log.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import filelock
import requests
import trino

from helpers.errors import StackError
from helpers.jars import project_archive
from helpers.local.cache import WORK_PREFIX, drop_others, files_key, publish_folder
from helpers.local.credentials import write_private
from helpers.local.java import find_java, java_major
from helpers.local.metastore import LocalMetastore
from helpers.local.s3 import local_s3_connection
from helpers.local.server import LOOPBACK, LocalServer, ServerPort, java_properties
from helpers.params import WorkbookParams, project_root
from helpers.proc import ServerStatus, pid_alive

__all__ = ["AOT_CACHE_DIR", "AOT_FILE", "HIVE_CATALOG", "HUDI_CATALOG", "TRINO_VERSION", "LocalTrino"]

TRINO_VERSION = "476"
#: Trino 476's classes are built for Java 24 (class file version 68).
MIN_JAVA = 24
TRINO_ARCHIVE = "trino-server"
#: The catalog of every session: Hive connector, Hudi tables redirected to :data:`HUDI_CATALOG`.
HIVE_CATALOG = "hive"
HUDI_CATALOG = "hudi"
_PLUGINS = ("hive", "hudi")
#: Where the AOT caches live, under the project root (git-ignored), one folder per key.
AOT_CACHE_DIR = Path(".cache") / "trino-aot"
AOT_FILE = "trino.aot"
#: ``-XX:AOTCacheOutput``, which trains and writes the cache in one run, came with Java 25.
MIN_AOT_JAVA = 25
#: How long a training server may take to stop: it writes the cache as it exits (about 12 s here).
_AOT_STOP_TIMEOUT_S = 300.0
#: What the training server runs once it is ready: the engine's parsing, planning and execution
#: of the shapes notebook 05's SQL files have (no catalog: the set-up runs no metastore).
_TRAINING = (
    "SHOW CATALOGS",
    "SELECT x, count(*), sum(y) FROM (VALUES (1, 2.5), (2, 3.5), (2, 1.0)) AS t (x, y) GROUP BY x ORDER BY x",
    "SELECT a.x, b.y FROM (VALUES 1, 2) AS a (x) JOIN (VALUES (1, 'one')) AS b (x, y) ON a.x = b.x",
    "SELECT x, rank() OVER (ORDER BY x DESC) FROM (VALUES 3, 1, 2) AS t (x) LIMIT 2",
)


class LocalTrino(LocalServer):
    """Start, stop and describe the Trino server of a parameter set
    (:class:`~helpers.local.server.LocalServer`; ready when it answers ``SELECT 1``)."""

    name = "trino"
    title = "the local Trino server"

    def __init__(
        self, params: WorkbookParams, *, aot_output: Path | None = None, use_aot_cache: bool = True
    ) -> None:
        """``aot_output``: train an AOT cache into this file as the server stops
        (:meth:`make_aot_cache`); ``use_aot_cache``: false starts without the set-up's cache (the
        benchmark's baseline, ``bench/bench_query.py``)."""
        self.params = params
        self.aot_output = aot_output
        self.use_aot_cache = use_aot_cache
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

    def _java(self) -> Path:
        return find_java(
            MIN_JAVA, self.settings.java, setting="local.trino.java", server=f"Trino {TRINO_VERSION}"
        )

    def _vm_options(self) -> list[str]:
        return [
            f"-Xmx{self.settings.heap}",
            "-XX:+UseG1GC",
            "-XX:+ExitOnOutOfMemoryError",
            *self.settings.jit_options,  # local.trino.jit: C1 only by default (helpers.params)
        ]

    def _classpath(self) -> str:
        return str(self._install() / "lib" / "*")

    def aot_cache(self) -> Path:
        """Where the AOT cache of this server's ``java`` and Trino install is, made or not: the key
        digests the ``java`` binary and Trino's jars (paths, sizes and modification times). The JVM
        options are not in it: Java checks them itself as it maps the cache (another heap size,
        collector or JIT uses the same cache, checked with ``-XX:AOTMode=on``)."""
        return self._cache_for(self._java())

    def _cache_for(self, java: Path) -> Path:
        key = files_key([java.resolve(), *sorted((self._install() / "lib").glob("*.jar"))])
        return project_root() / AOT_CACHE_DIR / key / AOT_FILE

    @staticmethod
    def _has_aot(java: Path) -> bool:
        return (java_major(java) or 0) >= MIN_AOT_JAVA

    def _aot_options(self, java: Path) -> list[str]:
        if not self._has_aot(java):
            return []
        if self.aot_output is not None:
            return [f"-XX:AOTCacheOutput={self.aot_output}"]
        cache = self._cache_for(java)
        return [f"-XX:AOTCache={cache}"] if self.use_aot_cache and cache.is_file() else []

    def command(self) -> list[str]:
        java = self._java()
        return [
            str(java),
            *self._vm_options(),
            *self._aot_options(java),
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
            self._classpath(),
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
            return self._run(["SELECT 1"], user="workbook-ready", timeout_s=10) == [[[1]]]
        except (requests.RequestException, trino.exceptions.Error):
            return False

    def _run(self, statements: Sequence[str], *, user: str, timeout_s: float) -> list[list[Any]]:
        """Each statement's rows, run one after another in one connection."""
        connection = trino.dbapi.connect(  # type: ignore[no-untyped-call]
            host=LOOPBACK, port=self.port, user=user, request_timeout=timeout_s
        )
        try:
            cursor = connection.cursor()
            results = []
            for statement in statements:
                cursor.execute(statement)
                results.append(cursor.fetchall())
            return results
        finally:
            connection.close()

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

    # --- the AOT cache: trained once by the set-up (helpers.warmup), used by every start after it

    def make_aot_cache(self) -> Path | None:
        """Train this server's AOT cache (:meth:`aot_cache`) unless it is made: a Trino of these
        parameters started with ``-XX:AOTCacheOutput``, a few statements run (:data:`_TRAINING`),
        then stopped, which writes the cache as the JVM exits. The cache is checked with
        ``-XX:AOTMode=on`` (the JVM refuses to start with a cache it cannot use) and moved into its
        key's folder in one rename; other keys' caches go.

        Returns:
            The cache, or None when this ``java`` is older than Java 25 (no one-step training).

        Raises:
            StackError: when the training server fails to start, or writes no usable cache.
        """
        java = self._java()
        if not self._has_aot(java):
            return None
        cache = self._cache_for(java)
        if cache.is_file():
            return cache
        if self.pid() is not None:
            raise StackError(
                f"Failed to train Trino's AOT cache: {self.title} of these parameters runs on "
                f"{self.address}; the training starts and stops a server of its own (helpers.warmup)"
            )
        root = cache.parent.parent
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=WORK_PREFIX, dir=root))
        try:
            trainer = LocalTrino(self.params, aot_output=work / AOT_FILE)
            trainer.start()
            try:
                trainer._run(_TRAINING, user="workbook-aot-training", timeout_s=60)
            finally:
                trainer.stop(timeout_s=_AOT_STOP_TIMEOUT_S)
            self._check_aot_cache(java, work / AOT_FILE)
            publish_folder(work, cache.parent, AOT_FILE)  # another set-up may have been first
        finally:
            shutil.rmtree(work, ignore_errors=True)
        drop_others(root, keep=cache.parent.name)
        return cache

    def _check_aot_cache(self, java: Path, cache: Path) -> None:
        if not cache.is_file():
            raise StackError(
                f"Failed to train Trino's AOT cache: the training server wrote no {cache} "
                f"(its log: {self.log_file})"
            )
        argv = [str(java), *self._vm_options(), f"-XX:AOTCache={cache}", "-XX:AOTMode=on"]
        argv += ["-cp", self._classpath(), "-version"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)  # noqa: S603
        except subprocess.TimeoutExpired as exc:
            raise StackError("Failed to check Trino's AOT cache: java gave no answer in 120 s") from exc
        if done.returncode != 0:
            lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
            raise StackError(
                f"Failed to train Trino's AOT cache: Java refuses the cache it wrote (exit status "
                f"{done.returncode}):\n" + "\n".join(lines[-8:])
            )
