"""Bad Bronze input is set aside with its reason, counted and listed; the rest is ingested.

No database servers: Bronze files are written by the workbook's own Bronze writer from Connect
JSON events built here (the shape Debezium's flattened events have), Silver by the official Hudi
writer (the test session's Spark), read back with the official reader. Expected final state,
stated per test.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from pathlib import Path
from typing import Any

import pytest
from support.bronze_events import write_changes
from support.silver_tables import offline_params

from helpers.bronze.events import event_from_json
from helpers.bronze.writer import BronzeWriter
from helpers.errors import BronzeError, HudiError
from helpers.hudi.read import read_snapshot
from helpers.hudi.timeline import completed_instants, read_commit_metadata
from helpers.params import WorkbookParams
from helpers.silver.ingest import ingest_table
from helpers.silver.quarantine import quarantine_dir, quarantine_frame
from helpers.silver.tables import QUARANTINE_KEY, pending_bronze, table_config

TOPIC = "tickit.ems.category"
DAY = int(dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC).timestamp() * 1000)


def _fields(name_type: str) -> list[dict[str, Any]]:
    if name_type == "decimal":
        name = {
            "type": "bytes",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {"scale": "2", "connect.decimal.precision": "8"},
            "field": "price",
        }
    else:
        name = {"type": "string", "optional": True, "field": "price"}
    return [
        {"type": "int32", "optional": False, "field": "catid"},
        {"type": "string", "optional": True, "field": "catname"},
        name,
        {"type": "string", "optional": True, "field": "__deleted"},
        {"type": "string", "optional": True, "field": "__op"},
        {"type": "int64", "optional": True, "field": "__lsn"},
        {"type": "int64", "optional": True, "field": "__source_ts_ms"},
    ]


def _raw(lsn: int, catid: int, name: str, *, op: str = "c", price: Any = 1.25, kind: str = "decimal") -> str:
    schema = {"type": "struct", "fields": _fields(kind), "optional": False, "name": f"{TOPIC}.Value"}
    payload = {
        "catid": catid,
        "catname": name,
        "price": price,
        "__deleted": "true" if op == "d" else "false",
        "__op": op,
        "__lsn": lsn,
        "__source_ts_ms": DAY + lsn,
    }
    return json.dumps({"schema": schema, "payload": payload})


def _write(params: WorkbookParams, raws: list[str], fmt: str = "avro") -> Path:
    events = [e for e in (event_from_json(TOPIC, r) for r in raws) if e is not None]
    (written,) = BronzeWriter(params.path(params.lake.bronze), fmt).write_batch(events)  # type: ignore[arg-type]
    return written.path


pytestmark = pytest.mark.integration


@pytest.fixture
def params(tmp_path: Path) -> WorkbookParams:
    return offline_params(tmp_path)


def _category(params: WorkbookParams) -> Any:
    return next(t for t in params.silver.tables if t.name == "category")


def _silver(params: WorkbookParams) -> dict[int, tuple[str, Any]]:
    base = table_config(params, _category(params)).base_path
    return {r["catid"]: (r["catname"], r["price"]) for r in read_snapshot(base).to_pylist()}


def test_truncated_avro_file_is_set_aside_whole_and_the_rest_is_ingested(params: WorkbookParams) -> None:
    """Two good files and one truncated: Silver holds the two good files' rows; the truncated
    file is copied byte for byte to the error folder with the reason, counted, listed, taken (not
    read again) and never modified in Bronze."""
    good1 = _write(params, [_raw(10, 1, "a"), _raw(11, 2, "b")])
    bad = _write(params, [_raw(20, 3, "c"), _raw(21, 4, "d")])
    good2 = _write(params, [_raw(30, 5, "e")])
    damaged = bad.read_bytes()[: len(bad.read_bytes()) - 9]
    bad.write_bytes(damaged)

    result = ingest_table(params, _category(params))

    assert (result.files, result.events, result.quarantined) == (3, 3, 1)
    assert _silver(params) == {
        1: ("a", decimal.Decimal("1.25")),
        2: ("b", decimal.Decimal("1.25")),
        5: ("e", decimal.Decimal("1.25")),
    }
    frame = quarantine_frame(params)
    assert frame[["table", "bronze_file", "record", "whole_file"]].to_dict("records") == [
        {"table": "category", "bronze_file": str(bad), "record": None, "whole_file": True}
    ]
    assert "unreadable Avro file" in frame.iloc[0]["reason"]
    copy = Path(quarantine_dir(params, "category")) / "files" / bad.name
    assert copy.read_bytes() == damaged == bad.read_bytes()
    assert good1.exists() and good2.exists()
    pending, _ = pending_bronze(params, _category(params))
    assert pending == []
    again = ingest_table(params, _category(params))
    assert (again.files, again.quarantined, again.instant) == (0, 0, None)
    assert len(quarantine_frame(params)) == 1


def test_unknown_op_and_changed_column_type_are_set_aside_per_event(params: WorkbookParams) -> None:
    """A file with c, u, x and m events: c and u are applied, x and m set aside (record numbers
    2 and 4); then a file whose ``price`` arrives as text while the table holds a decimal: every
    event of it is set aside, none applied. The commit lists the counts."""
    _write(params, [_raw(10, 1, "a")])
    ingest_table(params, _category(params))
    mixed = _write(
        params,
        [_raw(20, 2, "b"), _raw(21, 9, "x", op="x"), _raw(22, 1, "a2", op="u"), _raw(23, 9, "y", op="m")],
    )
    typed = _write(params, [_raw(30, 1, "wrong", price="12.50", kind="string")])

    result = ingest_table(params, _category(params))

    assert (result.files, result.events, result.quarantined) == (2, 2, 3)
    assert _silver(params) == {1: ("a2", decimal.Decimal("1.25")), 2: ("b", decimal.Decimal("1.25"))}
    frame = quarantine_frame(params).sort_values(["bronze_file", "record"])
    rows = frame[["bronze_file", "record"]].values.tolist()
    assert rows == sorted([[str(mixed), 2], [str(mixed), 4], [str(typed), 1]])
    reasons = dict(
        zip(frame["record"].astype(int).astype(str) + frame["bronze_file"], frame["reason"], strict=True)
    )
    assert "unknown __op 'x'" in reasons["2" + str(mixed)]
    assert "unknown __op 'm'" in reasons["4" + str(mixed)]
    assert "'price' is string in this event but decimal128(8, 2)" in reasons["1" + str(typed)]
    record = json.loads(
        (Path(quarantine_dir(params, "category")) / f"{typed.name}.quarantine.json").read_text()
    )
    assert record["records"][0]["event"]["catname"] == "wrong" and record["settled"] is True
    base = table_config(params, _category(params)).base_path
    meta = read_commit_metadata(base, completed_instants(base)[-1])["extraMetadata"]
    assert json.loads(meta[QUARANTINE_KEY]) == {mixed.name: 2, typed.name: 1}
    assert ingest_table(params, _category(params)).files == 0


def test_jsonl_bad_line_is_set_aside_and_the_file_keeps_its_good_lines(params: WorkbookParams) -> None:
    """JSON lines: line 2 broken, line 3 without its record key; lines 1 and 4 are applied."""
    path = _write(params, [_raw(10, 1, "a"), _raw(11, 2, "b"), _raw(12, 3, "c"), _raw(13, 4, "d")], "jsonl")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b'{"schema": {broken\n'
    lines[2] = lines[2].replace(b'"catid": 3', b'"catid": null')
    path.write_bytes(b"".join(lines))

    result = ingest_table(params, _category(params))

    assert (result.events, result.quarantined) == (2, 2)
    assert set(_silver(params)) == {1, 4}
    frame = quarantine_frame(params)
    assert frame["record"].tolist() == [2, 3]
    assert "does not parse" in frame.iloc[0]["reason"]


def test_a_record_written_before_a_failed_commit_is_rewritten_not_duplicated(
    params: WorkbookParams, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The quarantine record is written before the commit: when the commit fails, the Bronze files
    stay pending; the next run writes the same record again (same name, first time kept) and
    commits: one record, the good rows applied once."""
    import helpers.silver.ingest as silver

    _write(params, [_raw(10, 1, "a"), _raw(11, 2, "b", op="x")])
    real = silver.write_hudi

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise silver.HudiError("disk full (simulated commit failure)")

    monkeypatch.setattr(silver, "write_hudi", failing)
    with pytest.raises(silver.HudiError, match="simulated"):
        ingest_table(params, _category(params))
    first = quarantine_frame(params)
    assert len(first) == 1
    assert len(pending_bronze(params, _category(params))[0]) == 1  # not taken: the commit failed
    monkeypatch.setattr(silver, "write_hudi", real)
    result = ingest_table(params, _category(params))
    assert (result.events, result.quarantined) == (1, 1)
    second = quarantine_frame(params)
    assert len(second) == 1 and second.iloc[0]["quarantined_at"] == first.iloc[0]["quarantined_at"]
    assert set(_silver(params)) == {1}
    assert pending_bronze(params, _category(params))[0] == []


def test_a_bronze_file_that_cannot_be_opened_is_an_error_not_bad_input(params: WorkbookParams) -> None:
    """Reading fails (a file listed but gone or refused: permissions, I/O, an S3 AccessDenied;
    here a listing that names a file Spark's executors cannot open): that is not bad input,
    ingestion fails naming the topic and the file, and nothing is set aside or taken."""
    from helpers.bronze.store import BronzeObject, BronzeStore

    ghost = BronzeObject(f"{TOPIC}+1+1+gone.avro", str(params.path(params.lake.bronze) / "gone.avro"), 1.0)

    class Listed(BronzeStore):
        def list(self, topic: str) -> list[BronzeObject]:
            return [*super().list(topic), ghost]

    _write(params, [_raw(10, 1, "a")])
    store = Listed(params.path(params.lake.bronze))
    with pytest.raises(BronzeError, match=f"Failed to read Bronze of {TOPIC} for category: .*gone.avro"):
        ingest_table(params, _category(params), store=store)
    assert quarantine_frame(params).empty
    assert len(pending_bronze(params, _category(params))[0]) == 1


def test_a_null_key_or_log_position_is_set_aside_with_the_field_named(params: WorkbookParams) -> None:
    """Per event: a null record key, a null log position, and a TRUNCATE marker (no key, as
    markers are) without its log position are set aside, each reason naming its field; the event
    beside them and a marker with its position are not bad input."""
    fields = [{**f, "optional": True} for f in _fields("decimal")]
    schema = {"type": "struct", "fields": fields, "optional": False, "name": f"{TOPIC}.Value"}

    def event(lsn: int | None, catid: int | None) -> str:
        payload = {"catid": catid, "catname": "n", "price": 1.25, "__deleted": "false", "__op": "c"}
        return json.dumps({"schema": schema, "payload": {**payload, "__lsn": lsn, "__source_ts_ms": DAY}})

    def marker(lsn: int | None) -> str:
        debezium = [f for f in fields if f["field"] in ("__op", "__lsn", "__source_ts_ms")]
        payload = {"__op": "t", "__lsn": lsn, "__source_ts_ms": DAY}
        return json.dumps({"schema": {**schema, "fields": debezium}, "payload": payload})

    rows = _write(params, [event(40, None), event(None, 5), event(42, 6)])
    markers = _write(params, [marker(None)])
    kept = _write(params, [marker(1)])

    result = ingest_table(params, _category(params))

    assert (result.files, result.events, result.quarantined) == (3, 2, 3)
    frame = quarantine_frame(params)
    reasons = {(Path(f).name, int(r)): why for f, r, why in frame[["bronze_file", "record", "reason"]].values}
    assert reasons == {
        (rows.name, 1): "null record key / log position field(s) ['catid']",
        (rows.name, 2): "null record key / log position field(s) ['__lsn']",
        (markers.name, 1): "null record key / log position field(s) ['__lsn']",
    }
    assert kept.name not in {name for name, _ in reasons}
    assert _silver(params) == {6: ("n", decimal.Decimal("1.25"))}


def test_a_marker_older_than_events_set_aside_for_their_types_is_not_applied(params: WorkbookParams) -> None:
    """A source column made text: the re-snapshot's reads are set aside (the table holds an
    integer), in a round of their own as a running job takes them. Applying the re-snapshot's
    marker would delete every stored row no later event applies, that is all of them, so the marker's
    round is refused, again on the next try, with Silver and its timeline unchanged. With the
    column changed back and the table re-snapshotted, the newer marker applies."""
    table = _category(params)
    base = table_config(params, table).base_path
    key = {"type": "int32", "optional": False, "field": "catid"}
    number = [key, {"type": "int32", "optional": True, "field": "catgroup"}]
    text = [key, {"type": "string", "optional": True, "field": "catgroup"}]

    def rows() -> dict[int, Any]:
        return {r["catid"]: r["catgroup"] for r in read_snapshot(base).to_pylist()}

    write_changes(
        params, number, [(10, "c", {"catid": 1, "catgroup": 5}), (11, "c", {"catid": 2, "catgroup": 6})]
    )
    ingest_table(params, table)
    write_changes(
        params,
        text,
        [(31, "r", {"catid": 1, "catgroup": "five"}), (32, "r", {"catid": 2, "catgroup": "six"})],
    )
    assert ingest_table(params, table).quarantined == 2
    write_changes(params, [], [(30, "resnapshot", {})])
    instants = completed_instants(base)
    for _ in range(2):
        with pytest.raises(HudiError) as refused:
            ingest_table(params, table)
        message = str(refused.value)
        assert "marker at 00000000000000000030 to Silver table category" in message
        assert "the newest at 00000000000000000032" in message and "./workbook resnapshot category" in message
        assert rows() == {1: 5, 2: 6} and completed_instants(base) == instants

    write_changes(params, [], [(40, "resnapshot", {})])
    write_changes(
        params, number, [(41, "r", {"catid": 1, "catgroup": 50}), (42, "r", {"catid": 2, "catgroup": 60})]
    )
    assert ingest_table(params, table).truncated_at == "00000000000000000040"
    assert rows() == {1: 50, 2: 60}
