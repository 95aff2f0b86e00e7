"""The read path against real Hudi v6 tables written by the official Java writer.

Every fixture zip of ``/work/shared/fixtures/hudi-v6`` is read through :mod:`helpers.hudi.read`
and through the ``hudi_rs`` Spark data source, for snapshot, as of the first instant, and
incremental after the first instant. Expected figures come from the fixtures' README (read with
``hudi`` 0.5.0); values are compared between the two paths and with the official reader called
directly, not only row counts. Instants are read from each table's timeline.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from helpers.errors import HudiError
from helpers.hudi.read import (
    AS_OF_INSTANT,
    BEGIN_INSTANT,
    END_INSTANT,
    QUERY_TYPE,
    read_hudi,
    read_incremental,
    read_snapshot,
)

pytestmark = pytest.mark.integration

FIXTURES = Path(os.environ.get("HUDI_V6_FIXTURES", "/work/shared/fixtures/hudi-v6"))
ZIPS = sorted(p.name for p in FIXTURES.glob("*.zip"))

#: README figures: (snapshot rows, rows as of the first instant, incremental rows after it).
README_FIGURES: dict[str, tuple[int, int, int]] = {
    "sample_table__cow__v6_nonpartitioned.zip": (4, 3, 2),
    "sample_table__cow__v6_complexkeygen_hivestyle.zip": (4, 3, 2),
    "quickstart_trips_table__mor__avro__v6_trips_8i1u.zip": (8, 8, 1),
    "quickstart_trips_table__mor__avro__v6_trips_8i3d.zip": (5, 8, 0),
}


@pytest.fixture(scope="session")
def tables(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Unzip every fixture once; map zip name -> table base path (the dir holding ``.hoodie``)."""
    if not ZIPS:
        pytest.skip(f"no fixture zips in {FIXTURES}")
    root = tmp_path_factory.mktemp("hudi-v6")
    out: dict[str, str] = {}
    for name in ZIPS:
        target = root / name.removesuffix(".zip")
        with zipfile.ZipFile(FIXTURES / name) as archive:
            archive.extractall(target)
        bases = [p.parent for p in target.rglob(".hoodie") if "__MACOSX" not in p.parts]
        assert len(bases) == 1, f"{name}: expected one table, found {bases}"
        out[name] = str(bases[0])
    return out


def _instants(base: str) -> list[str]:
    from hudi import HudiTableBuilder

    timeline = HudiTableBuilder.from_base_uri(base).build().get_timeline()
    completed = (
        timeline.get_completed_commits()
        + timeline.get_completed_deltacommits()
        + timeline.get_completed_replacecommits()
    )
    return sorted(i.timestamp for i in completed)


def _official(base: str, **read_options: Any) -> list[dict[str, Any]]:
    """Rows from the official reader called directly (no helpers code)."""
    from hudi import HudiQueryType, HudiReadOptions, HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(base).build()
    opts = HudiReadOptions()
    if "as_of" in read_options:
        opts = opts.with_as_of_timestamp(read_options["as_of"])
    if "start" in read_options:
        opts = opts.with_query_type(HudiQueryType.Incremental).with_start_timestamp(read_options["start"])
    if read_options.get("read_optimized"):
        opts = opts.with_hudi_option("hoodie.read.use.read_optimized.mode", "true")
    rows: list[dict[str, Any]] = []
    for batch in table.read(opts):
        rows.extend(batch.to_pylist())
    return _sorted(rows)


def _sort_key(row: dict[str, Any]) -> tuple[str, str]:
    return (str(row.get("_hoodie_record_key", "")), repr(sorted((k, repr(v)) for k, v in row.items())))


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=_sort_key)


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return _sorted(table.to_pylist())


def _spark_rows(spark: Any, base: str, options: dict[str, str]) -> tuple[pa.Schema, list[dict[str, Any]]]:
    from helpers.hudi.spark_source import read_hudi_df

    table = read_hudi_df(spark, base, options).toArrow()
    return table.schema, _rows(table)


def _modes(base: str) -> Iterator[tuple[str, dict[str, str]]]:
    instants = _instants(base)
    yield "snapshot", {}
    if instants:
        yield "as_of_first", {AS_OF_INSTANT: instants[0]}
        yield "incremental_after_first", {QUERY_TYPE: "incremental", BEGIN_INSTANT: instants[0]}
        yield "read_optimized", {QUERY_TYPE: "read_optimized"}


@pytest.mark.parametrize("zip_name", ZIPS)
def test_read_paths_agree_with_official_reader_and_readme(
    zip_name: str, tables: dict[str, str], spark: Any
) -> None:
    """For each query: helpers.read == official reader == Spark data source, value by value;
    the README's snapshot / as-of-first / incremental figures hold where it lists them."""
    base = tables[zip_name]
    instants = _instants(base)
    counts: dict[str, int] = {}
    for mode, options in _modes(base):
        ours = read_hudi(base, options)
        official_kwargs: dict[str, Any] = {}
        if AS_OF_INSTANT in options:
            official_kwargs["as_of"] = options[AS_OF_INSTANT]
        if BEGIN_INSTANT in options:
            official_kwargs["start"] = options[BEGIN_INSTANT]
        if options.get(QUERY_TYPE) == "read_optimized":
            official_kwargs["read_optimized"] = True
        assert _rows(ours) == _official(base, **official_kwargs), f"{zip_name} {mode}: helpers vs official"
        spark_schema, spark_rows = _spark_rows(spark, base, options)
        assert spark_schema.names == ours.schema.names, f"{zip_name} {mode}: column order"
        assert spark_rows == _rows(ours), f"{zip_name} {mode}: Spark data source vs helpers"
        counts[mode] = ours.num_rows
    if not instants:
        assert counts == {"snapshot": 0}, "an empty table reads as 0 rows with its schema"
        assert "id" in read_snapshot(base).schema.names
        return
    if zip_name in README_FIGURES:
        assert (
            counts["snapshot"],
            counts["as_of_first"],
            counts["incremental_after_first"],
        ) == README_FIGURES[zip_name]


@pytest.mark.parametrize(
    "zip_name",
    [
        "quickstart_trips_table__mor__avro__v6_trips_8i1u.zip",
        "quickstart_trips_table__mor__avro__v6_trips_8i3d.zip",
    ],
)
def test_read_optimized_ignores_log_files(zip_name: str, tables: dict[str, str], spark: Any) -> None:
    """MoR: read-optimized sees base files only. 8i1u: the record updated in a log file keeps its
    old fare and first commit time in RO, the new ones in snapshot. 8i3d: RO still has all 8
    records, snapshot only the 5 not deleted by the delete block; both paths agree."""
    base = tables[zip_name]
    first, last = _instants(base)[0], _instants(base)[-1]
    snap = {r["uuid"]: r for r in read_snapshot(base).to_pylist()}
    ro = {r["uuid"]: r for r in read_snapshot(base, read_optimized=True).to_pylist()}
    _, spark_ro = _spark_rows(spark, base, {QUERY_TYPE: "read_optimized"})
    assert {r["uuid"]: r for r in spark_ro} == ro
    assert len(ro) == 8
    assert {r["_hoodie_commit_time"] for r in ro.values()} == {first}
    if zip_name.endswith("8i1u.zip"):
        updated = [k for k, r in snap.items() if r["_hoodie_commit_time"] == last]
        assert len(updated) == 1
        key = updated[0]
        assert snap[key]["fare"] != ro[key]["fare"]
        assert {k: r for k, r in snap.items() if k != key} == {k: r for k, r in ro.items() if k != key}
    else:
        assert len(snap) == 5
        assert set(snap) < set(ro)
        assert all(snap[k] == ro[k] for k in snap)


def test_incremental_bounds_and_time_inputs(tables: dict[str, str], spark: Any) -> None:
    """Three-commit table: (first, second] holds only rows committed at the second instant;
    begin is exclusive and end inclusive; ISO and datetime inputs denote the same instants."""
    from helpers.instants import instant_to_datetime

    base = tables["sample_table__cow__v6_simplekeygen_nonhivestyle_overwritetable.zip"]
    first, second, third = _instants(base)
    middle = read_incremental(base, first, second)
    assert middle.num_rows > 0
    assert set(middle.column("_hoodie_commit_time").to_pylist()) == {second}
    assert read_incremental(base, second, second).num_rows == 0
    everything = read_incremental(base, "000")
    assert set(everything.column("_hoodie_commit_time").to_pylist()) <= {first, second, third}
    as_datetime = read_incremental(base, instant_to_datetime(first), instant_to_datetime(second).isoformat())
    assert _rows(as_datetime) == _rows(middle)
    _, spark_rows = _spark_rows(
        spark, base, {QUERY_TYPE: "incremental", BEGIN_INSTANT: first, END_INSTANT: second}
    )
    assert spark_rows == _rows(middle)


def test_time_travel_between_instants_and_before_the_first(tables: dict[str, str]) -> None:
    """An as-of time between two commits sees the first; before the first commit, nothing."""
    from helpers.instants import instant_to_datetime

    base = tables["sample_table__cow__v6_nonpartitioned.zip"]
    first, second = _instants(base)
    between = instant_to_datetime(first) + (instant_to_datetime(second) - instant_to_datetime(first)) / 2
    assert _rows(read_snapshot(base, as_of=between)) == _rows(read_snapshot(base, as_of=first))
    assert read_snapshot(base, as_of="2000-01-01").num_rows == 0


def test_columns_and_filters(tables: dict[str, str]) -> None:
    """Projection keeps the requested order; filters are applied row by row by the reader."""
    base = tables["quickstart_trips_table__mor__avro__v6_trips_8i1u.zip"]
    everything = read_snapshot(base).to_pylist()
    chennai = read_snapshot(base, columns=["fare", "uuid"], filters=[("city", "=", "chennai")])
    assert chennai.schema.names == ["fare", "uuid"]
    assert _sorted(chennai.to_pylist()) == _sorted(
        [{"fare": r["fare"], "uuid": r["uuid"]} for r in everything if r["city"] == "chennai"]
    )
    with pytest.raises(HudiError, match="unknown column"):
        read_snapshot(base, columns=["nope"])


def test_spark_partitions_follow_file_slices(tables: dict[str, str], spark: Any) -> None:
    """A tiny split size gives one Spark partition per file slice, with the same rows."""
    from helpers.hudi.spark_source import read_hudi_df

    base = tables["sample_table__cow__v6_timebasedkeygen_nonhivestyle.zip"]
    from hudi import HudiTableBuilder

    n_slices = len(HudiTableBuilder.from_base_uri(base).build().get_file_slices())
    split = read_hudi_df(spark, base, {"hudi_rs.split.max.bytes": "1"})
    whole = read_hudi_df(spark, base, {})
    assert split.rdd.getNumPartitions() == n_slices > 1
    assert whole.rdd.getNumPartitions() == 1
    assert _rows(split.toArrow()) == _rows(whole.toArrow())
    assert split.filter("_hoodie_partition_path like '2023/04/0%'").count() == whole.count()


def test_errors_name_the_table_path(tmp_path: Path, spark: Any) -> None:
    """A path without a table fails in both paths with a message naming the path."""
    from helpers.hudi.spark_source import read_hudi_df

    missing = str(tmp_path / "no_table")
    with pytest.raises(HudiError, match=f"Failed to open Hudi table {missing}"):
        read_snapshot(missing)
    with pytest.raises(Exception, match="no_table"):
        read_hudi_df(spark, missing, {}).count()
    with pytest.raises(HudiError, match="unknown option"):
        read_hudi_df(spark, missing, {"as.of": "2025"})


def test_the_official_datasource_is_not_used_here(spark: Any) -> None:
    """No Hudi jar on this machine: the hudi_rs data source is the one reading."""
    from helpers.spark import hudi_datasource_available

    assert hudi_datasource_available(spark) is False


@pytest.mark.parametrize(
    ("zip_name", "condition", "expected_slices"),
    [
        ("sample_table__cow__v6_simplekeygen_nonhivestyle.zip", "byteField = 10", 1),
        ("sample_table__cow__v6_complexkeygen_hivestyle.zip", "byteField >= 20", 2),
        ("sample_table__mor__parquet__v6_simplekeygen_nonhivestyle.zip", "byteField in (10, 30)", 2),
        ("quickstart_trips_table__mor__avro__v6_trips_8i1u.zip", "city = 'chennai'", 1),
    ],
)
def test_partition_filters_prune_slices(
    zip_name: str, condition: str, expected_slices: int, tables: dict[str, str], spark: Any
) -> None:
    """Filters on partition columns prune file slices at planning (one Spark partition per
    slice with a 1-byte split size) and the rows equal a filter applied after a full read."""
    from helpers.hudi.spark_source import read_hudi_df

    base = tables[zip_name]
    pruned = read_hudi_df(spark, base, {"hudi_rs.split.max.bytes": "1"}).filter(condition)
    full = read_hudi_df(spark, base, {}).toArrow().to_pandas().query(condition.replace(" = ", " == "))
    assert pruned.rdd.getNumPartitions() == expected_slices
    got = pruned.toArrow().to_pandas()
    assert sorted(got["_hoodie_record_key"]) == sorted(full["_hoodie_record_key"])
    assert len(got) > 0


def test_filters_that_cannot_prune_still_filter(tables: dict[str, str], spark: Any) -> None:
    """A data-column filter and a timestamp-keygen table are not pruned, but Spark filters rows."""
    from helpers.hudi.spark_source import read_hudi_df

    base = tables["sample_table__cow__v6_timebasedkeygen_nonhivestyle.zip"]
    df = read_hudi_df(spark, base, {"hudi_rs.split.max.bytes": "1"}).filter("byteField = 10")
    expected = [r for r in read_snapshot(base).to_pylist() if r["byteField"] == 10]
    assert df.rdd.getNumPartitions() == 4
    assert sorted(r["_hoodie_record_key"] for r in df.collect()) == sorted(
        r["_hoodie_record_key"] for r in expected
    )
