"""Where each table's HoodieStreamer resumes reading Bronze (``silver.engine: streamer``, Bronze
source): after the PySpark engine's checkpoint when the engine was switched
(:func:`resume_checkpoint`), or again from the first file with a new schema
(:func:`reread_checkpoint`), and the newest Bronze schema a table's configuration is generated
from (:func:`newest_bronze_schema`). The Kafka source's own: :mod:`helpers.silver.streamer_kafka`."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import fastavro

from helpers.bronze.events import avro_schema_from_connect
from helpers.bronze.store import BronzeObject
from helpers.naming import silver_topic
from helpers.params import SilverTableParams, WorkbookParams
from helpers.proc import replace_text
from helpers.silver.state import TableState, read_table_state
from helpers.silver.tables import bronze_store, pending_bronze, table_config

__all__ = ["newest_bronze_schema", "reread_checkpoint", "resume_checkpoint"]


def _is_bronze_checkpoint(checkpoint: str | None) -> bool:
    """Whether a HoodieStreamer checkpoint is a Bronze one (``DFSPathSelector``'s epoch ms); a Kafka
    source's reads ``topic,partition:offset,...``."""
    return bool(checkpoint) and str(checkpoint).isdigit()


def resume_checkpoint(
    params: WorkbookParams, table: SilverTableParams, state: TableState | None = None
) -> str | None:
    """``--checkpoint`` for a table the PySpark engine wrote last (``silver.engine`` switched to
    streamer), else None: the newest millisecond up to which every Bronze file is taken, so the
    streamer goes on where the PySpark engine stopped. Re-reading a few files below it applies
    nothing twice: an upsert by key with the log position as ordering field leaves the same row.
    """
    state = state or read_table_state(table_config(params, table).base_path)
    if state.is_new or _is_bronze_checkpoint(state.streamer_checkpoint):
        return None  # a Kafka checkpoint (silver.streamer.source switched back): from Bronze's own
    listing = bronze_store(params).list(silver_topic(params, table))  # listed once
    pending, _ = pending_bronze(params, table, state=state, listing=listing)
    if not listing:
        return "0"
    if pending:
        return str(min(int(o.modified * 1000) for o in pending) - 1)
    return str(max(int(o.modified * 1000) for o in listing))


def _file_schema(store: Any, obj: BronzeObject, topic: str) -> dict[str, Any]:
    """A Bronze file's Avro schema (JSON lines: derived from its first line's Connect schema)."""
    data = store.lake.read(obj.uri)
    if obj.is_jsonl:
        first = json.loads(data.split(b"\n", 1)[0])
        return avro_schema_from_connect(first.get("schema") or {}, topic)
    schema: dict[str, Any] = fastavro.reader(io.BytesIO(data)).writer_schema  # type: ignore[assignment]
    return schema


def _bronze_files(params: WorkbookParams, table: SilverTableParams) -> tuple[Any, list[BronzeObject]]:
    """The Bronze store and the table's files, newest first (by modification time)."""
    store = bronze_store(params)
    files = sorted(store.list(silver_topic(params, table)), key=lambda f: (f.modified, f.uri), reverse=True)
    return store, files


def _is_marker(schema: Mapping[str, Any]) -> bool:
    """Whether a Bronze file's schema is a TRUNCATE / re-snapshot marker's: no column of the table,
    only Debezium's ``__`` fields."""
    return all(str(f["name"]).startswith("__") for f in schema.get("fields", []))


def _data_schemas(
    params: WorkbookParams, table: SilverTableParams
) -> Iterator[tuple[BronzeObject, dict[str, Any]]]:
    """The table's Bronze files with their schemas, newest first, marker files left out."""
    store, files = _bronze_files(params, table)
    topic = silver_topic(params, table)
    for obj in files:
        schema = _file_schema(store, obj, topic)
        if not _is_marker(schema):
            yield obj, schema


def newest_bronze_schema(params: WorkbookParams, table: SilverTableParams) -> dict[str, Any] | None:
    """The Avro schema of the newest Bronze file of the table's topic that holds changes (a
    TRUNCATE or re-snapshot marker's file has none of the table's columns); None: no such file."""
    return next((schema for _, schema in _data_schemas(params, table)), None)


def reread_checkpoint(
    params: WorkbookParams,
    table: SilverTableParams,
    conf: Path,
    schema_text: str,
    state: TableState | None = None,
) -> str | None:
    """``--checkpoint`` that makes HoodieStreamer read Bronze again from the first file with a new
    schema, else None.

    The reader schema is the newest Bronze file's when the configuration is generated. A file with a
    new column that lands between two generations is read with the older reader schema, which
    drops the column without a word (measured: a venue inserted with a new ``venueurl`` reached
    Silver without it). So when the schema about to be written differs from the one the table was
    last read with (``<table>.source.avsc``), the files from just before the first one with the new
    schema are read again (from the streamer's own checkpoint if that is earlier). The value is kept in
    ``<table>.reread`` until a commit of the table records it as its ``--checkpoint``. Reading a
    suffix of Bronze again applies nothing twice (an upsert by key ordered by log position).
    """
    marker = conf / f"{table.name}.reread"
    state = state or read_table_state(table_config(params, table).base_path)
    if marker.exists():
        kept = marker.read_text(encoding="utf-8").strip()
        if state.streamer_reset != kept:
            return kept
        marker.unlink()
    previous = conf / f"{table.name}.source.avsc"
    if state.is_new or not state.streamer_checkpoint or not previous.exists():
        return None
    if previous.read_text(encoding="utf-8") == schema_text:
        return None
    value = _bronze_reread(params, table, state) if _is_bronze_checkpoint(state.streamer_checkpoint) else None
    if value is not None:
        replace_text(marker, value)
    return value


def _bronze_reread(params: WorkbookParams, table: SilverTableParams, state: TableState) -> str | None:
    """The Bronze checkpoint just before the first file with the newest schema (or the streamer's
    own checkpoint, if earlier); None: no data file."""
    newest: dict[str, Any] | None = None
    first = None
    for obj, schema in _data_schemas(params, table):  # newest first: back to the first file with it
        newest = newest or schema
        if schema != newest:
            break
        first = obj
    if first is None:
        return None
    # never after the streamer's own checkpoint: files between would be skipped. A round in flight
    # may take the new file with the old reader schema even when the checkpoint is before it yet
    # (measured: the round that took venue's new file had started before the schema was written)
    return str(min(int(first.modified * 1000) - 1, int(state.streamer_checkpoint or 0)))
