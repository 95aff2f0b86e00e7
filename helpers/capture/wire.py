"""Avro in the Confluent wire format: what Kafka messages carry when a schema registry is used.

A message is the magic byte ``0``, the schema's id as a 4-byte big-endian unsigned integer, then
the Avro binary body (no container header). :func:`split_message` and :func:`frame_message` handle
the frame; :class:`WireCodec` encodes and decodes records with ``fastavro``, reading each writer
schema once from the registry (:class:`helpers.capture.ccompat.SchemaRegistryClient`).

Example:
    >>> codec = WireCodec(SchemaRegistryClient(registry.ccompat_url))      # doctest: +SKIP
    >>> message = codec.encode("orders-value", schema, {"id": 1})          # doctest: +SKIP
    >>> codec.decode(message)                                              # doctest: +SKIP
    {'id': 1}
"""

from __future__ import annotations

import io
import struct
from typing import Any, Protocol

from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.types import Schema

from helpers.capture.ccompat import avro_text
from helpers.errors import WireFormatError

__all__ = [
    "HEADER_SIZE",
    "MAGIC_BYTE",
    "SchemaSource",
    "WireCodec",
    "frame_message",
    "read_body",
    "split_message",
]

MAGIC_BYTE = 0
#: Magic byte plus the 4-byte schema id.
HEADER_SIZE = 5
_HEADER = struct.Struct(">bI")


class SchemaSource(Protocol):
    """Where writer schemas come from: a registry client (``register`` and ``schema_by_id``)."""

    def register(self, subject: str, schema: dict[str, Any] | list[Any] | str) -> int: ...

    def schema_by_id(self, schema_id: int) -> dict[str, Any] | list[Any] | str: ...


def split_message(message: bytes) -> tuple[int, bytes]:
    """The schema id and Avro body of a wire-format message.

    Raises:
        WireFormatError: for a message shorter than the header or with another magic byte.
    """
    if len(message) < HEADER_SIZE:
        raise WireFormatError(
            f"Failed to read a wire-format message: it has {len(message)} byte(s), fewer than the "
            f"{HEADER_SIZE}-byte header (magic byte and schema id)"
        )
    magic, schema_id = _HEADER.unpack_from(message)
    if magic != MAGIC_BYTE:
        raise WireFormatError(
            f"Failed to read a wire-format message: magic byte {magic:#04x}, expected {MAGIC_BYTE:#04x}; "
            "the message was not written by a schema-registry serializer in the Confluent format"
        )
    return int(schema_id), bytes(message[HEADER_SIZE:])


def frame_message(schema_id: int, body: bytes) -> bytes:
    """A wire-format message: the header for ``schema_id`` followed by ``body``.

    Raises:
        WireFormatError: for an id outside 0..2**32-1.
    """
    if not 0 <= schema_id <= 0xFFFFFFFF:
        raise WireFormatError(
            f"Failed to frame a wire-format message: schema id {schema_id} does not fit 4 bytes"
        )
    return _HEADER.pack(MAGIC_BYTE, schema_id) + body


def read_body(schema_id: int, body: bytes, writer: Schema, reader: Schema | None = None) -> Any:
    """The record in the Avro ``body`` of a message with schema ``schema_id`` (parsed ``writer``),
    optionally resolved to ``reader``; the whole body must be the one record.

    Raises:
        WireFormatError: for a body that does not match the schema.
    """
    buffer = io.BytesIO(body)
    try:
        record = schemaless_reader(buffer, writer, reader)
    except (EOFError, ValueError, IndexError, TypeError, UnicodeDecodeError, struct.error) as exc:
        raise WireFormatError(
            f"Failed to decode a wire-format message with schema id {schema_id}: the Avro body "
            f"does not match that schema ({type(exc).__name__}: {exc})"
        ) from None
    if buffer.tell() != len(body):
        raise WireFormatError(
            f"Failed to decode a wire-format message with schema id {schema_id}: "
            f"{len(body) - buffer.tell()} byte(s) left after the record; the writer used another schema"
        )
    return record


class WireCodec:
    """Encode and decode Avro records in the wire format against a schema registry.

    Parsed schemas are cached per id (a registry never changes the schema behind an id) and per
    subject and schema text for encoding.

    Args:
        registry: the schema source, normally a :class:`~helpers.capture.ccompat.SchemaRegistryClient`.
    """

    def __init__(self, registry: SchemaSource) -> None:
        self.registry = registry
        self._by_id: dict[int, Schema] = {}
        self._ids: dict[tuple[str, str], int] = {}

    def writer_schema(self, schema_id: int) -> Schema:
        """The parsed schema with id ``schema_id`` (read from the registry once).

        Raises:
            SchemaRegistryError: when the registry does not know the id.
        """
        if schema_id not in self._by_id:
            self._by_id[schema_id] = parse_schema(self.registry.schema_by_id(schema_id))
        return self._by_id[schema_id]

    def decode(self, message: bytes, reader_schema: dict[str, Any] | None = None) -> Any:
        """The record in a wire-format message, optionally resolved to ``reader_schema``.

        Raises:
            WireFormatError: for a malformed header or a body that does not match the schema.
            SchemaRegistryError: for a schema id the registry does not know.
        """
        schema_id, body = split_message(message)
        writer = self.writer_schema(schema_id)
        reader = parse_schema(reader_schema) if reader_schema is not None else None
        return read_body(schema_id, body, writer, reader)

    def schema_id(self, subject: str, schema: dict[str, Any] | list[Any] | str) -> int:
        """The id of ``schema`` under ``subject``, registering it on first use."""
        key = (subject, avro_text(schema))
        if key not in self._ids:
            self._ids[key] = self.registry.register(subject, schema)
        return self._ids[key]

    def encode(self, subject: str, schema: dict[str, Any] | list[Any] | str, record: Any) -> bytes:
        """``record`` as a wire-format message with ``schema`` (registered under ``subject``).

        Raises:
            WireFormatError: when the record does not fit the schema.
            SchemaRegistryError: when the registry refuses the schema.
        """
        schema_id = self.schema_id(subject, schema)
        writer = self.writer_schema(schema_id)
        buffer = io.BytesIO()
        try:
            schemaless_writer(buffer, writer, record)
        except (ValueError, TypeError, KeyError, AttributeError, struct.error) as exc:
            raise WireFormatError(
                f"Failed to encode a record for subject {subject!r}: it does not fit the schema "
                f"({type(exc).__name__}: {exc})"
            ) from None
        return frame_message(schema_id, buffer.getvalue())
