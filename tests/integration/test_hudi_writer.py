"""The Hudi v6 writer judged by the official reader (PyPI ``hudi``): values, not counts.

Every expected state is computed by a plain-Python model of the table; instants are always read
from the timeline.
"""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path
from typing import Any

import hudi
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.hudi.config import HudiTableConfig
from helpers.hudi.format import parse_properties
from helpers.hudi.logfile import BlockType, HeaderKey, read_log_blocks
from helpers.hudi.timeline import completed_instants
from helpers.hudi.writer import compact, write_arrow

pytestmark = pytest.mark.integration
FIXTURES = Path("/work/shared/fixtures/hudi-v6")
DATA_COLS = ["id", "city", "v", "f", "pos"]


def read(base: str, **opts: Any) -> list[dict[str, Any]]:
    """Rows of the table through the official reader, sorted by record key."""
    table = hudi.HudiTableBuilder.from_base_uri(base).build()
    options = hudi.HudiReadOptions()
    for key, value in opts.items():
        if key == "hudi_options":
            options = options.with_hudi_options(value)
        else:
            options = getattr(options, f"with_{key}")(value)
    batches = table.read(options)
    if not batches:
        return []
    rows = pa.Table.from_batches(batches).to_pylist()
    return sorted(rows, key=lambda r: str(r["_hoodie_record_key"]))


def read_table(base: str) -> pa.Table:
    """Snapshot through the official reader as one Arrow table sorted by record key."""
    table = hudi.HudiTableBuilder.from_base_uri(base).build()
    result = pa.Table.from_batches(table.read())
    return result.sort_by("_hoodie_record_key")


def project(rows: list[dict[str, Any]], cols: list[str]) -> list[dict[str, Any]]:
    return [{c: r.get(c) for c in cols} for r in rows]


def timeline(base: str) -> list[str]:
    table = hudi.HudiTableBuilder.from_base_uri(base).build()
    tl = table.get_timeline()
    return sorted({i.timestamp for i in tl.get_completed_commits() + tl.get_completed_deltacommits()})


def model_rows(model: dict[int, dict[str, Any]], cols: list[str] = DATA_COLS) -> list[dict[str, Any]]:
    return [{c: model[k].get(c) for c in cols} for k in sorted(model, key=str)]


def make_config(tmp_path: Path, table_type: str, **kw: Any) -> HudiTableConfig:
    defaults: dict[str, Any] = dict(
        table_name="t",
        base_path=str(tmp_path / "t"),
        table_type=table_type,
        record_key_fields=("id",),
        partition_fields=("city",),
        ordering_fields=("f", "pos"),
        inline_compaction_delta_commits=0,
        cleaner_commits_retained=0,
    )
    defaults.update(kw)
    return HudiTableConfig(**defaults)


def batch(rows: list[tuple[Any, ...]], deleted: list[bool] | None = None) -> pa.Table:
    cols = list(zip(*rows, strict=True))
    table = pa.table(
        {
            "id": pa.array(cols[0], pa.int64()),
            "city": pa.array(cols[1], pa.string()),
            "v": pa.array(cols[2], pa.string()),
            "f": pa.array(cols[3], pa.string()),
            "pos": pa.array(cols[4], pa.int64()),
        }
    )
    if deleted is not None:
        table = table.append_column("_hoodie_is_deleted", pa.array(deleted))
    return table


def apply(
    model: dict[int, dict[str, Any]], rows: list[tuple[Any, ...]], deleted: list[bool] | None = None
) -> set[int]:
    """Reference semantics: greatest (f, pos) per key wins, stale never overwrites, deletes remove."""
    deleted = deleted or [False] * len(rows)
    best: dict[int, tuple[tuple[Any, ...], bool, int]] = {}
    for i, (row, dele) in enumerate(zip(rows, deleted, strict=True)):
        order = (row[3], row[4], i)
        if row[0] not in best or order >= best[row[0]][0]:
            best[row[0]] = (order, dele, i)
    changed = set()
    for key, (order, dele, i) in best.items():
        stored = model.get(key)
        if stored is not None and (order[0], order[1]) < (stored["f"], stored["pos"]):
            continue
        if dele:
            if stored is not None:
                del model[key]
                changed.add(key)
        else:
            model[key] = dict(zip(DATA_COLS, rows[i], strict=True))
            changed.add(key)
    return changed


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_history_snapshot_as_of_incremental_and_read_optimized(tmp_path: Path, table_type: str) -> None:
    """Final state: ids 1,2,3,5 (3 moved to city b, 4 deleted, 6 deleted and re-inserted in one batch);
    every commit is readable as of its instant with the values the model had then."""
    cfg = make_config(tmp_path, table_type)
    model: dict[int, dict[str, Any]] = {}
    steps: list[tuple[list[tuple[Any, ...]], list[bool] | None]] = [
        (
            [
                (1, "a", "v1", "f1", 1),
                (2, "a", "v1", "f1", 2),
                (3, "a", "v1", "f1", 3),
                (4, "b", "v1", "f1", 4),
                (6, "b", "v1", "f1", 6),
            ],
            None,
        ),
        # several changes of key 1 in one batch, greatest (file, pos) wins; redelivered stale row for 2
        (
            [
                (1, "a", "v2", "f1", 10),
                (1, "a", "v3", "f2", 1),
                (1, "a", "v-old", "f1", 11),
                (2, "a", "stale", "f0", 99),
                (3, "b", "moved", "f2", 5),
                (5, "c", "new", "f2", 6),
            ],
            None,
        ),
        # delete 4; delete then re-insert 6 in the same batch; delete of an unknown key
        (
            [
                (4, "b", None, "f3", 1),
                (6, "b", None, "f3", 2),
                (6, "b", "again", "f3", 3),
                (99, "a", None, "f3", 1),
            ],
            [True, True, False, True],
        ),
    ]
    expected: dict[str, list[dict[str, Any]]] = {}
    changed_at: dict[str, set[int]] = {}
    for rows, deleted in steps:
        result = write_arrow(batch(rows, deleted), cfg, "upsert")
        changed_at[result.instant] = apply(model, rows, deleted)
        expected[result.instant] = model_rows(model)
    instants = timeline(cfg.base_path)
    assert instants == sorted(expected)
    assert project(read(cfg.base_path), DATA_COLS) == expected[instants[-1]]
    for instant in instants:
        assert project(read(cfg.base_path, as_of_timestamp=instant), DATA_COLS) == expected[instant], instant
    for start, end in zip(instants, instants[1:], strict=False):
        rows = read(
            cfg.base_path, query_type=hudi.HudiQueryType.Incremental, start_timestamp=start, end_timestamp=end
        )
        live = {k for k in changed_at[end] if any(r["id"] == k for r in expected[end])}
        assert sorted(r["id"] for r in rows) == sorted(live)
        assert all(r["_hoodie_commit_time"] == end for r in rows)
    # untouched rows keep their commit time
    final = {r["id"]: r["_hoodie_commit_time"] for r in read(cfg.base_path)}
    assert final[2] == instants[0]
    if table_type == "MERGE_ON_READ":
        ro = project(
            read(cfg.base_path, hudi_options={"hoodie.read.use.read_optimized.mode": "true"}), DATA_COLS
        )
        assert ro != expected[instants[-1]]  # logs not compacted yet
        compaction = compact(cfg)
        assert compaction is not None
        ro = project(
            read(cfg.base_path, hudi_options={"hoodie.read.use.read_optimized.mode": "true"}), DATA_COLS
        )
        assert ro == expected[instants[-1]]
        assert project(read(cfg.base_path), DATA_COLS) == expected[instants[-1]]
        for instant in instants:
            assert project(read(cfg.base_path, as_of_timestamp=instant), DATA_COLS) == expected[instant]
        _assert_log_blocks_well_formed(cfg.base_path)


def _assert_log_blocks_well_formed(base: str) -> None:
    """Strict framing check of every log file we wrote (the reader would silently skip bad blocks)."""
    logs = glob.glob(os.path.join(base, "**", ".*.log.*"), recursive=True)
    assert logs
    for path in logs:
        for block in read_log_blocks(path):
            assert HeaderKey.INSTANT_TIME in block.header
            if block.block_type in (BlockType.AVRO_DATA, BlockType.DELETE):
                assert HeaderKey.SCHEMA in block.header


def test_soft_delete_keeps_row_with_deleted_flag(tmp_path: Path) -> None:
    """Soft mode: key 1 stays with __deleted=true and its last values; key 2 has __deleted=false."""
    cfg = make_config(tmp_path, "MERGE_ON_READ", delete_mode="soft")
    write_arrow(batch([(1, "a", "x", "f1", 1), (2, "a", "y", "f1", 2)]), cfg, "upsert")
    write_arrow(batch([(1, "a", "x", "f1", 3)], [True]), cfg, "upsert")
    rows = read(cfg.base_path)
    assert [(r["id"], r["v"], r["__deleted"]) for r in rows] == [(1, "x", True), (2, "y", False)]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_soft_delete_by_key_alone_keeps_the_stored_values(tmp_path: Path, table_type: str) -> None:
    """Soft mode, ``delete`` with only the key (and partition) columns: the row stays whole, with
    its stored values and __deleted=true; a delete carrying its own values keeps those."""
    cfg = make_config(tmp_path, table_type, delete_mode="soft")
    write_arrow(
        batch([(1, "a", "x", "f1", 1), (2, "a", "y", "f1", 2), (3, "b", "z", "f1", 3)]), cfg, "upsert"
    )
    write_arrow(pa.table({"id": pa.array([1], pa.int64()), "city": ["a"]}), cfg, "delete")
    write_arrow(batch([(3, "b", "given", "f2", 3)], [True]), cfg, "upsert")
    rows = read(cfg.base_path)
    assert [(r["id"], r["v"], r["f"], r["pos"], r["__deleted"]) for r in rows] == [
        (1, "x", "f1", 1, True),
        (2, "y", "f1", 2, False),
        (3, "given", "f2", 3, True),
    ]


def test_missing_partition_fields_is_the_silent_zero_rows_mode(tmp_path: Path) -> None:
    """Our hoodie.properties names the partition fields; without them the reader returns 0 rows."""
    cfg = make_config(tmp_path, "COPY_ON_WRITE")
    write_arrow(batch([(1, "a", "x", "f1", 1), (2, "b", "y", "f1", 2)]), cfg, "upsert")
    props_path = Path(cfg.base_path) / ".hoodie" / "hoodie.properties"
    text = props_path.read_text("latin-1")
    assert parse_properties(text)["hoodie.table.partition.fields"] == "city"
    assert [r["v"] for r in read(cfg.base_path)] == ["x", "y"]
    props_path.write_text(
        "\n".join(line for line in text.splitlines() if "partition.fields" not in line), "latin-1"
    )
    assert read(cfg.base_path) == []


def test_block_without_instant_time_is_silently_ignored_so_we_always_write_it(tmp_path: Path) -> None:
    """A corrupted copy of our own log (lengths broken) loses the update silently in the reader;
    the intact file we wrote shows it: the writer's framing is what makes the value visible."""
    cfg = make_config(tmp_path, "MERGE_ON_READ")
    write_arrow(batch([(1, "a", "x", "f1", 1)]), cfg, "upsert")
    write_arrow(batch([(1, "a", "updated", "f1", 2)]), cfg, "upsert")
    assert [r["v"] for r in read(cfg.base_path)] == ["updated"]
    (log,) = glob.glob(os.path.join(cfg.base_path, "**", ".*.log.*"), recursive=True)
    data = bytearray(Path(log).read_bytes())
    data[-1] ^= 0xFF  # break the trailing total-size field
    Path(log).write_bytes(bytes(data))
    assert [r["v"] for r in read(cfg.base_path)] == ["x"]


def _unzip(name: str, tmp_path: Path) -> str:
    with zipfile.ZipFile(FIXTURES / f"{name}.zip") as zf:
        zf.extractall(tmp_path / name)
    (props,) = [
        p
        for p in glob.glob(str(tmp_path / name / "*" / ".hoodie" / "hoodie.properties"))
        if "__MACOSX" not in p
    ]
    return str(Path(props).parent.parent)


FIXTURE_CASES = [
    ("sample_table__cow__v6_nonpartitioned", "COPY_ON_WRITE", ("id",), (), False, ("longField",)),
    (
        "sample_table__cow__v6_complexkeygen_hivestyle",
        "COPY_ON_WRITE",
        ("id", "name"),
        ("byteField", "shortField"),
        True,
        ("longField",),
    ),
    (
        "sample_table__cow__v6_simplekeygen_nonhivestyle",
        "COPY_ON_WRITE",
        ("id",),
        ("byteField",),
        False,
        ("longField",),
    ),
    (
        "quickstart_trips_table__mor__avro__v6_trips_8i1u",
        "MERGE_ON_READ",
        ("uuid",),
        ("city",),
        True,
        ("ts",),
    ),
    (
        "quickstart_trips_table__mor__avro__v6_trips_8i3d",
        "MERGE_ON_READ",
        ("uuid",),
        ("city",),
        True,
        ("ts",),
    ),
    ("sample_table__mor__parquet__v6_nonpartitioned", "MERGE_ON_READ", ("id",), (), False, ("longField",)),
    (
        "sample_table__mor__parquet__v6_simplekeygen_nonhivestyle",
        "MERGE_ON_READ",
        ("id",),
        ("byteField",),
        False,
        ("longField",),
    ),
    (
        "sample_table__mor__parquet__v6_nonpartitioned_rollback",
        "MERGE_ON_READ",
        ("id",),
        (),
        False,
        ("longField",),
    ),
]


@pytest.mark.parametrize("case", FIXTURE_CASES, ids=[c[0] for c in FIXTURE_CASES])
def test_writer_adds_commits_to_java_fixture_tables(tmp_path: Path, case: tuple[Any, ...]) -> None:
    """Upsert one row (new values, greater ordering), insert a copy under a new key, delete another;
    the official reader shows exactly that on top of the Java-written state (MoR parquet-log
    fixtures then hold mixed Parquet and Avro blocks), before and after compaction."""
    name, table_type, keys, parts, hive, ordering = case
    base = _unzip(name, tmp_path)
    props = parse_properties((Path(base) / ".hoodie" / "hoodie.properties").read_text("latin-1"))
    cfg = HudiTableConfig(
        table_name=props["hoodie.table.name"],
        base_path=base,
        table_type=table_type,
        record_key_fields=keys,
        partition_fields=parts,
        hive_style_partitioning=hive,
        ordering_fields=ordering,
        inline_compaction_delta_commits=0,
        cleaner_commits_retained=0,
    )
    before_tbl = read_table(base)
    before = before_tbl.to_pylist()
    data_cols = [c for c in before_tbl.column_names if not c.startswith("_hoodie_")]
    data = before_tbl.select(data_cols)
    first, second = before[0], before[-1]
    value_col = "rider" if "rider" in data_cols else "name" if keys == ("id",) else "isActive"

    def with_values(row: pa.Table, **values: Any) -> pa.Table:
        for col, value in values.items():
            row = row.set_column(
                row.column_names.index(col), col, pa.array([value], row.schema.field(col).type)
            )
        return row

    new_value = "changed" if value_col != "isActive" else (not first[value_col])
    changed_tbl = with_values(data.slice(0, 1), **{value_col: new_value, ordering[0]: first[ordering[0]] + 1})
    new_key_col = "uuid" if keys == ("uuid",) else "id"
    inserted_tbl = with_values(
        changed_tbl, **{new_key_col: "00000000-new-key" if keys == ("uuid",) else 1000}
    )
    changed, inserted = changed_tbl.to_pylist()[0], inserted_tbl.to_pylist()[0]
    upsert = pa.concat_tables([changed_tbl, inserted_tbl])
    result = write_arrow(upsert, cfg, "upsert")
    assert (result.num_updates, result.num_inserts) == (1, 1)
    delete = data.slice(len(before) - 1, 1)
    write_arrow(delete, cfg, "delete")
    after = read(base)
    key_of = lambda r: r["_hoodie_record_key"]  # noqa: E731
    expected = {key_of(r): {c: r[c] for c in data_cols} for r in before}
    expected[key_of(first)] = changed
    new_key = (
        "00000000-new-key"
        if keys == ("uuid",)
        else ("1000" if keys == ("id",) else f"id:1000,name:{inserted['name']}")
    )
    expected[new_key] = inserted
    del expected[key_of(second)]
    assert {key_of(r): {c: r[c] for c in data_cols} for r in after} == expected
    if table_type == "MERGE_ON_READ":
        assert compact(cfg) is not None
        assert {key_of(r): {c: r[c] for c in data_cols} for r in read(base)} == expected
        ro = read(base, hudi_options={"hoodie.read.use.read_optimized.mode": "true"})
        assert {key_of(r): {c: r[c] for c in data_cols} for r in ro} == expected


KILL_SCRIPT = textwrap.dedent(
    """
    import os, sys, time, pyarrow as pa
    import helpers.hudi.writer as w
    from helpers.hudi.config import HudiTableConfig
    real = w.write_file_group
    def slow(task, rows, loaded=None):
        stat = real(task, rows, loaded)
        open(sys.argv[2], "w").close()   # one data file is on disk: signal the parent, then hang
        time.sleep(60)
        return stat
    w.write_file_group = slow
    cfg = HudiTableConfig(
        table_name="t", base_path=sys.argv[1], table_type=sys.argv[3], record_key_fields=("id",),
        partition_fields=("city",), ordering_fields=("f", "pos"), inline_compaction_delta_commits=0,
    )
    rows = {"id": [1, 2, 7], "city": ["a", "b", "c"], "v": ["killed"] * 3, "f": ["f9"] * 3, "pos": [9, 9, 9]}
    w.write_arrow(pa.table(rows), cfg, "upsert")
    """
)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_kill_9_mid_commit_then_next_write_rolls_back(tmp_path: Path, table_type: str) -> None:
    """A writer killed after writing a data file leaves nothing visible; the next write rolls the
    instant back (rollback instant recorded, files removed) and the table ends as the model says."""
    cfg = make_config(tmp_path, table_type)
    write_arrow(batch([(1, "a", "v1", "f1", 1), (2, "b", "v1", "f1", 1)]), cfg, "upsert")
    before = project(read(cfg.base_path), DATA_COLS)
    ready = tmp_path / "ready"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, cfg.base_path, str(ready), table_type],
        cwd=str(Path(__file__).resolve().parents[2]),
    )
    deadline = time.time() + 60
    while not ready.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert ready.exists(), "writer subprocess never reached the data-file write"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert project(read(cfg.base_path), DATA_COLS) == before  # no visible partial commit
    result = write_arrow(batch([(2, "b", "v2", "f2", 1), (3, "a", "v2", "f2", 1)]), cfg, "upsert")
    assert len(result.rolled_back) == 1
    assert [i.action for i in completed_instants(cfg.base_path, ["rollback"])] == ["rollback"]
    rows = project(read(cfg.base_path), DATA_COLS)
    assert rows == [
        {"id": 1, "city": "a", "v": "v1", "f": "f1", "pos": 1},
        {"id": 2, "city": "b", "v": "v2", "f": "f2", "pos": 1},
        {"id": 3, "city": "a", "v": "v2", "f": "f2", "pos": 1},
    ]
    leftovers = [
        p
        for p in glob.glob(os.path.join(cfg.base_path, "**", "*"), recursive=True)
        if result.rolled_back[0] in p
    ]
    assert leftovers == []


def test_cleaner_keeps_time_travel_within_retention(tmp_path: Path) -> None:
    """With 2 commits retained, old slices are deleted, and as-of reads of the retained commits still work."""
    cfg = make_config(tmp_path, "COPY_ON_WRITE", cleaner_commits_retained=2, partition_fields=())
    states = {}
    model: dict[int, dict[str, Any]] = {}
    for i in range(5):
        rows = [(1, "a", f"v{i}", "f1", i), (2, "a", f"w{i}", "f1", i)]
        r = write_arrow(batch(rows), cfg, "upsert")
        apply(model, rows)
        states[r.instant] = model_rows(model)
    parquet = glob.glob(os.path.join(cfg.base_path, "*.parquet"))
    assert len(parquet) <= 3
    assert completed_instants(cfg.base_path, ["clean"])
    for instant in timeline(cfg.base_path)[-2:]:
        assert project(read(cfg.base_path, as_of_timestamp=instant), DATA_COLS) == states[instant]


ops = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "delete"]),
        st.lists(
            st.tuples(st.integers(0, 12), st.sampled_from(["a", "b"]), st.integers(0, 5), st.booleans()),
            min_size=1,
            max_size=8,
        ),
    ),
    min_size=1,
    max_size=5,
)


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=ops)
def test_property_random_upserts_and_deletes_match_dict_model(
    tmp_path_factory: pytest.TempPathFactory, table_type: str, sequence: list[Any]
) -> None:
    """Any sequence of upserts/deletes (stale redeliveries, partition moves) ends equal to the model."""
    base = tmp_path_factory.mktemp("prop")
    cfg = make_config(base, table_type, inline_compaction_delta_commits=3, cleaner_commits_retained=3)
    model: dict[int, dict[str, Any]] = {}
    for step, (op, changes) in enumerate(sequence):
        rows = [(k, city, f"s{step}", "f", pos) for k, city, pos, _ in changes]
        deleted = [op == "delete" or d for _, _, _, d in changes]
        write_arrow(batch(rows, deleted), cfg, "upsert")
        apply(model, rows, deleted)
    assert project(read(cfg.base_path), DATA_COLS) == model_rows(model)


@pytest.mark.parametrize("path", ["spark", "driver"])
def test_spark_write_dataframe_upsert_and_bulk_insert(spark: Any, tmp_path: Path, path: str) -> None:  # noqa: ANN401
    """Both paths of a Spark DataFrame write (Spark tasks; the driver for small inputs): bulk insert,
    then an upsert with duplicates/stale rows and a delete; the reader shows the model."""
    from helpers.hudi.spark_writer import write_dataframe

    limit = 0 if path == "spark" else 1 << 30
    for table_type in ("COPY_ON_WRITE", "MERGE_ON_READ"):
        cfg = make_config(tmp_path / table_type, table_type)
        model: dict[int, dict[str, Any]] = {}
        first = [(i, "ab"[i % 2], "v0", "f1", i) for i in range(50)]
        # From Arrow, so Spark knows the size (rows from Python have no size estimate).
        result = write_dataframe(
            spark.createDataFrame(batch(first)), cfg, "bulk_insert", driver_max_bytes=limit
        )
        assert result.executed_by == path
        apply(model, first)
        second = [
            (1, "a", "x", "f2", 0),
            (1, "a", "y", "f2", 5),
            (2, "a", "stale", "f0", 9),
            (3, "a", "moved", "f2", 0),
            (60, "b", "new", "f2", 1),
            (4, "a", None, "f3", 0),
        ]
        deleted = [False] * 5 + [True]
        df = spark.createDataFrame(batch(second, deleted))
        result = write_dataframe(df, cfg, "upsert", driver_max_bytes=limit)
        assert result.executed_by == path
        # keys 1 and 3 move from partition b to a (delete + insert), 60 is new, 4 is deleted
        assert (result.num_inserts, result.num_updates, result.num_deletes) == (3, 0, 3)
        apply(model, second, deleted)
        assert project(read(cfg.base_path), DATA_COLS) == model_rows(model)


def test_inspection_helpers_report_counts_slices_and_size(tmp_path: Path) -> None:
    """Timeline rows carry the per-commit insert/update/delete counts the writes produced."""
    from helpers.hudi import table_file_groups, table_size, table_timeline

    cfg = make_config(tmp_path, "MERGE_ON_READ")
    write_arrow(
        batch([(1, "a", "x", "f1", 1), (2, "a", "y", "f1", 1), (3, "b", "z", "f1", 1)]), cfg, "upsert"
    )
    write_arrow(
        batch(
            [(1, "a", "x2", "f1", 2), (4, "b", "n", "f1", 2), (3, "b", None, "f1", 3)], [False, False, True]
        ),
        cfg,
        "upsert",
    )
    compact(cfg)
    tl = table_timeline(cfg.base_path)
    commits = tl[tl["action"] == "deltacommit"]
    assert commits[["inserts", "updates", "deletes"]].values.tolist() == [[3, 0, 0], [1, 1, 1]]
    assert tl.iloc[-1]["action"] == "commit" and tl.iloc[-1]["operation"] == "COMPACT"
    groups = table_file_groups(cfg.base_path)
    assert set(groups["partition"]) == {"city=a", "city=b"}
    assert groups[groups["is_latest"]]["log_files"].sum() == 0
    size = table_size(cfg.base_path).iloc[0]
    assert size["data_bytes"] > size["latest_slice_bytes"] > 0


def _check_base_file_footers(base: str, *, fresh: bool) -> int:
    """Assert the footer keys Java writers rely on (format notes C.3) on every latest base file;
    returns how many files were checked."""
    import json

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from helpers.hudi.basefile import bloom_filter_bytes, read_bloom_filter
    from helpers.hudi.fsview import load_file_groups

    checked = 0
    for group in load_file_groups(base):
        sl = group.latest
        if not sl.base_file:
            continue
        pf = pq.ParquetFile(os.path.join(base, sl.rel(sl.base_file)))
        footer = pf.metadata.metadata or {}
        keys = pf.read(columns=["_hoodie_record_key"]).column(0)
        schema = json.loads(footer[b"parquet.avro.schema"])
        assert [f["name"] for f in schema["fields"][:5]] == [
            "_hoodie_commit_time",
            "_hoodie_commit_seqno",
            "_hoodie_record_key",
            "_hoodie_partition_path",
            "_hoodie_file_name",
        ]
        assert footer[b"writer.model.name"] == b"avro"
        bounds = pc.min_max(keys)
        assert footer[b"hoodie_min_record_key"].decode() == bounds["min"].as_py()
        assert footer[b"hoodie_max_record_key"].decode() == bounds["max"].as_py()
        assert footer[b"hoodie_bloom_filter_type_code"] == b"DYNAMIC_V0"
        bloom = read_bloom_filter(footer)
        assert bloom is not None
        assert bloom.might_contain(keys).all(), "a stored key is missing from its file's bloom filter"
        assert bloom.count <= 1.25 * len(keys)  # stale (deleted) keys stay bounded
        if fresh:
            assert bloom.to_bytes() == bloom_filter_bytes(keys)
        checked += 1
    return checked


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_base_files_carry_the_footer_keys_java_writers_need(tmp_path: Path, table_type: str) -> None:
    """Schema, min/max record keys and a bloom filter holding every stored key are in the footer of
    every base file: written fresh, rewritten by a CoW merge (filter extended with the inserts,
    deletes kept as bounded false positives) and produced by MoR compaction."""
    cfg = make_config(tmp_path, table_type)
    rows = [(i, "ab"[i % 2], f"v{i}", "f1", 0) for i in range(400)]
    write_arrow(batch(rows), cfg, "bulk_insert")
    assert _check_base_file_footers(cfg.base_path, fresh=True) == 2
    changes = [(i, "ab"[i % 2], "upd", "f2", 0) for i in range(0, 400, 7)]
    changes += [(i, "ab"[i % 2], "new", "f2", 0) for i in range(400, 460)]
    write_arrow(batch(changes), cfg, "upsert")
    write_arrow(batch([(i, "ab"[i % 2], None, "f3", 0) for i in range(1, 60, 3)]), cfg, "delete")
    if table_type == "MERGE_ON_READ":
        assert compact(cfg) is not None
    assert _check_base_file_footers(cfg.base_path, fresh=False) >= 2
    model: dict[int, dict[str, Any]] = {}
    apply(model, rows)
    apply(model, changes)
    apply(model, [(i, "ab"[i % 2], None, "f3", 0) for i in range(1, 60, 3)], [True] * 20)
    assert project(read(cfg.base_path), DATA_COLS) == model_rows(model)


def test_new_file_groups_share_inserts_evenly(tmp_path: Path) -> None:
    """Inserts beyond one file's worth are spread evenly over the new groups (as Java's
    UpsertPartitioner weighs its buckets), never one full group plus a small remainder."""
    from helpers.hudi.writer import plan_insert_buckets

    cfg = make_config(tmp_path, "COPY_ON_WRITE", target_file_size_bytes=1000 * 100)
    buckets = plan_insert_buckets({"a": 2_501, "b": 999}, [], cfg, record_size=100)
    by_partition = {p: [b.capacity for b in buckets if b.partition_path == p] for p in ("a", "b")}
    assert by_partition == {"a": [834, 834, 833], "b": [999]}


def test_key_range_pruning_reads_and_rewrites_only_files_that_can_hold_the_keys(tmp_path: Path) -> None:
    """Like Hudi's bloom index, the local CoW writer looks keys up only in files whose footer
    min/max record keys bracket them: other files are neither read nor rewritten, and a key
    outside every range is an insert."""
    from helpers.hudi.fsview import load_file_groups
    from helpers.hudi.writer import candidate_groups

    cfg = make_config(
        tmp_path,
        "COPY_ON_WRITE",
        partition_fields=(),
        target_file_size_bytes=100 * 1024,
        small_file_limit_bytes=0,  # inserts go to a new group, so exactly one file is merged
    )
    rows = [(i, "x", "v0", "f1", 0) for i in range(1000, 1300)]  # 4 digits: string order = numeric
    write_arrow(batch(rows), cfg, "bulk_insert")
    groups = load_file_groups(cfg.base_path)
    assert len(groups) == 3

    def hits(keys: list[str]) -> int:
        return len(candidate_groups(cfg, groups, pa.array(keys)))

    assert (hits(["1150", "1160"]), hits(["1050", "1250"]), hits(["5000"]), hits([])) == (1, 2, 0, 0)
    before = {g.file_id: g.latest.base_file for g in groups}
    changes = [(1150, "x", "upd", "f2", 0), (5000, "x", "new", "f2", 0)]
    result = write_arrow(batch(changes), cfg, "upsert")
    assert (result.num_updates, result.num_inserts) == (1, 1)
    after = {g.file_id: g.latest.base_file for g in load_file_groups(cfg.base_path)}
    rewritten = {fid for fid in before if after[fid] != before[fid]}
    assert len(rewritten) == 1  # the 1100-1199 file; the insert made a new group
    assert len(after) == 4
    model: dict[int, dict[str, Any]] = {}
    apply(model, rows)
    apply(model, changes)
    assert project(read(cfg.base_path), DATA_COLS) == model_rows(model)
