"""Unit tests of Hudi option handling: read options, write options, and the engine choice.

No Spark and no Hudi jar: the official branch is checked through the exact option dict handed to
``df.write.format("hudi")`` (captured by a fake DataFrame writer).
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from helpers.errors import HudiError
from helpers.hudi import api
from helpers.hudi.api import (
    HudiWriteOptions,
    official_write_options,
    parse_write_options,
    to_table_config,
    write_hudi,
)
from helpers.hudi.read import EARLIEST_INSTANT, HudiReadSpec, parse_read_options
from helpers.spark import AVRO_FORMAT_CLASS, avro_format_name, hudi_datasource_available

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


def test_write_minimal_options_map_onto_table_config() -> None:
    """Defaults follow Hudi's datasource: CoW, upsert, plain (non-hive) partitioning."""
    parsed = parse_write_options({**BASE, "hoodie.datasource.write.partitionpath.field": "dateid"})
    config = to_table_config(parsed, "/tmp/sales")
    assert config.table_name == "sales"
    assert config.base_path == "/tmp/sales"
    assert config.table_type == "COPY_ON_WRITE"
    assert config.record_key_fields == ("salesid",)
    assert config.ordering_fields == ("saletime",)
    assert config.partition_fields == ("dateid",)
    assert config.hive_style_partitioning is False
    assert config.delete_mode == "hard"
    assert parsed.operation == "upsert"
    assert parsed.keygen_class == "org.apache.hudi.keygen.SimpleKeyGenerator"


def test_write_full_options_map_onto_table_config() -> None:
    """Composite key, several partition and ordering fields, MoR, tuning options, soft deletes."""
    parsed = parse_write_options(
        {
            "hoodie.table.name": "orders",
            "hoodie.datasource.write.recordkey.field": "id, name",
            "hoodie.datasource.write.precombine.field": "_binlog_file,_binlog_pos,_binlog_row",
            "hoodie.datasource.write.partitionpath.field": "region,day",
            "hoodie.datasource.write.table.type": "merge_on_read",
            "hoodie.datasource.write.operation": "BULK_INSERT",
            "hoodie.datasource.write.hive_style_partitioning": "true",
            "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
            "hoodie.parquet.max.file.size": "1000000",
            "hoodie.parquet.small.file.limit": "500000",
            "hoodie.compact.inline.max.delta.commits": "3",
            "hoodie.cleaner.commits.retained": "4",
            "hoodie.database.name": "ems",
            "hoodie.upsert.shuffle.parallelism": "8",
            "workbook.hudi.delete.mode": "soft",
        }
    )
    config = to_table_config(parsed, "/t")
    assert config.record_key_fields == ("id", "name")
    assert config.ordering_fields == ("_binlog_file", "_binlog_pos", "_binlog_row")
    assert config.partition_fields == ("region", "day")
    assert config.table_type == "MERGE_ON_READ"
    assert config.hive_style_partitioning is True
    assert config.delete_mode == "soft"
    assert (config.target_file_size_bytes, config.small_file_limit_bytes) == (1_000_000, 500_000)
    assert (config.inline_compaction_delta_commits, config.cleaner_commits_retained) == (3, 4)
    assert config.database_name == "ems"
    assert parsed.operation == "bulk_insert"
    assert config.keygen_class == parsed.keygen_class


def test_write_keygen_short_name_and_type_are_accepted() -> None:
    """``keygenerator.type`` and unqualified class names resolve to the same class."""
    a = parse_write_options({**BASE, "hoodie.datasource.write.keygenerator.type": "NON_PARTITION"})
    b = parse_write_options(
        {**BASE, "hoodie.datasource.write.keygenerator.class": "NonpartitionedKeyGenerator"}
    )
    assert a.keygen_class == b.keygen_class == "org.apache.hudi.keygen.NonpartitionedKeyGenerator"


def test_write_disabling_inline_compaction_and_cleaning() -> None:
    """``hoodie.compact.inline=false`` / ``hoodie.clean.automatic=false`` map to 0."""
    config = to_table_config(
        parse_write_options(
            {
                **BASE,
                "hoodie.datasource.write.table.type": "MERGE_ON_READ",
                "hoodie.compact.inline": "false",
                "hoodie.clean.automatic": "false",
            }
        ),
        "/t",
    )
    assert (config.inline_compaction_delta_commits, config.cleaner_commits_retained) == (0, 0)


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"hoodie.datasource.write.recordkey.field": ""}, "recordkey.field is required"),
        ({"hoodie.table.name": ""}, "hoodie.table.name is required"),
        ({"hoodie.datasource.write.table.name": "other"}, "contradicts"),
        ({"hoodie.datasource.write.operation": "insert_overwrite"}, "is not one of"),
        ({"hoodie.datasource.write.table.type": "MOR"}, "must be COPY_ON_WRITE or MERGE_ON_READ"),
        ({"hoodie.datasource.write.hive_style_partitioning": "yes"}, "must be 'true' or 'false'"),
        ({"hoodie.datasource.write.recordkeyfield": "x"}, r"unknown option\(s\)"),
        ({"hoodie.deltastreamer.source.dfs.root": "/x"}, r"unknown option\(s\)"),
        (
            {
                "hoodie.datasource.write.recordkey.field": "id,name",
                "hoodie.datasource.write.partitionpath.field": "p",
                "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
            },
            "contradicts record key",
        ),
        (
            {
                "hoodie.datasource.write.partitionpath.field": "p",
                "hoodie.datasource.write.keygenerator.class": KEYGEN + "NonpartitionedKeyGenerator",
            },
            "contradicts record key",
        ),
        (
            {
                "hoodie.datasource.write.partitionpath.field": "ts",
                "hoodie.datasource.write.keygenerator.class": KEYGEN + "TimestampBasedKeyGenerator",
            },
            "timestamp-based",
        ),
        (
            {
                "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.ComplexKeyGenerator",
                "hoodie.datasource.write.keygenerator.type": "SIMPLE",
            },
            "contradicts",
        ),
        ({"hoodie.datasource.write.drop.partition.columns": "true"}, "not supported"),
        ({"hoodie.datasource.write.payload.class": "com.acme.MyPayload"}, "is not one of"),
        ({"workbook.hudi.delete.mode": "archive"}, "must be 'hard' or 'soft'"),
        ({"hoodie.parquet.max.file.size": "big"}, "must be an integer"),
        ({"workbook.hudi.write.driver.max.bytes": "-1"}, "must not be negative"),
        ({"hoodie.compact.inline.max.delta.commits": "3"}, "MERGE_ON_READ tables only"),
        ({"hoodie.clean.automatic": "false", "hoodie.cleaner.commits.retained": "3"}, "contradicts"),
    ],
)
def test_write_option_errors(extra: dict[str, str], match: str) -> None:
    """Missing, unknown, invalid and contradictory options fail before anything is written."""
    with pytest.raises(HudiError, match=match) as info:
        parse_write_options({**BASE, **extra})
    assert str(info.value).startswith("Failed to parse Hudi write options: ")


def test_metadata_table_is_refused_on_the_workbook_branch() -> None:
    """The workbook writer keeps no metadata table, so asking for one is an error there."""
    parsed = parse_write_options({**BASE, "hoodie.metadata.enable": "true"})
    with pytest.raises(HudiError, match="metadata table"):
        to_table_config(parsed, "/t")


# ----------------------------------------------------------------------------- official branch


def test_official_options_exact() -> None:
    """The dict for ``format("hudi")``: given options, normalised core values, derived keygen,
    metadata table off and the ordering-respecting payload (both only when not given)."""
    given = {
        **BASE,
        "hoodie.datasource.write.partitionpath.field": "dateid",
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.datasource.write.operation": "UPSERT",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.hive_sync.enable": "true",
        "hoodie.datasource.hive_sync.mode": "hms",
        "hoodie.datasource.hive_sync.database": "tickit",
        "hoodie.datasource.hive_sync.table": "sales",
        "hoodie.datasource.hive_sync.partition_fields": "dateid",
        "hoodie.meta.sync.client.tool.class": "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool",
        "hoodie.upsert.shuffle.parallelism": "8",
        "workbook.hudi.delete.mode": "hard",
        "workbook.hudi.write.driver.max.bytes": "0",
    }
    assert official_write_options(parse_write_options(given)) == {
        "hoodie.table.name": "sales",
        "hoodie.datasource.write.recordkey.field": "salesid",
        "hoodie.datasource.write.precombine.field": "saletime",
        "hoodie.datasource.write.partitionpath.field": "dateid",
        "hoodie.datasource.write.table.type": "MERGE_ON_READ",
        "hoodie.datasource.write.operation": "upsert",
        "hoodie.datasource.write.hive_style_partitioning": "true",
        "hoodie.datasource.write.keygenerator.class": "org.apache.hudi.keygen.SimpleKeyGenerator",
        "hoodie.datasource.write.payload.class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
        "hoodie.metadata.enable": "false",
        "hoodie.datasource.hive_sync.enable": "true",
        "hoodie.datasource.hive_sync.mode": "hms",
        "hoodie.datasource.hive_sync.database": "tickit",
        "hoodie.datasource.hive_sync.table": "sales",
        "hoodie.datasource.hive_sync.partition_fields": "dateid",
        "hoodie.meta.sync.client.tool.class": "org.apache.hudi.aws.sync.AwsGlueCatalogSyncTool",
        "hoodie.upsert.shuffle.parallelism": "8",
    }


def test_official_options_keep_user_choices() -> None:
    """A given payload class or metadata setting is not overridden; no precombine, no payload."""
    given = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.metadata.enable": "true",
    }
    out = official_write_options(parse_write_options(given))
    assert out["hoodie.metadata.enable"] == "true"
    assert "hoodie.datasource.write.payload.class" not in out
    assert "hoodie.datasource.write.precombine.field" not in out
    assert out["hoodie.datasource.write.partitionpath.field"] == ""
    assert out["hoodie.datasource.write.keygenerator.class"].endswith("NonpartitionedKeyGenerator")


def test_official_options_refuse_several_precombine_fields() -> None:
    """Hudi 0.14/0.15 takes one precombine field; several are a clear error on that branch only."""
    parsed = parse_write_options({**BASE, "hoodie.datasource.write.precombine.field": "file,pos"})
    assert to_table_config(parsed, "/t").ordering_fields == ("file", "pos")
    with pytest.raises(HudiError, match="one precombine field"):
        official_write_options(parsed)


class _FakeWriter:
    def __init__(self, calls: list[tuple[str, Any]]) -> None:
        self.calls = calls

    def format(self, name: str) -> _FakeWriter:
        self.calls.append(("format", name))
        return self

    def options(self, **opts: str) -> _FakeWriter:
        self.calls.append(("options", opts))
        return self

    def mode(self, mode: str) -> _FakeWriter:
        self.calls.append(("mode", mode))
        return self

    def save(self, path: str) -> None:
        self.calls.append(("save", path))


class _FakeDataFrame:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.sparkSession = object()

    @property
    def write(self) -> _FakeWriter:
        return _FakeWriter(self.calls)


def test_write_hudi_official_branch(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the Hudi classes on the classpath, the DataFrame goes to ``format("hudi")`` in append
    mode with exactly :func:`official_write_options`, and the workbook writer is not called."""
    monkeypatch.setattr("helpers.spark.hudi_datasource_available", lambda spark: True)
    fake_writer = types.ModuleType("helpers.hudi.spark_writer")
    fake_writer.write_dataframe = lambda *a, **k: pytest.fail("workbook writer must not run")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "helpers.hudi.spark_writer", fake_writer)
    df = _FakeDataFrame()
    options = {**BASE, "hoodie.datasource.write.operation": "delete"}
    result = write_hudi(df, options, "s3://bucket/sales")  # type: ignore[arg-type]
    expected = official_write_options(parse_write_options(options))
    assert df.calls == [
        ("format", "hudi"),
        ("options", expected),
        ("mode", "append"),
        ("save", "s3://bucket/sales"),
    ]
    assert result.engine == "official"
    assert result.options == expected
    assert result.operation == "delete"


def test_write_hudi_workbook_branch(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Without the Hudi classes, the workbook writer gets the mapped config and the operation;
    sync options are reported as skipped (and logged), not silently dropped."""
    monkeypatch.setattr("helpers.spark.hudi_datasource_available", lambda spark: False)
    seen: list[tuple[Any, ...]] = []
    fake_writer = types.ModuleType("helpers.hudi.spark_writer")
    fake_writer.write_dataframe = lambda df, config, operation, driver_max_bytes, extra_metadata: (
        seen.append((df, config, operation, driver_max_bytes)) or "commit"
    )  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "helpers.hudi.spark_writer", fake_writer)
    df = _FakeDataFrame()
    options = {
        **BASE,
        "hoodie.datasource.write.operation": "insert",
        "hoodie.datasource.hive_sync.enable": "true",
        "workbook.hudi.write.driver.max.bytes": "1000",
    }
    result = write_hudi(df, options, "/tmp/sales")  # type: ignore[arg-type]
    assert df.calls == []
    assert seen[0][3] == 1000
    assert len(seen) == 1
    assert seen[0][0] is df
    assert seen[0][1] == to_table_config(parse_write_options(options), "/tmp/sales")
    assert seen[0][2] == "insert"
    assert result.engine == "workbook"
    assert result.commit == "commit"
    assert result.sync_skipped == ("hoodie.datasource.hive_sync.enable",)
    assert "catalog sync options are ignored" in caplog.text


def test_write_hudi_arrow_and_pandas_input_need_the_workbook_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow/pandas input goes to ``write_arrow`` (no Spark session asked for); forcing the
    official datasource with it is an error naming the fix."""
    import pandas as pd
    import pyarrow as pa

    seen: list[tuple[Any, ...]] = []
    monkeypatch.setattr(
        "helpers.hudi.writer.write_arrow",
        lambda table, config, operation, extra_metadata: seen.append((table, config, operation)) or "commit",
    )
    table = pa.table({"salesid": [1], "saletime": [5]})
    result = write_hudi(table, BASE, "/tmp/sales")
    assert (result.engine, result.commit, seen[0][0], seen[0][2]) == ("workbook", "commit", table, "upsert")
    write_hudi(pd.DataFrame({"salesid": [2], "saletime": [6]}), BASE, "/tmp/sales")
    assert seen[1][0].to_pylist() == [{"salesid": 2, "saletime": 6}]
    with pytest.raises(HudiError, match="writes Spark DataFrames"):
        write_hudi(table, BASE, "/tmp/sales", engine="official")


def test_write_hudi_validates_before_choosing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Bad options fail even before the engine is looked at."""
    monkeypatch.setattr("helpers.spark.hudi_datasource_available", lambda spark: pytest.fail("too late"))
    with pytest.raises(HudiError):
        write_hudi(_FakeDataFrame(), {"hoodie.table.name": "x"}, "/t")  # type: ignore[arg-type]


def test_parsed_options_are_frozen() -> None:
    """The validated options cannot be changed after validation."""
    parsed = parse_write_options(BASE)
    assert isinstance(parsed, HudiWriteOptions)
    with pytest.raises(AttributeError):
        parsed.operation = "delete"  # type: ignore[misc]


# ----------------------------------------------------------------------------- class detection


class _Jvm:
    """Just enough of a py4j JVM view for ``Class.forName``."""

    def __init__(self, known: set[str]) -> None:
        self.known = known
        outer = self

        class _Class:
            @staticmethod
            def forName(name: str, init: bool, loader: object) -> str:
                if name not in outer.known:
                    raise RuntimeError(f"java.lang.ClassNotFoundException: {name}")
                return name

        class _Thread:
            @staticmethod
            def currentThread() -> Any:
                return types.SimpleNamespace(getContextClassLoader=lambda: "loader")

        self.java = types.SimpleNamespace(lang=types.SimpleNamespace(Class=_Class, Thread=_Thread))


def _spark_with(jvm: Any) -> Any:
    return types.SimpleNamespace(sparkContext=types.SimpleNamespace(_jvm=jvm))


def test_hudi_datasource_detection() -> None:
    """True only when ``org.apache.hudi.DefaultSource`` loads; no JVM (Spark Connect) is False."""
    assert hudi_datasource_available(_spark_with(_Jvm({"org.apache.hudi.DefaultSource"})))
    assert not hudi_datasource_available(_spark_with(_Jvm(set())))
    assert not hudi_datasource_available(_spark_with(None))
    assert api.choose_write_engine(_spark_with(_Jvm({"org.apache.hudi.DefaultSource"}))) == "official"
    assert api.choose_write_engine(_spark_with(_Jvm(set()))) == "workbook"


def test_avro_format_falls_back_to_the_class_name() -> None:
    """Without a JVM that resolves the short name, the fully qualified Avro format is used."""
    assert avro_format_name(_spark_with(None)) == AVRO_FORMAT_CLASS


def test_commit_metadata_options_follow_the_commitmeta_prefix() -> None:
    base = {
        "hoodie.table.name": "t",
        "hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.precombine.field": "ts",
    }
    parsed = parse_write_options(
        {**base, "hoodie.datasource.write.commitmeta.key.prefix": "job.", "job.files": "[1]", "job.x": "y"}
    )
    assert parsed.commit_metadata == (("job.files", "[1]"), ("job.x", "y"))
    official = official_write_options(parsed)
    assert (
        official["job.files"] == "[1]" and official["hoodie.datasource.write.commitmeta.key.prefix"] == "job."
    )
    assert parse_write_options({**base, "_note": "kept"}).commit_metadata == (("_note", "kept"),)
    with pytest.raises(HudiError, match="unknown option"):
        parse_write_options({**base, "job.files": "[1]"})  # no prefix given: Hudi's default is "_"
    with pytest.raises(HudiError, match="outside hoodie"):
        parse_write_options({**base, "hoodie.datasource.write.commitmeta.key.prefix": "hoodie."})
