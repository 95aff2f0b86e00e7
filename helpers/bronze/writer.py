"""The Bronze zone of the embedded world: raw change events as immutable, self-describing files.

:class:`BronzeWriter` writes each batch to
``<bronze>/<topic>/year=YYYY/month=MM/day=DD/<topic>+<first>+<last>+<digest>.<ext>`` (Avro or JSON
lines) and returns only once the file is durable; only then may the capture engine commit its
offsets. ``<bronze>`` is a folder or an ``s3://`` URI (one ``PutObject`` per file, through
:func:`helpers.lake_store.open_store`). The layout, formats and redelivery: ``docs/architecture.md``,
"Capture and the Bronze zone".
"""

from __future__ import annotations

import datetime as dt
import decimal
import errno
import hashlib
import io
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import fastavro

from helpers.bronze.events import (
    BronzeEvent,
    avro_record,
    avro_schema_from_connect,
    converted_fields,
    position_of,
)
from helpers.errors import BronzeError, BronzeNotWritableError, WorkbookError
from helpers.lake_store import LakeStore, is_s3, join, open_store

__all__ = ["BronzeFile", "BronzeFormat", "BronzeWriter"]

BronzeFormat = Literal["avro", "jsonl"]
_EXT = {"avro": "avro", "jsonl": "jsonl"}
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")
_NOT_WRITABLE = (errno.EACCES, errno.EPERM, errno.EROFS)


def _position_text(position: tuple[Any, ...]) -> str:
    if len(position) == 1:
        return f"{position[0]:020d}"
    if isinstance(position[1], int):
        return f"{_SAFE.sub('_', position[0])}-{position[1]:012d}-{position[2]:06d}"
    return "-".join(_SAFE.sub("_", str(p).replace(":", "")) for p in position)


# ------------------------------------------------------------------------------- Avro schema


# ------------------------------------------------------------------------------- writer


@dataclass(frozen=True)
class BronzeFile:
    """A Bronze file made visible by :meth:`BronzeWriter.write_batch`."""

    topic: str
    path: Path | str  # a local path, or the object's s3:// URI
    events: int
    first: tuple[Any, ...]
    last: tuple[Any, ...]
    snapshot_rows: int


@dataclass
class BronzeWriter:
    """Writes batches of change events to Bronze files, durably and idempotently (``docs/architecture.md``).

    Attributes:
        root: the Bronze zone directory, or an ``s3://`` URI.
        fmt: ``avro`` or ``jsonl``.
        codec: Avro block codec (``deflate`` is in every Avro reader, also EMR's).
    """

    root: Path | str
    fmt: BronzeFormat = "avro"
    codec: str = "deflate"
    _schemas: dict[Any, Any] = field(default_factory=dict, repr=False)
    _store: LakeStore | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.fmt not in _EXT:
            raise BronzeError(
                f"Failed to configure the Bronze writer: format {self.fmt!r} is not one of {sorted(_EXT)}"
            )
        if is_s3(str(self.root)):
            self.root = str(self.root).rstrip("/")
            self._store = open_store(self.root)
        else:
            self.root = Path(self.root)

    def write_batch(self, events: Sequence[BronzeEvent]) -> list[BronzeFile]:
        """Write one batch of events (in log order) as one file per topic, day and schema.

        Args:
            events: the batch (tombstones already removed).

        Returns:
            The files written; every one is durable when this returns.

        Raises:
            BronzeError: for an event without time or position, or when writing fails (nothing
                of the failed file is visible).
        """
        groups: dict[tuple[str, dt.date, Any], list[BronzeEvent]] = {}
        for event in events:
            day = dt.datetime.fromtimestamp(event.source_ts_ms / 1000, tz=dt.UTC).date()
            schema_key = self._schema_key(event.schema) if self.fmt == "avro" else ""
            groups.setdefault((event.topic, day, schema_key), []).append(event)
        written = []
        for (topic, day, _), group in groups.items():
            written.append(self._write_group(topic, day, group))
        return written

    def _schema_key(self, schema: Mapping[str, Any] | None) -> Any:
        """Events parsed from the same schema text share one schema object: key by identity
        (falling back to the canonical text for schemas built elsewhere)."""
        if schema is None:
            return None
        key = id(schema)
        known = self._schemas.get(("id", key))
        if known is not None and known[0] is schema:
            return known[1]
        text = json.dumps(schema, sort_keys=True)
        self._schemas[("id", key)] = (schema, text)
        return text

    def _write_group(self, topic: str, day: dt.date, events: list[BronzeEvent]) -> BronzeFile:
        positions = [position_of(e.value) for e in events]
        first, last = min(positions), max(positions)
        digest = hashlib.blake2b(b"\n".join(e.raw for e in events), digest_size=6).hexdigest()
        folder = f"{topic}/year={day.year:04d}/month={day.month:02d}/day={day.day:02d}"
        name = f"{topic}+{_position_text(first)}+{_position_text(last)}+{digest}.{_EXT[self.fmt]}"
        snapshot = sum(1 for e in events if e.value.get("__op") == "r")
        if self._store is not None:  # S3: one PutObject, visible whole or not at all
            data = self._encode(topic, events)
            try:
                location = self._store.write(f"{folder}/{name}", data)
            except WorkbookError as exc:
                raise BronzeError(
                    f"Failed to write Bronze file {join(str(self.root), folder, name)}: {exc}"
                ) from exc
            return BronzeFile(topic, location, len(events), first, last, snapshot)
        directory = Path(self.root, folder)
        try:
            self._makedirs(directory)
            data = self._encode(topic, events)
            tmp = directory / f".{name}.tmp-{os.getpid()}"
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, directory / name)
            # dated when it became visible, not when its bytes were written: readers take files by
            # modification time (the streamer's checkpoint, the PySpark engine's), and a second
            # writer of the topic (the re-snapshot's marker) renames between capture's files
            os.utime(directory / name)
            _fsync_dir(directory)
        except OSError as exc:
            if exc.errno in _NOT_WRITABLE:
                raise BronzeNotWritableError(
                    f"Failed to write Bronze file {directory / name}: Bronze folder {directory} is not "
                    f"writable: {exc.strerror}; make it writable and restart the connector (the batch "
                    "was not marked processed: it is delivered again)"
                ) from exc
            raise BronzeError(f"Failed to write Bronze file {directory / name}: {exc}") from exc
        return BronzeFile(topic, directory / name, len(events), first, last, snapshot)

    def _makedirs(self, directory: Path) -> None:
        missing = []
        probe = directory
        while not probe.exists():
            missing.append(probe)
            probe = probe.parent
        directory.mkdir(parents=True, exist_ok=True)
        for created in reversed(missing):
            _fsync_dir(created.parent)

    def _encode(self, topic: str, events: list[BronzeEvent]) -> bytes:
        if self.fmt == "jsonl":
            # each line as the JSON converter wrote it: {"schema":...,"payload":...} (what Kafka
            # Connect's S3 sink writes with JsonFormat), so the types stay recoverable
            return b"".join(e.raw.replace(b"\n", b" ") + b"\n" for e in events)
        if events[0].schema is None:
            raise BronzeError(
                f"Failed to write Avro for topic {topic}: events carry no schema "
                "(set value.converter.schemas.enable=true, or use the jsonl format)"
            )
        key = self._schema_key(events[0].schema)
        if key not in self._schemas:
            avro = avro_schema_from_connect(events[0].schema, topic)
            self._schemas[key] = (fastavro.parse_schema(avro), converted_fields(avro))
        parsed, converted = self._schemas[key]
        buffer = io.BytesIO()
        try:
            fastavro.writer(
                buffer, parsed, (avro_record(e.value, converted) for e in events), codec=self.codec
            )
        except (ValueError, TypeError, decimal.InvalidOperation) as exc:
            raise BronzeError(f"Failed to encode events of topic {topic} as Avro: {exc}") from exc
        return buffer.getvalue()


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ------------------------------------------------------------------------------- reading
