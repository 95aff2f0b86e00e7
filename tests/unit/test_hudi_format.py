"""Unit tests of the Hudi v6 byte formats, checked against the Spark-written fixtures."""

from __future__ import annotations

import base64
import glob
import json
import os
import zipfile
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers.hudi.basefile import HudiBloomFilter, bloom_filter_bytes, bloom_filter_count, read_bloom_filter
from helpers.hudi.config import HudiTableConfig
from helpers.hudi.format import (
    format_properties,
    java_escape,
    parse_log_file_name,
    parse_properties,
    partition_paths,
    record_keys,
    table_checksum,
)
from helpers.hudi.logfile import (
    BlockType,
    HeaderKey,
    decode_avro_records,
    decode_delete_keys,
    delete_block,
    encode_block,
    read_log_blocks,
    rollback_command_block,
)

FIXTURES = Path(os.environ.get("HUDI_FIXTURES", "/work/shared/fixtures/hudi-v6"))
pytestmark = pytest.mark.skipif(not FIXTURES.exists(), reason="Hudi v6 fixtures not available")


@pytest.fixture(scope="module")
def fixtures_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hudi_fixtures")
    for zpath in FIXTURES.glob("*.zip"):
        with zipfile.ZipFile(zpath) as zf:
            zf.extractall(root / zpath.stem)
    return root


def _tables(root: Path) -> list[Path]:
    return [
        Path(p).parent.parent
        for p in glob.glob(str(root / "*" / "*" / ".hoodie" / "hoodie.properties"))
        if "__MACOSX" not in p
    ]


def test_checksum_and_properties_roundtrip_on_every_fixture(fixtures_dir: Path) -> None:
    """Every fixture's checksum equals crc32("<db>.<table>"); our parser reads the Java escapes."""
    tables = _tables(fixtures_dir)
    assert len(tables) == 16
    for table in tables:
        props = parse_properties((table / ".hoodie" / "hoodie.properties").read_text("latin-1"))
        expected = table_checksum(props.get("hoodie.database.name", ""), props["hoodie.table.name"])
        assert int(props["hoodie.table.checksum"]) == expected
        json.loads(props["hoodie.table.create.schema"])  # un-escaped back to valid JSON
        again = parse_properties(format_properties(props))
        assert again == props


def test_java_escape_rules() -> None:
    assert java_escape('{"a":1}') == '{"a"\\:1}'
    assert java_escape("x=y#z!") == "x\\=y\\#z\\!"
    assert java_escape("é") == "\\u00E9"
    assert parse_properties("k=" + java_escape("a:b=c é \\ ") + "\n")["k"] == "a:b=c é \\ "
    assert table_checksum("default", "v6_trips_8i3d") == 3180720914 == zlib.crc32(b"default.v6_trips_8i3d")


def test_bloom_filters_match_every_fixture_base_file_bit_for_bit(fixtures_dir: Path) -> None:
    """Our DYNAMIC_V0 filter of a file's keys equals the one Java wrote into its footer."""
    checked = 0
    for path in glob.glob(str(fixtures_dir / "*" / "*" / "**" / "*.parquet"), recursive=True):
        if "__MACOSX" in path:
            continue
        pf = pq.ParquetFile(path)
        footer = pf.metadata.metadata or {}
        if b"org.apache.hudi.bloomfilter" not in footer:
            continue
        keys = pf.read(columns=["_hoodie_record_key"]).column(0)
        assert bloom_filter_bytes(keys) == base64.b64decode(footer[b"org.apache.hudi.bloomfilter"]), path
        checked += 1
    assert checked >= 30


def test_bloom_filter_parse_extend_and_probe_against_java_bytes(fixtures_dir: Path) -> None:
    """A Java-written filter parses and re-serializes to the same bytes; extending a filter of the
    first keys with the rest equals the filter built from all keys at once (so a merged file's
    extended filter is the one Java would build for that key order); every key is found and
    almost every absent key is not."""
    path = next(
        p
        for p in sorted(glob.glob(str(fixtures_dir / "*" / "*" / "**" / "*.parquet"), recursive=True))
        if "__MACOSX" not in p
        and b"org.apache.hudi.bloomfilter" in (pq.ParquetFile(p).metadata.metadata or {})
    )
    footer = pq.ParquetFile(path).metadata.metadata
    raw = base64.b64decode(footer[b"org.apache.hudi.bloomfilter"])
    parsed = read_bloom_filter(footer)
    assert parsed is not None and parsed.to_bytes() == raw
    assert bloom_filter_count(footer[b"org.apache.hudi.bloomfilter"]) == parsed.count
    keys = pa.array([f"key-{i:06d}" for i in range(130_000)])  # crosses both filter rows
    first = HudiBloomFilter.empty()
    first.add(keys.slice(0, 59_990))
    again = HudiBloomFilter.from_bytes(first.to_bytes())
    again.add(keys.slice(59_990))
    assert again.count == 130_000 and len(again.rows) == 2
    assert bloom_filter_count(base64.b64encode(again.to_bytes())) == 130_000
    assert bloom_filter_count(b"!!not base64") is None
    assert again.to_bytes() == bloom_filter_bytes(keys)
    assert again.might_contain(keys).all()
    absent = pa.array([f"other-{i}" for i in range(5_000)])
    assert again.might_contain(absent).sum() <= 5
    assert read_bloom_filter({}) is None
    assert read_bloom_filter({b"org.apache.hudi.bloomfilter": b"AAAA"}) is None  # corrupt: rebuild


def test_log_blocks_reencode_to_the_fixture_bytes(fixtures_dir: Path) -> None:
    """Re-framing every fixture log block (same header order) reproduces the file bytes exactly;
    our delete block content is byte-identical to Spark's."""
    logs = [
        p
        for p in glob.glob(str(fixtures_dir / "*" / "*" / "**" / ".*.log.*"), recursive=True)
        if "__MACOSX" not in p
    ]
    assert logs
    for path in logs:
        blocks = list(read_log_blocks(path))
        rebuilt = b"".join(encode_block(b.block_type, b.header, b.content, b.footer) for b in blocks)
        assert rebuilt == Path(path).read_bytes(), path
        for block in blocks:
            if block.block_type == BlockType.DELETE:
                keys = decode_delete_keys(block)
                mine = delete_block(
                    block.header[HeaderKey.INSTANT_TIME],
                    json.loads(block.header[HeaderKey.SCHEMA]),
                    [k for k, _ in keys],
                    [p for _, p in keys],
                )
                assert list(read_log_blocks_bytes(mine))[0].content == block.content
            if block.block_type == BlockType.AVRO_DATA:
                assert decode_avro_records(block)[0]["_hoodie_record_key"]


def read_log_blocks_bytes(data: bytes):  # type: ignore[no-untyped-def]
    import tempfile

    with tempfile.NamedTemporaryFile(delete=False) as handle:
        handle.write(data)
    try:
        return list(read_log_blocks(handle.name))
    finally:
        os.remove(handle.name)


def test_rollback_command_block_matches_fixture_size(fixtures_dir: Path) -> None:
    """The fixture's rollback block is 105 bytes; ours for the same instants is too."""
    (path,) = [
        p for p in glob.glob(str(fixtures_dir / "*rollback*" / "*" / ".*.log.2_*")) if "__MACOSX" not in p
    ]
    (block,) = read_log_blocks(path)
    mine = rollback_command_block(
        block.header[HeaderKey.INSTANT_TIME], block.header[HeaderKey.TARGET_INSTANT_TIME]
    )
    assert len(mine) == 105 == os.path.getsize(path)
    assert parse_log_file_name(os.path.basename(path)) is not None


def test_key_generator_formats_match_fixture_meta_columns(fixtures_dir: Path) -> None:
    """Record keys and partition paths we compute equal the meta columns Java wrote."""
    cases = {
        "sample_table__cow__v6_complexkeygen_hivestyle": (("id", "name"), ("byteField", "shortField"), True),
        "sample_table__cow__v6_simplekeygen_nonhivestyle": (("id",), ("byteField",), False),
        "sample_table__cow__v6_nonpartitioned": (("id",), (), False),
        "quickstart_trips_table__mor__avro__v6_trips_8i1u": (("uuid",), ("city",), True),
    }
    for name, (keys, parts, hive) in cases.items():
        cfg = HudiTableConfig(
            table_name="t",
            base_path="/x",
            record_key_fields=keys,
            partition_fields=parts,
            hive_style_partitioning=hive,
        )
        for path in glob.glob(str(fixtures_dir / name / "*" / "**" / "*.parquet"), recursive=True):
            if "__MACOSX" in path:
                continue
            table = pq.ParquetFile(path).read()
            assert record_keys(table, cfg).to_pylist() == table.column("_hoodie_record_key").to_pylist()
            assert (
                partition_paths(table, cfg).to_pylist() == table.column("_hoodie_partition_path").to_pylist()
            )


def test_composite_key_null_and_empty_parts() -> None:
    cfg = HudiTableConfig(
        table_name="t", base_path="/x", record_key_fields=("a", "b"), partition_fields=("p",)
    )
    table = pa.table({"a": [1, 2], "b": [None, ""], "p": ["x", None]})
    assert record_keys(table, cfg).to_pylist() == ["a:1,b:__null__", "a:2,b:__empty__"]
    assert partition_paths(table, cfg).to_pylist() == ["p=x", "p=__HIVE_DEFAULT_PARTITION__"]
