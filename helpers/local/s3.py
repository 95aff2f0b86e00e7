"""The local S3-compatible server of the lake: ``s3://`` Bronze and Silver on one machine.

:class:`LocalS3Server` runs S3Proxy (Maven Central ``org.gaul:s3proxy``) on 127.0.0.1 when
``local.s3.enabled``, so that boto3, Spark's s3a and the Rust Hudi reader reach
``s3://<local.s3.bucket>/...`` exactly as on AWS. Its backend is jclouds' ``filesystem``: the newer
``filesystem-nio2`` answers a HEAD of a key that is a folder on disk as if it were an object, and
s3a then refuses to create the Hudi table's folder ("since it is a file").
:func:`local_s3_connection` is what every client of the lake uses to find it (:mod:`helpers.lake_store`,
:mod:`helpers.spark`, the Hudi reader).

It is a foundation module beside :mod:`helpers.local.metastore` rather than a room of ``sources/local/``:
the lake's clients (``lake_store``, ``spark``, ``hudi``) sit in the foundation and must import it.

Its files live under ``<state_dir>/s3/``: ``keys.json`` (the generated access key and secret, 0600,
never printed), ``s3proxy.properties`` (written on every start, 0600: S3Proxy reads its credentials
from this file, so they are never on a command line), ``data/`` (one folder per bucket),
``s3proxy.pid`` and ``s3proxy.log``. Why S3Proxy (one port, a bounded JVM heap) and not SeaweedFS:
``docs/architecture.md``, "Foundation".
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.environments import implementations
from helpers.errors import StackError
from helpers.jars import project_jars
from helpers.local.credentials import write_private
from helpers.local.server import LocalServer, ServerPort
from helpers.params import WorkbookParams
from helpers.proc import log_tail

__all__ = [
    "REGION",
    "S3PROXY_VERSION",
    "LocalS3Server",
    "S3Connection",
    "local_s3_connection",
    "boto3_s3_client",
]

S3PROXY_VERSION = "2.7.0"
#: The region clients sign requests for (S3Proxy accepts any; s3a and object_store need one).
REGION = "us-east-1"
_LOOPBACK = "127.0.0.1"
_JAR_SET = "s3"
_SERVER_JAR = "s3proxy-"


@dataclass(frozen=True)
class S3Connection:
    """How a client reaches the local S3 server: endpoint and generated keys (the secret is left
    out of ``repr``, so it never reaches a log or a notebook output)."""

    endpoint_url: str
    access_key: str
    secret_key: str = field(repr=False)
    region: str = REGION

    def hadoop_settings(self) -> dict[str, str]:
        """Hadoop settings that send ``s3://`` and ``s3a://`` paths to this server through s3a, as
        EMR's S3 file system does on AWS: endpoint, region, path-style requests over plain HTTP,
        and the provider that reads ``fs.s3a.access.key`` / ``fs.s3a.secret.key`` (the keys
        themselves are not here: each client puts them where no command line shows them). Spark
        sessions (:func:`helpers.spark.s3a_conf`) and the Hive Metastore service use them."""
        return {
            "fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "fs.AbstractFileSystem.s3.impl": "org.apache.hadoop.fs.s3a.S3A",
            "fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "fs.s3a.endpoint": self.endpoint_url,
            "fs.s3a.endpoint.region": self.region,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider",
            # keep the empty "folder/" markers s3a writes: deleting a parent's marker when a file is
            # created makes S3Proxy's file-system backend fail (DirectoryNotEmptyException, retried
            # forever); AWS S3 and readers do not mind markers
            "fs.s3a.directory.marker.retention": "keep",
        }


class LocalS3Server(LocalServer):
    """Start, stop and describe the local S3 server of a parameter set
    (:class:`~helpers.local.server.LocalServer`; each start also creates the lake's bucket)."""

    name = "s3"
    title = "the local S3 server"
    poll_interval_s = 0.25

    def __init__(self, params: WorkbookParams) -> None:
        self.params = params
        self.settings = params.local.s3
        self.port = self.settings.port
        self.bucket = self.settings.bucket
        home = params.state_path / "s3"
        super().__init__(
            home,
            pid_file=home / "s3proxy.pid",
            log_file=home / "s3proxy.log",
            start_timeout_s=params.local.start_timeout_s,
        )

    @property
    def ports(self) -> list[ServerPort]:
        return [ServerPort(self.port, "local.s3.port")]

    @property
    def version(self) -> str:
        return f"s3proxy {S3PROXY_VERSION}"

    @property
    def data_location(self) -> str:
        return str(self.data_dir)

    @property
    def endpoint_url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://{_LOOPBACK}:{self.port}"

    @property
    def data_dir(self) -> Path:
        """The file-system backend's folder (one subfolder per bucket)."""
        return self.home / "data"

    @property
    def _keys_file(self) -> Path:
        return self.home / "keys.json"

    @property
    def _properties(self) -> Path:
        return self.home / "s3proxy.properties"

    def connection(self) -> S3Connection:
        """The endpoint and the keys, generated into ``keys.json`` (0600) on first use.

        Raises:
            StackError: when the keys file is unreadable.
        """
        self.home.mkdir(parents=True, exist_ok=True)
        path = self._keys_file
        if not path.exists():
            access_key = f"WB{secrets.token_hex(9).upper()}"
            keys = {"access_key": access_key, "secret_key": secrets.token_urlsafe(30)}
            write_private(path, json.dumps(keys))
        try:
            keys = json.loads(path.read_text(encoding="utf-8"))
            return S3Connection(self.endpoint_url, str(keys["access_key"]), str(keys["secret_key"]))
        except (OSError, ValueError, KeyError) as exc:
            raise StackError(
                f"Failed to read the local S3 server's keys from {path}: {type(exc).__name__}; delete "
                "the file to generate new ones (the data stays)"
            ) from None

    def _write_properties(self, conn: S3Connection) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [
            "# written by helpers.local.s3 on every start: the local S3 server (S3Proxy)",
            f"s3proxy.endpoint={self.endpoint_url}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={conn.access_key}",
            f"s3proxy.credential={conn.secret_key}",
            "jclouds.provider=filesystem",
            f"jclouds.filesystem.basedir={self.data_dir}",
            # the backend's own login (unused by the file system, required by S3Proxy)
            f"jclouds.identity={conn.access_key}",
            f"jclouds.credential={conn.secret_key}",
            "",
        ]
        write_private(self._properties, "\n".join(lines), replace=True)

    def command(self) -> list[str]:
        jar = next(p for p in project_jars((_JAR_SET,)) if p.name.startswith(_SERVER_JAR))
        return [
            "java",
            f"-Xmx{self.settings.heap}",
            "-XX:+UseSerialGC",
            *self.params.local.jit_options,
            "-Djava.net.preferIPv4Stack=true",
            "-jar",
            str(jar),
            "--properties",
            str(self._properties),
        ]

    def prepare(self) -> Mapping[str, str] | None:
        """S3Proxy's properties, the generated keys in them (0600): never on its command line."""
        self._write_properties(self.connection())
        return None

    def after_start(self) -> None:
        """The lake's bucket exists."""
        self._create_bucket()

    def client(self) -> Any:
        """A boto3 S3 client of this server."""
        return boto3_s3_client(self.connection())

    def _create_bucket(self) -> None:
        s3 = self.client()
        try:
            s3.head_bucket(Bucket=self.bucket)
            return
        except Exception:  # noqa: BLE001, S110 - botocore's 404: the bucket is created below
            pass
        try:
            s3.create_bucket(Bucket=self.bucket)
        except Exception as exc:  # noqa: BLE001 - botocore errors, re-raised with the place
            if "BucketAlreadyOwnedByYou" not in str(exc):
                raise StackError(
                    f"Failed to create bucket {self.bucket!r} on the local S3 server {self.endpoint_url}: "
                    f"{exc}\n{log_tail(self.log_file, 10)}"
                ) from None


def boto3_s3_client(connection: S3Connection | None = None, region: str | None = None) -> Any:
    """The one place a boto3 S3 client of the lake is made: boto3's defaults (credentials from the
    environment or the instance profile) without ``connection``; else the local server's endpoint
    and keys, path-style addressing, and checksums only where an operation requires them (S3Proxy
    2.7.0 answers boto3's default CRC32 trailer with ``NotImplemented``). ``region``: AWS only."""
    import boto3
    from botocore.config import Config

    if connection is None:
        return boto3.client("s3", region_name=region)
    return boto3.client(
        "s3",
        endpoint_url=connection.endpoint_url,
        aws_access_key_id=connection.access_key,
        aws_secret_access_key=connection.secret_key,
        region_name=connection.region,
        config=Config(
            s3={"addressing_style": "path"},
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
        ),
    )


def local_s3_connection(params: WorkbookParams) -> S3Connection | None:
    """How to reach the local S3 server: ``None`` unless ``local.s3.enabled`` (and not on AWS)."""
    if not implementations(params).local_servers or not params.local.s3.enabled:
        return None
    return LocalS3Server(params).connection()
