"""A sliced Silver table (``min_key``): only the keys from ``min_key`` on are applied, every Bronze
file is still taken once, and a round with nothing in the slice still commits its checkpoint.

No database servers: Bronze files are written by the workbook's own Bronze writer from Connect
JSON events (support.bronze_events), Silver by the official Hudi writer on the
test session's Spark, read back with the official reader. Expected final states are stated per
test.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support.bronze_events import write_category_changes
from support.silver_tables import offline_params

from helpers.errors import ParamsError
from helpers.hudi.config import SOFT_DELETE_FIELD
from helpers.hudi.read import read_snapshot
from helpers.hudi.timeline import completed_instants
from helpers.params import SilverTableParams, WorkbookParams
from helpers.silver.ingest import ingest_table
from helpers.silver.tables import pending_bronze, table_config

pytestmark = pytest.mark.integration


@pytest.fixture
def params(tmp_path: Path) -> WorkbookParams:
    return offline_params(tmp_path)


def _table(name: str, **changes: Any) -> SilverTableParams:
    return SilverTableParams(name=name, source="ems", table="category", record_key=("catid",), **changes)


def _rows(params: WorkbookParams, table: SilverTableParams) -> dict[int, tuple[str, bool]]:
    """Key -> (name, flagged deleted) of every row Silver holds (soft mode keeps deleted rows)."""
    rows = read_snapshot(table_config(params, table).base_path).to_pylist()
    return {r["catid"]: (r["catname"], r.get(SOFT_DELETE_FIELD) in (True, "true")) for r in rows}


@pytest.mark.parametrize(
    ("table_type", "delete_mode"), [("COPY_ON_WRITE", "hard"), ("MERGE_ON_READ", "soft")]
)
def test_a_slice_holds_its_keys_only_and_takes_every_file_once(
    params: WorkbookParams, table_type: str, delete_mode: str
) -> None:
    """Keys below 100 never reach the slice, whatever happens to them; keys from 100 on get their
    inserts, updates and deletes as the whole table does. The first round holds no key of the
    slice: it still commits (an empty table) and takes its files, so none is read again."""
    sliced = _table("cat_slice", min_key=100, table_type=table_type, delete_mode=delete_mode)
    whole = _table("cat_whole", table_type=table_type, delete_mode=delete_mode)
    write_category_changes(params, [(1, 1, "a", "c"), (2, 2, "b", "c"), (3, 99, "c", "c")])

    first = ingest_table(params, sliced)

    assert (first.files, first.events) == (1, 3)
    assert first.instant is not None
    assert _rows(params, sliced) == {}
    assert pending_bronze(params, sliced)[0] == []

    write_category_changes(params, [(10, 100, "d", "c"), (11, 101, "e", "c"), (12, 1, "a2", "u")])
    write_category_changes(
        params, [(20, 100, "d2", "u"), (21, 101, "e", "d"), (22, 2, "b", "d"), (23, 5, "f", "c")]
    )
    second = ingest_table(params, sliced)
    ingest_table(params, whole)

    assert second.files == 2
    if delete_mode == "soft":
        assert _rows(params, sliced) == {100: ("d2", False), 101: ("e", True)}
        assert _rows(params, whole) == {
            1: ("a2", False),
            2: ("b", True),
            5: ("f", False),
            99: ("c", False),
            100: ("d2", False),
            101: ("e", True),
        }
    else:
        assert _rows(params, sliced) == {100: ("d2", False)}
        live = {1: ("a2", False), 5: ("f", False), 99: ("c", False), 100: ("d2", False)}
        assert _rows(params, whole) == live
    assert ingest_table(params, sliced).files == 0
    assert len(completed_instants(table_config(params, sliced).base_path)) == 2


def test_a_slice_needs_an_integer_key(params: WorkbookParams) -> None:
    """``min_key`` on a text key is refused when the round reads the key's type, naming the table,
    and nothing is committed; on a key of two columns it is refused when the parameters load."""
    write_category_changes(params, [(1, 1, "a", "c")])
    by_name = SilverTableParams(
        name="cat_by_name", source="ems", table="category", record_key=("catname",), min_key=5
    )
    with pytest.raises(ParamsError, match="cat_by_name by min_key: its key catname is string"):
        ingest_table(params, by_name)
    assert not Path(table_config(params, by_name).base_path, ".hoodie", "hoodie.properties").exists()
    with pytest.raises(ValueError, match="min_key slices by a record key of one column"):
        SilverTableParams(
            name="two", source="ems", table="category", record_key=("catid", "catname"), min_key=5
        )
