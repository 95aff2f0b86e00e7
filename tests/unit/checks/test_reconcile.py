"""Reconciliation checksums, when it waits, and retention offsets, without servers
(``helpers.checks.digests``, ``helpers.checks.reconcile``, ``helpers.checks.retention``)."""

from __future__ import annotations

import datetime as dt
import struct
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from helpers.capture.offsets import read_offsets
from helpers.checks.digests import (
    bucket_digests,
    canonical_column,
    compare_sides,
    key_buckets,
    rows_to_arrow,
    side_from_arrow,
    side_from_rows,
)
from helpers.checks.reconcile import describe_differences, nothing_ingests
from helpers.errors import RetentionError
from helpers.params import load_params
from helpers.silver.job import SilverJob
from helpers.sources.positions import SourcePosition, format_lsn, parse_lsn

COLUMNS = ["salesid", "pricepaid", "saletime", "caldate", "note", "doc"]
KEY = ["salesid"]


def _rows() -> list[dict[str, object]]:
    """Three source rows as the drivers return them (aware and naive timestamps, JSON as dicts)."""
    return [
        {
            "salesid": 1,
            "pricepaid": Decimal("728.00"),
            "saletime": dt.datetime(2008, 2, 18, 2, 36, 48, tzinfo=dt.UTC),
            "caldate": dt.date(2008, 2, 18),
            "note": "a",
            "doc": {"b": 1, "a": [1, 2]},
        },
        {
            "salesid": 2,
            "pricepaid": Decimal("0.01"),
            "saletime": dt.datetime(2008, 6, 6, 5, 0, 16, 123456, tzinfo=dt.UTC),
            "caldate": dt.date(2008, 6, 6),
            "note": None,
            "doc": None,
        },
        {
            "salesid": 3,
            "pricepaid": Decimal("12345678.90"),
            "saletime": dt.datetime(2008, 12, 31, 23, 59, 59),
            "caldate": dt.date(2008, 12, 31),
            "note": "",
            "doc": {"x": None},
        },
    ]


def _silver_table(rows: list[dict[str, object]]) -> pa.Table:
    """The same rows as Silver holds them: decimal(8,2), UTC timestamps, JSON as text, extra
    Hudi columns, in another order."""
    import json

    return pa.table(
        {
            "_hoodie_record_key": [str(r["salesid"]) for r in rows],
            "doc": [None if r["doc"] is None else json.dumps(r["doc"]) for r in rows],
            "salesid": pa.array([r["salesid"] for r in rows], pa.int32()),
            "pricepaid": pa.array([r["pricepaid"] for r in rows], pa.decimal128(10, 2)),
            "saletime": pa.array(
                [
                    r["saletime"] if r["saletime"].tzinfo else r["saletime"].replace(tzinfo=dt.UTC)  # type: ignore[union-attr]
                    for r in rows
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "caldate": pa.array([r["caldate"] for r in rows], pa.date32()),
            "note": [r["note"] for r in rows],
        }
    )


def _compare(source_rows: list[dict[str, object]], silver: pa.Table) -> dict[str, object]:
    source = side_from_rows(source_rows, COLUMNS, KEY)
    json_columns = frozenset({"doc"})
    return compare_sides(source, side_from_arrow(silver, COLUMNS, KEY, json_columns), KEY)


def test_equal_sides_agree_across_types_and_order() -> None:
    """Driver values and Silver's Arrow types give the same checksum, whatever the row order."""
    rows = _rows()
    silver = _silver_table(rows[::-1])
    result = _compare(rows, silver)
    assert result["equal"] is True
    assert result["source_checksum"] == result["silver_checksum"]
    assert result["diff_count"] == 0 and result["differing_keys"] == []


def test_checksum_is_order_independent() -> None:
    forward = side_from_rows(_rows(), COLUMNS, KEY)
    backward = side_from_rows(_rows()[::-1], COLUMNS, KEY)
    assert forward.checksum == backward.checksum
    assert len(forward.checksum) == 32


def test_decimal_exactness() -> None:
    """Trailing zeros and scale do not matter; a cent does."""
    text = canonical_column(
        pa.array([Decimal("12.50"), Decimal("120.00"), Decimal("-0.00"), Decimal("0.10")])
    )
    assert text.to_pylist() == ["12.5", "120", "0", "0.1"]
    wide = canonical_column(pa.array([Decimal("12.5")], pa.decimal128(38, 10)))
    assert wide.to_pylist() == ["12.5"]
    rows = _rows()
    silver = _silver_table(rows)
    changed = [dict(r) for r in rows]
    changed[2]["pricepaid"] = Decimal("12345678.91")
    result = _compare(changed, silver)
    assert result["equal"] is False
    assert result["differing_keys"] == [{"salesid": 3, "difference": "different"}]


def test_timestamps_compare_as_utc_instants_with_microseconds() -> None:
    berlin = dt.timezone(dt.timedelta(hours=1))
    aware = pa.array([dt.datetime(2008, 1, 1, 1, 0, 0, 5, tzinfo=berlin)])
    utc = pa.array([dt.datetime(2008, 1, 1, 0, 0, 0, 5)], pa.timestamp("us", tz="UTC"))
    millis = pa.array([dt.datetime(2008, 1, 1, 0, 0, 0)], pa.timestamp("ms"))
    assert canonical_column(aware).to_pylist() == ["2008-01-01T00:00:00.000005"]
    assert canonical_column(utc).to_pylist() == ["2008-01-01T00:00:00.000005"]
    assert canonical_column(millis).to_pylist() == ["2008-01-01T00:00:00.000000"]


def test_json_is_normalised_and_null_is_not_empty() -> None:
    assert canonical_column(pa.array(['{"b": 1, "a": 2}']), json_text=True).to_pylist() == ['{"a":2,"b":1}']
    null_row = side_from_rows([{"salesid": 1, "note": None}], ["salesid", "note"], KEY)
    empty_row = side_from_rows([{"salesid": 1, "note": ""}], ["salesid", "note"], KEY)
    assert null_row.checksum != empty_row.checksum


def test_single_changed_value_changes_checksum() -> None:
    base = side_from_rows(_rows(), COLUMNS, KEY).checksum
    for column, value in [
        ("note", "b"),
        ("caldate", dt.date(2008, 2, 19)),
        ("saletime", dt.datetime(2008, 2, 18, 2, 36, 48, 1, tzinfo=dt.UTC)),
        ("doc", {"b": 2, "a": [1, 2]}),
    ]:
        rows = _rows()
        rows[0][column] = value
        assert side_from_rows(rows, COLUMNS, KEY).checksum != base, column


def test_column_boundaries_matter() -> None:
    """``("ab", "c")`` and ``("a", "bc")`` are different rows (values are length-prefixed)."""
    one = side_from_rows([{"k": 1, "x": "ab", "y": "c"}], ["k", "x", "y"], ["k"])
    two = side_from_rows([{"k": 1, "x": "a", "y": "bc"}], ["k", "x", "y"], ["k"])
    assert one.checksum != two.checksum


def test_key_listing_missing_extra_different_and_counts() -> None:
    rows = _rows()
    silver_rows = [dict(r) for r in rows[1:]]  # key 1 missing in Silver
    silver_rows[0]["note"] = "changed"  # key 2 different
    silver_rows.append({**rows[2], "salesid": 9})  # key 9 extra in Silver
    result = _compare(rows, _silver_table(silver_rows))
    assert result["equal"] is False
    assert result["missing_in_silver"] == 1
    assert result["different"] == 1
    assert result["extra_in_silver"] == 1
    assert result["diff_count"] == 3
    assert result["differing_keys"] == [
        {"salesid": 1, "difference": "missing_in_silver"},
        {"salesid": 2, "difference": "different"},
        {"salesid": 9, "difference": "extra_in_silver"},
    ]


def test_key_listing_is_capped_but_counted() -> None:
    source = side_from_rows([{"k": i, "v": i} for i in range(50)], ["k", "v"], ["k"])
    silver = side_from_rows([{"k": i, "v": i + 1} for i in range(50)], ["k", "v"], ["k"])
    result = compare_sides(source, silver, ["k"], max_keys=5)
    assert result["different"] == 50 and result["diff_count"] == 50
    assert len(result["differing_keys"]) == 5


def test_composite_keys_and_duplicates() -> None:
    columns = ["order_id", "line_no", "qty"]
    source = side_from_rows([{"order_id": 1, "line_no": 1, "qty": 2}], columns, ["order_id", "line_no"])
    silver = side_from_rows(
        [{"order_id": 1, "line_no": 1, "qty": 2}, {"order_id": 1, "line_no": 1, "qty": 2}],
        columns,
        ["order_id", "line_no"],
    )
    result = compare_sides(source, silver, ["order_id", "line_no"])
    assert result["equal"] is False
    assert result["differing_keys"] == [{"order_id": 1, "line_no": 1, "difference": "duplicate_in_silver"}]


def test_differing_rows_are_described_as_the_digests_judge_them() -> None:
    """Only the listed keys are described (a changed cent, a missing key), with the column that
    differs; JSON that differs only in key order and formatting is not a difference."""
    rows = _rows()
    found: set[str] = set()
    source = rows_to_arrow(COLUMNS, [tuple(r[c] for c in COLUMNS) for r in rows], found)
    json_columns = frozenset(found)
    changed = [dict(r) for r in rows[1:]]  # key 1 missing in Silver
    changed[1]["pricepaid"] = Decimal("12345678.91")  # key 3 different
    silver = _silver_table(changed)
    source_side = side_from_arrow(source, COLUMNS, KEY, json_columns)
    silver_side = side_from_arrow(silver, COLUMNS, KEY, json_columns)
    result = compare_sides(source_side, silver_side, KEY)
    detail = describe_differences(
        source, source_side, silver, silver_side, result["differing_keys"], COLUMNS, KEY, json_columns
    )
    assert detail == [
        "1 source key(s) missing in Silver: [('1',)]",
        "1 row(s) differ from the source: [('3',)] (first: pricepaid='12345678.91' != '12345678.9')",
    ]
    extra = _silver_table([*rows, {**rows[2], "salesid": 9}])  # only Silver has rows to describe
    extra_side = side_from_arrow(extra, COLUMNS, KEY, json_columns)
    listed = compare_sides(source_side, extra_side, KEY)["differing_keys"]
    assert describe_differences(
        source, source_side, extra, extra_side, listed, COLUMNS, KEY, json_columns
    ) == ["1 key(s) in Silver but not in the source: [('9',)]"]


def test_positions() -> None:
    assert format_lsn(parse_lsn("16/B374D848")) == "16/B374D848"
    assert SourcePosition("postgres", lsn=10).reaches(SourcePosition("postgres", lsn=10))
    assert not SourcePosition("postgres", lsn=9).reaches(SourcePosition("postgres", lsn=10))
    later_file = SourcePosition("mysql", file="mariadb-bin.000010", pos=4)
    earlier = SourcePosition("mysql", file="mariadb-bin.000009", pos=999_999)
    assert later_file.reaches(earlier) and not earlier.reaches(later_file)
    assert str(later_file) == "mariadb-bin.000010:4"


# ---------------------------------------------------------------------------- offsets.dat

_HASHMAP_HEADER = bytes.fromhex(
    "aced00057372001"
    "16a6176612e7574696c2e486173684d61700507dac1c31660d103000246000a6c6f6164466163746f72"
    "490009746872657368686f6c6478703f4000000000000c770800000010"
)


def _offsets_file(entries: list[tuple[str, str]]) -> bytes:
    """A ``FileOffsetBackingStore`` file as Kafka writes it: a serialised HashMap of byte[] pairs
    (first array with its class descriptor, later ones by back-reference)."""
    out = bytearray(_HASHMAP_HEADER) + struct.pack(">i", len(entries))
    first = True
    for key, value in entries:
        for text in (key, value):
            data = text.encode()
            if first:
                out += bytes.fromhex("757200025b42acf317f8060854e0020000787000000000")[:-4]
                first = False
            else:
                out += bytes.fromhex("7571007e0002")
            out += struct.pack(">i", len(data)) + data
    return bytes(out + b"x")


def test_read_offsets_mariadb_and_postgres(tmp_path: Path) -> None:
    path = tmp_path / "offsets.dat"
    path.write_bytes(
        _offsets_file(
            [
                (
                    '["tickit-ecomm",{"server":"tickit"}]',
                    '{"ts_sec":1795444928,"file":"mariadb-bin.000001","pos":150037}',
                ),
            ]
        )
    )
    offsets = read_offsets(path)
    assert offsets == {
        '["tickit-ecomm",{"server":"tickit"}]': {
            "ts_sec": 1795444928,
            "file": "mariadb-bin.000001",
            "pos": 150037,
        }
    }
    path.write_bytes(
        _offsets_file(
            [
                (
                    '["tickit-ems",{"server":"tickit"}]',
                    '{"lsn":35651528,"txId":766,"ts_usec":1795444923727919}',
                ),
                ('["tickit-x",{"server":"tickit"}]', '{"lsn":1}'),
            ]
        )
    )
    assert read_offsets(path)['["tickit-ems",{"server":"tickit"}]']["lsn"] == 35651528
    assert len(read_offsets(path)) == 2
    assert read_offsets(tmp_path / "missing.dat") == {}


def test_read_offsets_damaged_file_is_an_error(tmp_path: Path) -> None:
    whole = _offsets_file([('["a",{"server":"t"}]', '{"file":"f.000001","pos":4}')])
    path = tmp_path / "offsets.dat"
    path.write_bytes(whole[: whole.index(b'{"file"') + 5])  # value cut off
    with pytest.raises(RetentionError, match="offsets"):
        read_offsets(path)


def test_bucket_digests_agree_across_types_order_and_batches_and_name_a_changed_row() -> None:
    """The whole-table parity digests: the source rows read in two batches and Silver's rows in
    another order and types give the same buckets; one changed value, a missing row or an extra
    row changes exactly the bucket of that key."""
    rows = _rows()
    json_columns = frozenset({"doc"})
    source = rows_to_arrow(COLUMNS, [tuple(r[c] for c in COLUMNS) for r in rows], set(json_columns))
    batches = bucket_digests(source.slice(0, 2), COLUMNS, KEY, json_columns).merged(
        bucket_digests(source.slice(2), COLUMNS, KEY, json_columns)
    )
    silver = bucket_digests(_silver_table(rows[::-1]), COLUMNS, KEY, json_columns)
    assert batches.rows == silver.rows == 3 and batches.differing(silver) == []
    changed = [dict(r) for r in rows]
    changed[1]["note"] = "b"
    other = bucket_digests(_silver_table(changed), COLUMNS, KEY, json_columns)
    bucket_of_2 = int(key_buckets(_silver_table(rows[1:2]), KEY)[0])
    assert batches.differing(other) == [bucket_of_2]
    missing = bucket_digests(_silver_table(rows[:1] + rows[2:]), COLUMNS, KEY, json_columns)
    assert batches.differing(missing) == [bucket_of_2] and missing.rows == 2
    assert bucket_digests(_silver_table(rows[1:2]), COLUMNS, KEY, json_columns).merged(missing) == silver


def test_reconcile_waits_only_when_something_ingests(tmp_path: Path) -> None:
    """Waiting for Silver to reach the source position helps only if something ingests: the call
    itself (``ingest``), or, for the workbook's own Silver, the continuous job. With the job down
    (no live pid, as after ``./workbook stack stop``) the reason is named and nothing is waited
    for; a job whose pid lives, a call that ingests, or Silver under another root (the job does not
    write there) keep the bounded wait."""
    params = load_params("ci", {"state_dir": str(tmp_path / "st"), "lake.silver": str(tmp_path / "silver")})
    why = nothing_ingests(params, params, ingest=False)
    assert why is not None and "continuous Silver job is not running" in why
    assert "silver.start_continuous()" in why
    assert nothing_ingests(params, params, ingest=True) is None
    other = params.model_copy(update={"lake": params.lake.model_copy(update={"silver": str(tmp_path / "x")})})
    assert nothing_ingests(params, other, ingest=False) is None
    job = SilverJob(params)
    job.directory.mkdir(parents=True)
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (job.directory / job.pid_name).write_text(str(alive.pid))
        assert nothing_ingests(params, params, ingest=False) is None
    finally:
        alive.kill()
        alive.wait()
    assert nothing_ingests(params, params, ingest=False) is not None  # its pid is gone again


def test_a_commit_landing_between_the_compare_and_the_caught_up_look_is_not_called_a_difference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first compare reads Silver without a row; a commit then lands, so that caught_up finds
    Silver at the position. The table is judged by a compare made after that look: equal, not
    DIFFERS (seen in notebook 07 when the held continuous job's catch-up committed ``sale_mor``
    between the two)."""
    import helpers.checks.reconcile as reconcile
    from helpers.checks.at_position import SourceSnapshot

    params = load_params("ci", {"state_dir": str(tmp_path / "st"), "lake.silver": str(tmp_path / "silver")})
    table = next(t for t in params.silver.tables if t.name == "sale")
    rows = _rows()
    json_columns: set[str] = set()
    source = rows_to_arrow(COLUMNS, [tuple(r[c] for c in COLUMNS) for r in rows], json_columns)
    reads = [_silver_table(rows[:2]), _silver_table(rows)]  # before the commit, after it
    looks: list[int] = []
    monkeypatch.setattr(reconcile, "silver_rows", lambda p, t: reads.pop(0) if len(reads) > 1 else reads[0])
    monkeypatch.setattr(reconcile, "caught_up", lambda *a: looks.append(len(reads)) or (True, "caught up"))
    snap = SourceSnapshot(
        position=SourcePosition("mysql", file="mariadb-bin.000005", pos=24762),
        tables={table.table: source},
        json_columns={table.table: frozenset(json_columns)},
    )
    out = reconcile._reconcile_table(
        params, params, table, snap, time.monotonic() + 5, False, 0.1, 20, 0.0, None, lambda: ""
    )
    assert looks == [1]  # one look, after the first read
    assert (out["equal"], out["caught_up"], out["note"]) == (True, True, "equal"), out
