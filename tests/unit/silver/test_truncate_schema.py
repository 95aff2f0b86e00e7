"""A Bronze writer schema of a TRUNCATE marker is judged as such: no key needed, the log position is."""

from __future__ import annotations

import json

import pyarrow as pa

from helpers.bronze.layout import FileLayout, SchemaPart
from helpers.bronze.store import BronzeObject
from helpers.params import load_params
from helpers.silver.checked import catalog_holds, schema_verdicts, widened
from helpers.silver.tables import position_fields, table_config
from helpers.silver.truncate import is_marker_schema


def _schema(*fields: tuple[str, str]) -> str:
    return json.dumps(
        {"type": "record", "name": "Value", "fields": [{"name": n, "type": ["null", t]} for n, t in fields]},
        sort_keys=True,
    )


MARKER = _schema(("__op", "string"), ("__table", "string"), ("__lsn", "long"), ("__source_ts_ms", "long"))
ROWS = _schema(
    ("catid", "int"), ("catgroup", "string"), ("__op", "string"), ("__lsn", "long"), ("__deleted", "string")
)


def _layout(name: str, schema: str) -> FileLayout:
    return FileLayout(BronzeObject(name, f"/b/{name}", 0.0, 1), (SchemaPart(schema, 1),), None)


def test_marker_schema_is_debezium_fields_only_without_the_key() -> None:
    assert is_marker_schema({"__op", "__lsn", "__table"}, ("catid",))
    assert not is_marker_schema({"__op", "__lsn", "catid"}, ("catid",))  # a row event
    assert not is_marker_schema({"__op", "__lsn", "name"}, ("catid",))  # a row event without its key
    assert not is_marker_schema({"__lsn"}, ("catid",))


def test_schema_verdicts_accept_a_marker_and_still_reject_a_row_schema_without_its_key() -> None:
    params = load_params("local")
    table = next(t for t in params.silver.tables if t.name == "category")
    config, positions = table_config(params, table), position_fields(params, table)
    no_key = _schema(("catgroup", "string"), ("__op", "string"), ("__lsn", "long"), ("__deleted", "string"))
    got = schema_verdicts(
        [_layout("a.avro", ROWS), _layout("b.avro", MARKER), _layout("c.avro", no_key)], config, positions, {}
    )
    assert MARKER not in got and ROWS not in got
    assert "lacks field(s) ['catid']" in got[no_key]
    no_position = _schema(("__op", "string"), ("__table", "string"))
    assert (
        "truncate marker lacks log position"
        in schema_verdicts([_layout("d.avro", no_position)], config, positions, {})[no_position]
    )


def test_a_widened_column_makes_the_commit_sync_the_catalog_and_nothing_else_does() -> None:
    """Wider integers, floats and decimals (more digits, the same scale) need the catalog's column
    to follow; a narrower or equal type, or a type not compared (None), does not; a new column does."""
    stored = {"id": pa.int32(), "qty": pa.int16(), "price": pa.decimal128(8, 2), "ratio": pa.float32()}
    assert catalog_holds({"id": pa.int32(), "qty": pa.int16()}, stored)
    assert catalog_holds({"qty": pa.int8(), "price": pa.decimal128(6, 2), "ratio": None}, stored)
    assert catalog_holds({"id": pa.string()}, stored)  # another kind: the schema checks set it aside
    for wider in ({"id": pa.int64()}, {"price": pa.decimal128(12, 2)}, {"ratio": pa.float64()}):
        assert not catalog_holds(wider, stored), wider
    assert not catalog_holds({"note": pa.string()}, stored)  # a new column
    assert widened(pa.int64(), pa.int32()) and not widened(pa.int32(), pa.int64())
    assert not widened(pa.timestamp("us", "UTC"), pa.timestamp("ms", "UTC"))
