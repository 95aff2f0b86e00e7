"""Conformance scenarios (helpers.checks.conformance) on the shared running pipeline.

Expected final state for every scenario: each Silver variant (CoW/MoR x hard/soft) equals the
source table on keys and every column; soft-delete tables also hold every key deleted after it
was ingested, flagged ``__deleted=true``. Each comparison must also report a tampered copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.pipeline import Capture

from helpers.checks.conformance import (
    SCENARIOS,
    VARIANTS,
    failed_scenarios,
    run_scenarios,
    short_set,
)
from helpers.sources.connect import connect

pytestmark = pytest.mark.integration


def test_short_set_passes_on_both_engines_and_every_variant(capture: Capture, tmp_path: Path) -> None:
    """Items 1, 2, 3, 4, 8 and 13 (TRUNCATE) on PostgreSQL and MariaDB, in CoW/MoR x hard/soft:
    all equal to the source, and every comparison reports its tampered copy."""
    frame = run_scenarios(capture.stack.params, short=True, silver_root=tmp_path / "conformance")
    assert failed_scenarios(frame) == [], frame[frame["status"] == "FAILED"][
        ["scenario", "silver_table", "detail"]
    ].to_string()
    assert set(frame["scenario"]) == set(short_set())
    assert set(frame["item"]) == {1, 2, 3, 4, 8, 13}
    assert {SCENARIOS[n].engine for n in frame["scenario"]} == {"postgres", "mariadb"}
    for name, rows in frame.groupby("scenario"):
        assert set(zip(rows["table_type"], rows["delete_mode"], strict=True)) == set(VARIANTS), name
    assert (frame["status"] == "passed").all()
    assert (frame["negative_check"] == "detected").all()
    # the sale scenarios compare slices: the scenarios' own rows, not the loaded TICKIT sales
    sale = frame[frame["source"] == "mariadb ecomm.sale"]
    assert len(sale) and sale["silver_table"].str.startswith("c_sale_slice_").all()
    compared = sale["detail"].str.extract(r"equal: (\d+) source rows")[0].astype(int)
    assert compared.between(1, 100).all(), sale["detail"].tolist()


def test_resnapshot_after_a_divergence_on_both_engines(capture: Capture, tmp_path: Path) -> None:
    """Item 14: changes capture never saw (PostgreSQL: made while the schema was out of the
    publication; MariaDB: with sql_log_bin = 0), then a re-snapshot of the table through
    Debezium's signal table while another table's inserts flow: every variant equals the source
    row by row (the row deleted unseen is gone), and so do the inserted venues."""
    names = ["resnapshot_postgres", "resnapshot_mariadb"]
    frame = run_scenarios(capture.stack.params, names, silver_root=tmp_path / "conformance")
    assert failed_scenarios(frame) == [], frame[frame["status"] == "FAILED"][
        ["scenario", "silver_table", "detail"]
    ].to_string()
    assert set(frame["scenario"]) == set(names) and set(frame["item"]) == {14}
    assert set(frame["source"]) == {"postgres ems.category", "postgres ems.venue", "mariadb ecomm.date"}
    assert (frame["status"] == "passed").all() and (frame["negative_check"] == "detected").all()


def test_a_table_added_mid_stream_reaches_every_variant(capture: Capture, tmp_path: Path) -> None:
    """Item 15: a table created while capture runs and added to the parameters, changed during
    its incremental snapshot while venues are inserted: every variant of it and of ``venue``
    equals the source row by row."""
    frame = run_scenarios(capture.stack.params, ["add_table_postgres"], silver_root=tmp_path / "conformance")
    assert failed_scenarios(frame) == [], frame[frame["status"] == "FAILED"][
        ["scenario", "silver_table", "detail"]
    ].to_string()
    added = {s for s in frame["source"] if s.startswith("postgres ems.wb_added_")}
    assert len(added) == 1 and set(frame["source"]) == {"postgres ems.venue", *added}
    assert len(frame) == 2 * len(VARIANTS) and set(frame["item"]) == {15}
    assert (frame["status"] == "passed").all() and (frame["negative_check"] == "detected").all()


@pytest.mark.slow
def test_full_set(capture: Capture, tmp_path: Path) -> None:
    """Every scenario (items 1-9, 11 and 13-15; TOAST n/a on MariaDB) passes. Slow: fresh connectors."""
    frame = run_scenarios(capture.stack.params, silver_root=tmp_path / "conformance")
    assert failed_scenarios(frame) == [], frame[frame["status"] == "FAILED"][
        ["scenario", "silver_table", "detail"]
    ].to_string()
    assert set(frame["scenario"]) == set(SCENARIOS)
    assert set(frame.loc[frame["status"] == "n/a", "scenario"]) == {"toast_mariadb"}


def test_a_column_added_and_one_widened_reach_every_variant(capture: Capture, tmp_path: Path) -> None:
    """Item 6 on both engines: a column added and another widened in place while capture runs
    (PostgreSQL ``integer`` to ``bigint``, MariaDB ``SMALLINT`` to ``BIGINT``), a row given a value
    past the old range: every variant equals the source row by row, the wide values included."""
    names = ["add_column_postgres", "add_column_mariadb"]
    frame = run_scenarios(capture.stack.params, names, silver_root=tmp_path / "conformance")
    assert failed_scenarios(frame) == [], frame[frame["status"] == "FAILED"][
        ["scenario", "silver_table", "detail"]
    ].to_string()
    assert set(frame["source"]) == {"postgres ems.venue", "mariadb ecomm.date"} and len(frame) == 8
    assert (frame["status"] == "passed").all() and (frame["negative_check"] == "detected").all()
    params = capture.stack.params
    with connect(params, "ems") as c:
        row = c.execute("SELECT max(venueseats), pg_typeof(max(venueseats))::text FROM ems.venue").fetchone()
    assert row is not None and row[0] >= 5_000_000_000 and row[1] == "bigint"
    with connect(params, "ecomm") as c:
        cur = c.cursor()
        cur.execute(
            "SELECT max(week), (SELECT data_type FROM information_schema.columns WHERE"
            " table_schema = DATABASE() AND table_name = 'date' AND column_name = 'week') FROM `date`"
        )
        week = cur.fetchone()
    assert week is not None and week[0] == 70_000 and week[1] == "bigint"
