"""Pure parts of the loaders: text encoding for COPY / LOAD DATA and DDL builders."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa

from helpers.engines import quote_mariadb
from helpers.params import load_params
from helpers.sources.sample.bulk import encode_text_rows
from helpers.sources.sample.ddl import mariadb_table_ddl, postgres_table_ddl
from helpers.sources.sample.load import LoadReport, TableLoad, tickit_sources
from helpers.sources.sample.tickit import decimal_from_cents
from helpers.sources.sample.tickit_tables import TABLES


def test_encoding_escapes_and_nulls() -> None:
    table = pa.table(
        {
            "i": pa.array([1, None, -3], pa.int32()),
            "s": pa.array(["a\tb", "back\\slash\nnew\rline", None]),
            "b": pa.array([True, False, None]),
            "m": decimal_from_cents([1250, -5, 0]),
            "d": pa.array([dt.date(2008, 1, 1), None, dt.date(2008, 12, 30)]),
            "t": pa.array(
                [dt.datetime(2008, 1, 1, 19, 30), None, dt.datetime(2008, 2, 29, 0, 0, 1)], pa.timestamp("us")
            ),
        }
    )
    lines = encode_text_rows(table).decode().split("\n")
    assert lines[-1] == ""  # every row ends with a newline
    assert lines[0].split("\t") == ["1", "a\\tb", "1", "12.50", "2008-01-01", "2008-01-01 19:30:00.000000"]
    assert lines[1].split("\t") == ["\\N", "back\\\\slash\\nnew\\rline", "0", "-0.05", "\\N", "\\N"]
    assert lines[2].split("\t") == ["-3", "\\N", "\\N", "0.00", "2008-12-30", "2008-02-29 00:00:01.000000"]


def test_encoding_of_a_slice_and_utc_timestamps() -> None:
    table = pa.table({"s": ["x", "yy", "zzz"], "t": pa.array([0, 1, 2], pa.timestamp("us", tz="UTC"))})
    assert encode_text_rows(table.slice(1, 2)) == (
        b"yy\t1970-01-01 00:00:00.000001Z\nzzz\t1970-01-01 00:00:00.000002Z\n"
    )
    assert encode_text_rows(table.slice(0, 0)) == b""


def test_postgres_ddl_types_and_key() -> None:
    text = postgres_table_ddl("ems", TABLES["event"]).as_string(None)
    assert text.startswith('CREATE TABLE IF NOT EXISTS "ems"."event" (')
    assert '"eventid" integer NOT NULL' in text and '"venueid" smallint NOT NULL' in text
    assert '"starttime" timestamp' in text and 'PRIMARY KEY ("eventid")' in text
    sale = postgres_table_ddl("ecomm", TABLES["sale"]).as_string(None)
    assert '"pricepaid" decimal(8,2)' in sale and '"commission" decimal(8,2)' in sale


def test_mariadb_ddl_types_and_key() -> None:
    text = mariadb_table_ddl("ecomm", TABLES["date"])
    assert text.startswith("CREATE TABLE IF NOT EXISTS `ecomm`.`date` (")
    assert (
        "`holiday` BOOLEAN" in text and "`caldate` DATE NOT NULL" in text and "`day` CHAR(3) NOT NULL" in text
    )
    assert "PRIMARY KEY (`dateid`)" in text and "ENGINE=InnoDB" in text
    listing = mariadb_table_ddl("ecomm", TABLES["listing"])
    assert "`listtime` DATETIME(6)" in listing and "`priceperticket` DECIMAL(8,2)" in listing
    assert "`listid` INT NOT NULL" in listing


def test_every_tickit_table_has_a_primary_key() -> None:
    for spec in TABLES.values():
        assert spec.primary_key and set(spec.primary_key) <= set(spec.column_names)


def test_mariadb_quoting() -> None:
    assert quote_mariadb("date") == "`date`"
    assert quote_mariadb("we`ird") == "`we``ird`"


def test_tickit_sources_from_params() -> None:
    sources = tickit_sources(load_params("ci"))
    assert {name: s.tables for name, s in sources.items()} == {
        "ecomm": ("date", "listing", "sale"),
        "ems": ("category", "event", "venue"),
        "crm": ("users",),
    }


def test_report_summaries() -> None:
    report = LoadReport(
        [
            TableLoad("ems", "venue", 2, True, "empty", 0.1),
            TableLoad("crm", "users", 500, False, "complete", 0.0),
        ],
        0.1,
    )
    assert report.rows == {"venue": 2, "users": 500}
    assert report.rows_loaded == 2 and report.loaded_tables == ["venue"]
    assert list(report.to_frame().columns) == ["source", "table", "rows", "loaded", "reason", "seconds"]
    assert Decimal("12.50") == decimal_from_cents([1250]).to_pylist()[0]
