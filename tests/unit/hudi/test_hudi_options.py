"""Unit tests of Hudi option handling: read options, write options, and the engine choice.

No Spark and no Hudi jar: the official branch is checked through the exact option dict handed to
``df.write.format("hudi")`` (captured by a fake DataFrame writer).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from helpers.errors import HudiError, cause_line
from helpers.hudi.api import DEFAULT_WRITE_OPTIONS, read_hudi_df, write_options
from helpers.hudi.config import HudiTableConfig
from helpers.hudi.keys import record_keys
from helpers.hudi.read import EARLIEST_INSTANT, HudiReadSpec, parse_read_options, transient_read_error

KEYGEN = "org.apache.hudi.keygen."
BASE = {
    "hoodie.table.name": "sales",
    "hoodie.datasource.write.recordkey.field": "salesid",
    "hoodie.datasource.write.precombine.field": "saletime",
}


# ----------------------------------------------------------------------------- read options


def test_read_defaults_to_snapshot() -> None:
    """No options: snapshot of the latest commit."""
    assert parse_read_options({}) == HudiReadSpec()
    assert parse_read_options(None).query_type == "snapshot"


def test_read_as_of_is_normalised() -> None:
    """``as.of.instant`` accepts any instant form and ends up as 17 digits."""
    spec = parse_read_options({"as.of.instant": "2025-03-31 03:06:42.808"})
    assert spec.as_of == "20250331030642808"
    assert spec.to_datasource_options() == {
        "hoodie.datasource.query.type": "snapshot",
        "as.of.instant": "20250331030642808",
    }
    assert spec.to_read_options().as_of_timestamp() == "20250331030642808"


def test_read_incremental_bounds() -> None:
    """Begin/end map to the official reader's start/end timestamps; ``000`` means from the start."""
    spec = parse_read_options(
        {
            "hoodie.datasource.query.type": "incremental",
            "hoodie.datasource.read.begin.instanttime": "000",
            "hoodie.datasource.read.end.instanttime": "20250331030645735",
        }
    )
    assert (spec.begin, spec.end) == (EARLIEST_INSTANT, "20250331030645735")
    native = spec.to_read_options()
    assert native.start_timestamp() == EARLIEST_INSTANT
    assert native.end_timestamp() == "20250331030645735"
    assert native.query_type().name.lower() == "incremental"


def test_read_optimized_sets_the_reader_flag() -> None:
    """``read_optimized`` is a snapshot of base files only in the official reader's terms."""
    native = parse_read_options({"hoodie.datasource.query.type": "READ_OPTIMIZED"}).to_read_options()
    assert native.hudi_options["hoodie.read.use.read_optimized.mode"] == "true"
    assert native.query_type().name.lower() == "snapshot"


def test_read_native_options_pass_through() -> None:
    """``hoodie.read.*`` keys reach the official reader unchanged; Java-only tuning is ignored."""
    spec = parse_read_options({"hoodie.read.stream.batch_size": "1024", "hoodie.metadata.enable": "true"})
    assert spec.to_read_options().hudi_options == {"hoodie.read.stream.batch_size": "1024"}


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"hoodie.datasource.query.type": "streaming"}, "is not one of"),
        (
            {"hoodie.datasource.query.typ": "snapshot"},
            r"unknown option\(s\) \['hoodie.datasource.query.typ'\]",
        ),
        ({"hoodie.datasource.query.type": "incremental"}, "needs hoodie.datasource.read.begin.instanttime"),
        (
            {
                "hoodie.datasource.query.type": "incremental",
                "hoodie.datasource.read.begin.instanttime": "20250101",
                "as.of.instant": "20250102",
            },
            "cannot be combined",
        ),
        (
            {"hoodie.datasource.read.begin.instanttime": "20250101"},
            "need hoodie.datasource.query.type=incremental",
        ),
        (
            {
                "hoodie.datasource.query.type": "incremental",
                "hoodie.datasource.read.begin.instanttime": "20250102",
                "hoodie.datasource.read.end.instanttime": "20250101",
            },
            "is before",
        ),
        ({"as.of.instant": "yesterday"}, "as.of.instant='yesterday'"),
    ],
)
def test_read_option_errors(options: dict[str, str], match: str) -> None:
    """Unknown keys, bad values and contradictions fail before any read, naming the problem."""
    with pytest.raises(HudiError, match=match):
        parse_read_options(options)


# ----------------------------------------------------------------------------- write options


def test_write_options_add_table_version_6_and_the_workbook_defaults() -> None:
    """Every write gets table version 6 without auto-upgrade, a UTC timeline, no metadata table,
    the ordering payload and the key generator its keys and partitions call for."""
    out = write_options(BASE)
    assert out["hoodie.write.table.version"] == "6"
    assert out["hoodie.write.auto.upgrade"] == "false"
    assert out["hoodie.table.timeline.timezone"] == "UTC"
    assert out["hoodie.metadata.enable"] == "false"
    assert out["hoodie.datasource.write.operation"] == "upsert"
    assert (
        out["hoodie.datasource.write.payload.class"]
        == "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
    )
    assert out["hoodie.datasource.write.keygenerator.class"] == KEYGEN + "NonpartitionedKeyGenerator"
    assert (
        write_options({**BASE, "hoodie.datasource.write.partitionpath.field": "day"})[
            "hoodie.datasource.write.keygenerator.class"
        ]
        == KEYGEN + "SimpleKeyGenerator"
    )
    composite = {
        **BASE,
        "hoodie.datasource.write.recordkey.field": "a, b",
        "hoodie.datasource.write.partitionpath.field": "d",
    }
    assert (
        write_options(composite)["hoodie.datasource.write.keygenerator.class"]
        == KEYGEN + "ComplexKeyGenerator"
    )


def test_write_options_keep_the_callers_choices() -> None:
    """A key the caller gives wins over the workbook's default; the rest passes unchanged."""
    mine = {
        **BASE,
        "hoodie.metadata.enable": "true",
        "hoodie.datasource.write.operation": "INSERT",
        "x.y": "1",
    }
    out = write_options(mine)
    assert out["hoodie.metadata.enable"] == "true"
    assert out["hoodie.datasource.write.operation"] == "insert"
    assert out["x.y"] == "1"
    assert set(DEFAULT_WRITE_OPTIONS) <= set(out)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"hoodie.datasource.write.recordkey.field": "id"}, "hoodie.table.name is required"),
        ({"hoodie.table.name": "t"}, "recordkey.field is required"),
        ({**BASE, "hoodie.datasource.write.operation": "merge"}, "is not one of"),
        ({**BASE, "hoodie.datasource.write.precombine.field": "a,b"}, "takes one field"),
    ],
)
def test_write_option_errors(options: dict[str, str], match: str) -> None:
    """Missing or contradictory options fail before Spark is asked, naming the problem."""
    with pytest.raises(HudiError, match=match):
        write_options(options)


def test_cdc_format_needs_an_incremental_query() -> None:
    """The change feed is an incremental query; asking for it on a snapshot fails before reading."""
    with pytest.raises(HudiError, match="needs hoodie.datasource.query.type=incremental"):
        read_hudi_df(None, "/t", {"hoodie.datasource.query.incremental.format": "cdc"})  # type: ignore[arg-type]
    with pytest.raises(HudiError, match="latest_state or cdc"):
        read_hudi_df(None, "/t", {"hoodie.datasource.query.incremental.format": "json"})  # type: ignore[arg-type]


def test_record_keys_follow_hudis_key_generators() -> None:
    """One field: the value; several: ``f:v`` pairs, with Hudi's markers for null and empty."""
    one = HudiTableConfig(table_name="t", base_path="/x", record_key_fields=("a",))
    assert record_keys(pa.table({"a": [1, 22]}), one).to_pylist() == ["1", "22"]
    cfg = HudiTableConfig(table_name="t", base_path="/x", record_key_fields=("a", "b"))
    table = pa.table({"a": [1, 2], "b": [None, ""]})
    assert record_keys(table, cfg).to_pylist() == ["a:1,b:__null__", "a:2,b:__empty__"]
    with pytest.raises(HudiError, match="null or empty"):
        record_keys(pa.table({"a": [None, 1]}), one)


# ----------------------------------------------------------------------------- read errors


def test_only_a_writers_half_written_file_is_tried_again(tmp_path: Path) -> None:
    """The texts each reader gives for ``hoodie.properties`` or a commit file caught mid-write are
    transient; an absent ``hoodie.properties`` only where the table's ``.hoodie`` exists (a wrong
    local path fails at once); anything else is an error at once."""
    spark_empty = RuntimeError(
        "An error occurred while calling o436.load.\n"
        ": org.apache.hudi.exception.TableNotFoundException: "
        "Hoodie table not found in path Table does not exist"
    )
    absent = RuntimeError(f"Storage error: Object at location {tmp_path}/.hoodie/hoodie.properties not found")
    assert transient_read_error(spark_empty, str(tmp_path))
    trino_empty = RuntimeError(
        'TrinoQueryError(type=INTERNAL_ERROR, name=GENERIC_INTERNAL_ERROR, message="Hoodie table not '
        'found in path Table does not exist", query_id=20261204_055000_00003_abcde)'
    )
    assert transient_read_error(trino_empty, "")
    assert transient_read_error(RuntimeError("Config error: Config 'hoodie.table.name' not found"), "x")
    assert transient_read_error(RuntimeError("EOF while parsing a value at line 1 column 0"), "x")
    spark_commit_being_written = RuntimeError(  # as CI met it while the 0.14 streamer wrote
        "An error occurred while calling o2716.load.\n: org.apache.hudi.exception.HoodieIOException: "
        "Failed to fetch HoodieCommitMetadata for instant ([20261205030051178__20261205030055386__commit__"
        "COMPLETED])\nCaused by: java.io.IOException: Unable to read commit metadata for instant [...]\n"
        "Caused by: com.fasterxml.jackson.databind.exc.MismatchedInputException: No content to map "
        "due to end-of-input"
    )
    assert transient_read_error(spark_commit_being_written, "x")
    assert not transient_read_error(absent, str(tmp_path))
    (tmp_path / ".hoodie").mkdir()
    assert transient_read_error(absent, str(tmp_path))
    assert transient_read_error(absent, "s3a://lake/silver/date")
    missing = RuntimeError("TableNotFoundException: Hoodie table not found in path /x/.hoodie")
    assert not transient_read_error(missing, "/x")


def test_a_java_errors_message_names_its_cause_not_the_py4j_call() -> None:
    """``cause_line`` skips Py4J's ``An error occurred while calling ...`` line."""
    java = RuntimeError("An error occurred while calling o1.load.\n: org.X: the cause\n\tat org.Y")
    assert cause_line(java) == "org.X: the cause"
    assert cause_line(ValueError("plain\nsecond")) == "plain"
    assert cause_line(ValueError("")) == "ValueError"
    assert cause_line(ValueError("a" * 10), limit=3) == "aaa"
