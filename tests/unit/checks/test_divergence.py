"""The status's check of Silver against the source, without servers: the position it is judged
at, and the record ``./workbook status`` shows (``helpers.checks.divergence``). The check itself
runs on the real stack in conformance item 14 (``expect_check``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pandas as pd
import pytest

from helpers.checks.divergence import (
    COLUMNS,
    DIFFERS,
    EQUAL,
    last_checks,
    record_checks,
    repair_command,
    selected_tables,
    took_after,
)
from helpers.errors import ReconcileError
from helpers.params import load_params
from helpers.silver.prepare import sortable_position
from helpers.sources.positions import SourcePosition


def test_a_source_position_sorts_as_the_events_text_does() -> None:
    """``_cdc_position`` pads PostgreSQL's LSN to 20 digits, and MySQL's binlog file number to 10
    and position to 20 (then the row): the position's own text sorts the same way."""
    pg = SourcePosition("postgres", lsn=35724432)
    assert sortable_position(pg) == "00000000000035724432"
    assert took_after("00000000000035724432", pg)  # a change at the position is after the snapshot
    assert not took_after("00000000000035724431", pg)
    my = SourcePosition("mysql", file="mariadb-bin.000003", pos=150276)
    assert sortable_position(my) == "0000000003.00000000000000150276"
    # a snapshot read carries the snapshot's own position: it is not a change after it
    assert not took_after("0000000003.00000000000000150276.0000000007", my)
    assert not took_after("0000000003.00000000000000150275.0000000000", my)
    assert took_after("0000000003.00000000000000150277.0000000000", my)
    assert took_after("0000000004.00000000000000000004.0000000000", my)  # the next binlog file
    assert not took_after(None, my)


def _frame(**rows: dict[str, object]) -> pd.DataFrame:
    base = {c: None for c in COLUMNS}
    return pd.DataFrame([{**base, "table": name, **row} for name, row in rows.items()], columns=COLUMNS)


def test_the_newest_check_of_each_table_is_kept_and_shown_with_its_age(tmp_path: Path) -> None:
    params = load_params("ci", overrides={"state_dir": str(tmp_path / "st")})
    assert last_checks(params).empty  # never checked: no row
    then = time.time() - 30
    record_checks(
        params,
        _frame(
            sale={"result": EQUAL, "source_rows": 10, "silver_rows": 10, "checked_at": then},
            category={"result": EQUAL, "source_rows": 11, "silver_rows": 11, "checked_at": then},
        ),
    )
    fix = repair_command("category")
    assert fix == "./workbook resnapshot category"
    record_checks(
        params,
        _frame(category={"result": DIFFERS, "source_rows": 11, "silver_rows": 16, "fix": fix,
                         "checked_at": time.time(), "checked_by": "digests"}),
    )  # fmt: skip
    shown = last_checks(params).set_index("table")
    assert list(shown.index) == ["sale", "category"]  # the order of silver.tables
    assert shown.loc["category", "result"] == DIFFERS and shown.loc["category", "fix"] == fix
    assert shown.loc["category", "silver_rows"] == 16 and shown.loc["category", "checked_by"] == "digests"
    assert shown.loc["category", "checked_s_ago"] < 5 <= 29 < shown.loc["sale", "checked_s_ago"]
    stored = json.loads((tmp_path / "st" / "checks" / "divergence.json").read_text())
    assert set(stored) == {"sale", "category"} and not list((tmp_path / "st" / "checks").glob(".*tmp"))


def test_an_unreadable_record_is_named(tmp_path: Path) -> None:
    params = load_params("ci", overrides={"state_dir": str(tmp_path / "st")})
    (tmp_path / "st" / "checks").mkdir(parents=True)
    (tmp_path / "st" / "checks" / "divergence.json").write_text("{torn")
    with pytest.raises(ReconcileError, match="divergence.json"):
        last_checks(params)


def test_a_sliced_table_is_refused_by_the_whole_table_checks_naming_it() -> None:
    """A table with ``min_key`` holds part of its source: comparing it with the whole source would
    report every row below the slice as missing, so the check says why it will not."""
    params = load_params("ci")
    sale = next(t for t in params.silver.tables if t.name == "sale")
    sliced = params.model_copy(
        update={
            "silver": params.silver.model_copy(update={"tables": (sale.model_copy(update={"min_key": 10}),)})
        }
    )
    with pytest.raises(
        ReconcileError, match=r"reconcile: Silver table sale is a slice of ecomm.sale \(keys from 10"
    ):
        selected_tables(sliced, None, "reconcile")
    assert [t.name for t in selected_tables(params, ["sale"])] == ["sale"]
