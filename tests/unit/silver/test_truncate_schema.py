"""A Bronze writer schema of a TRUNCATE marker is judged as such: no key needed, the log position is."""

from __future__ import annotations

import json

from helpers.bronze.layout import FileLayout, SchemaPart
from helpers.bronze.store import BronzeObject
from helpers.params import load_params
from helpers.silver.checked import schema_verdicts
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
