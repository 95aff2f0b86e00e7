"""Files of the lake (Bronze objects, Hudi timelines, the workbook's own Silver state) on the
local file system or S3, behind one small interface (:class:`LakeStore`, :func:`open_store`).

Writes are atomic (locally: temporary name, fsync, rename; on S3: one ``PutObject``); see
``docs/architecture.md``, "Foundation".

Example:
    >>> store = open_store("lake/silver")                 # doctest: +SKIP
    >>> store.write("sale/.hoodie/.aux/x.json", b"{}")    # doctest: +SKIP
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

from helpers.errors import WorkbookError
from helpers.local.s3 import S3Connection, boto3_s3_client, local_s3_connection
from helpers.params import WorkbookParams

__all__ = [
    "LakeEntry",
    "LakeStore",
    "LocalStore",
    "S3Store",
    "hudi_storage_options",
    "is_s3",
    "join",
    "lake_s3",
    "lake_uri",
    "open_store",
    "read_if_present",
    "s3_client",
    "set_lake_s3",
    "split_s3",
    "use_lake_s3",
]

#: The S3 of this process's lake: the local server's connection, or None for AWS (boto3 defaults).
_LAKE_S3: dict[str, S3Connection | None] = {"connection": None}


def use_lake_s3(params: WorkbookParams) -> S3Connection | None:
    """Point this process's S3 clients at the lake of ``params``: the local S3 server when
    ``local.s3.enabled``, else AWS (boto3's endpoint and credential chain). Idempotent.

    Returns:
        The local server's connection, or None for AWS.
    """
    connection = local_s3_connection(params)
    _LAKE_S3["connection"] = connection
    return connection


def set_lake_s3(connection: S3Connection | None) -> None:
    """Point this process's S3 clients at ``connection`` (None: AWS), for a process that has no
    parameters, only the connection it was handed (the capture worker)."""
    _LAKE_S3["connection"] = connection


def lake_s3() -> S3Connection | None:
    """The connection :func:`use_lake_s3` set (None: AWS, boto3's defaults)."""
    return _LAKE_S3["connection"]


def s3_client(region: str | None = None) -> Any:
    """A boto3 S3 client for the lake (see :func:`use_lake_s3`); ``region`` applies to AWS only."""
    return boto3_s3_client(lake_s3(), region)


def hudi_storage_options(uri: str) -> dict[str, str]:
    """Storage options of the Rust Hudi reader (``object_store``'s keys) for a table at ``uri``:
    the local S3 server's endpoint, keys, plain HTTP and path-style requests; none for a local
    path or AWS (the reader's own credential chain)."""
    connection = lake_s3()
    if connection is None or not is_s3(uri):
        return {}
    return {
        "aws_endpoint_url": connection.endpoint_url,
        "aws_access_key_id": connection.access_key,
        "aws_secret_access_key": connection.secret_key,
        "aws_region": connection.region,
        "aws_allow_http": "true",
        "aws_virtual_hosted_style_request": "false",
    }


def is_s3(uri: str) -> bool:
    """Whether ``uri`` is an ``s3://`` / ``s3a://`` URI."""
    return uri.startswith(("s3://", "s3a://"))


def split_s3(uri: str) -> tuple[str, str]:
    """``(bucket, key prefix)`` of an S3 URI.

    Raises:
        WorkbookError: when ``uri`` is not an S3 URI with a bucket.
    """
    parsed = urlparse(uri)
    if parsed.scheme not in ("s3", "s3a") or not parsed.netloc:
        raise WorkbookError(f"Failed to use {uri!r}: not an s3:// URI")
    return parsed.netloc, parsed.path.strip("/")


def lake_uri(params: WorkbookParams, value: str) -> str:
    """A lake location parameter as a string: ``s3://`` URIs unchanged, local paths resolved."""
    return value.rstrip("/") if is_s3(value) else str(params.path(value))


def join(root: str, *parts: str) -> str:
    """``root/part/...`` for a local path or a URI."""
    return "/".join([root.rstrip("/"), *[p.strip("/") for p in parts if p]])


@dataclass(frozen=True)
class LakeEntry:
    """One file: its name, full location (path or URI), size and modification time (epoch s)."""

    name: str
    location: str
    size: int
    modified: float


class LakeStore(Protocol):
    """Where lake files live: list a folder, read, write atomically, delete."""

    root: str

    def list(self, folder: str, *, recursive: bool = False) -> list[LakeEntry]:
        """Files in ``folder`` (relative to the root; hidden ``.``-names included)."""
        ...

    def read(self, location: str) -> bytes:
        """The bytes of a file (a full location, as :class:`LakeEntry` gives)."""
        ...

    def write(self, relative: str, data: bytes) -> str:
        """Write a file atomically (relative to the root); its full location."""
        ...

    def delete(self, location: str) -> None:
        """Remove a file (no error if it is gone)."""
        ...

    def copy(self, source: str, relative: str) -> str:
        """Copy a file of the same kind of store (a path, or an ``s3://`` URI) to ``relative``,
        atomically, without its bytes passing through Python; its full location."""
        ...


class LocalStore:
    """The local file system under ``root``."""

    def __init__(self, root: str | Path) -> None:
        self.root = str(root)

    def list(self, folder: str, *, recursive: bool = False) -> list[LakeEntry]:
        """Files in ``folder`` (missing folder: none)."""
        out: list[LakeEntry] = []
        folders = [str(Path(self.root, folder))]
        while folders:  # one scandir per folder, one stat per file (an idle Silver round lists often)
            try:
                entries = list(os.scandir(folders.pop()))
            except (FileNotFoundError, NotADirectoryError):  # missing, or removed meanwhile
                continue
            for entry in entries:
                try:
                    if entry.is_dir():
                        if recursive:
                            folders.append(entry.path)
                    elif entry.is_file():
                        st = entry.stat()
                        out.append(LakeEntry(entry.name, entry.path, st.st_size, st.st_mtime))
                except FileNotFoundError:  # removed between listing and stat
                    continue
        return sorted(out, key=lambda e: e.location)

    def read(self, location: str) -> bytes:
        """The file's bytes."""
        with open(location, "rb") as handle:
            return handle.read()

    def write(self, relative: str, data: bytes) -> str:
        """Temporary name, fsync, rename, fsync of the folder."""
        path = Path(self.root, relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return str(path)

    def delete(self, location: str) -> None:
        """Unlink."""
        Path(location).unlink(missing_ok=True)

    def copy(self, source: str, relative: str) -> str:
        """A kernel copy to a temporary name, fsync, rename."""
        path = Path(self.root, relative)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        shutil.copyfile(source, tmp)
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        return str(path)


class S3Store:
    """An S3 prefix, through a boto3 S3 client."""

    def __init__(self, root: str, s3: Any = None) -> None:
        self.root = root.rstrip("/")
        self.bucket, self.prefix = split_s3(root)
        self.s3 = s3 if s3 is not None else s3_client()

    def _key(self, relative: str) -> str:
        return "/".join(p for p in (self.prefix, relative.strip("/")) if p)

    def list(self, folder: str, *, recursive: bool = False) -> list[LakeEntry]:
        """Objects under ``folder/`` (direct children unless ``recursive``; folder markers, keys
        ending in ``/``, are not files).

        Raises:
            WorkbookError: when S3 cannot be listed.
        """
        key = self._key(folder)
        prefix = key + "/" if key else ""  # the bucket's root: every key (none starts with "/")
        args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": prefix}
        if not recursive:
            args["Delimiter"] = "/"
        out = []
        try:
            for page in self.s3.get_paginator("list_objects_v2").paginate(**args):
                for item in page.get("Contents", []):
                    if item["Key"].endswith("/"):  # a folder marker (s3a's, or a file-system backend's)
                        continue
                    name = item["Key"].rsplit("/", 1)[-1]
                    location = f"s3://{self.bucket}/{item['Key']}"
                    out.append(LakeEntry(name, location, int(item["Size"]), item["LastModified"].timestamp()))
        except Exception as exc:  # noqa: BLE001 - botocore errors, re-raised with the place
            raise WorkbookError(f"Failed to list s3://{self.bucket}/{prefix}: {exc}") from None
        return sorted(out, key=lambda e: e.location)

    def read(self, location: str) -> bytes:
        """The object's bytes.

        Raises:
            WorkbookError: when the object cannot be read.
        """
        bucket, key = split_s3(location)
        try:
            body: bytes = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception as exc:  # noqa: BLE001
            raise WorkbookError(f"Failed to read {location}: {exc}") from None
        return body

    def write(self, relative: str, data: bytes) -> str:
        """One ``PutObject`` (atomic on S3)."""
        key = self._key(relative)
        try:
            self.s3.put_object(Bucket=self.bucket, Key=key, Body=data)
        except Exception as exc:  # noqa: BLE001
            raise WorkbookError(f"Failed to write s3://{self.bucket}/{key}: {exc}") from None
        return f"s3://{self.bucket}/{key}"

    def delete(self, location: str) -> None:
        """``DeleteObject``."""
        bucket, key = split_s3(location)
        self.s3.delete_object(Bucket=bucket, Key=key)

    def copy(self, source: str, relative: str) -> str:
        """A server-side ``CopyObject`` (atomic on S3).

        Raises:
            WorkbookError: when the object cannot be copied.
        """
        bucket, key = split_s3(source)
        target = self._key(relative)
        try:
            self.s3.copy_object(Bucket=self.bucket, Key=target, CopySource={"Bucket": bucket, "Key": key})
        except Exception as exc:  # noqa: BLE001
            raise WorkbookError(f"Failed to copy {source} to s3://{self.bucket}/{target}: {exc}") from None
        return f"s3://{self.bucket}/{target}"


def open_store(root: str | Path, s3: Any = None) -> LakeStore:
    """A :class:`LocalStore` for a path, an :class:`S3Store` for an ``s3://`` URI."""
    text = str(root)
    return S3Store(text, s3) if is_s3(text) else LocalStore(text)


def read_if_present(store: LakeStore, name: str) -> bytes | None:
    """The bytes of the file ``name`` at the store's root, or None when there is none. One listing
    of the root tells a missing file apart: on S3, reading a missing object fails as any other
    failure does.

    Raises:
        WorkbookError, OSError: when the root cannot be listed or the file cannot be read.
    """
    found = [e for e in store.list("") if e.name == name]
    return store.read(found[0].location) if found else None
