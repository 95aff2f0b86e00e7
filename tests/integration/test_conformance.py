"""Conformance scenarios (helpers.checks.conformance) on the shared running pipeline.

Expected final state for every scenario: each Silver variant (CoW/MoR x hard/soft) equals the
source table on keys and every column; soft-delete tables also hold every key deleted after it
was ingested, flagged ``__deleted=true``. Each comparison must also report a tampered copy.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.pipeline import Capture

from helpers.checks.compare import compare_rows
from helpers.checks.conformance import (
    SCENARIOS,
    VARIANTS,
    failed_scenarios,
    run_scenarios,
    short_set,
    tamper_rows,
)

pytestmark = pytest.mark.integration


def test_short_set_passes_on_both_engines_and_every_variant(capture: Capture, tmp_path: Path) -> None:
    """Items 1, 2, 3, 4, 8 on PostgreSQL and MariaDB, in CoW/MoR x hard/soft: all equal to the
    source, and every comparison reports its tampered copy."""
    frame = run_scenarios(capture.stack.params, short=True, silver_root=tmp_path / "conformance")
    assert failed_scenarios(frame) == [], frame[frame["status"] == "FAILED"][
        ["scenario", "silver_table", "detail"]
    ].to_string()
    assert set(frame["scenario"]) == set(short_set())
    assert set(frame["item"]) == {1, 2, 3, 4, 8}
    assert {SCENARIOS[n].engine for n in frame["scenario"]} == {"postgres", "mariadb"}
    for name, rows in frame.groupby("scenario"):
        assert set(zip(rows["table_type"], rows["delete_mode"], strict=True)) == set(VARIANTS), name
    assert (frame["status"] == "passed").all()
    assert (frame["negative_check"] == "detected").all()


def test_comparison_reports_each_kind_of_difference() -> None:
    """compare_rows names a changed value, a missing and an extra key, a duplicate, a wrong
    partition, and in soft mode an un-flagged deleted key; tamper_rows produces a copy it reports."""
    source = [{"id": 1, "v": "a", "p": 1}, {"id": 2, "v": "b", "p": 2}]
    good = [{**r, "_hoodie_partition_path": f"p={r['p']}"} for r in source]
    assert compare_rows(source, good, ["id"], partition=["p"]) == []
    assert "differ" in compare_rows(source, [good[0], {**good[1], "v": "x"}], ["id"])[0]
    assert "missing" in compare_rows(source, good[:1], ["id"])[0]
    assert "not in the source" in compare_rows(source[:1], good, ["id"])[0]
    assert "more than once" in compare_rows(source, [*good, good[1]], ["id"])[0]
    assert (
        "another partition"
        in compare_rows(
            source, [good[0], {**good[1], "_hoodie_partition_path": "p=1"}], ["id"], partition=["p"]
        )[0]
    )
    soft = [*({**r, "__deleted": False} for r in good), {"id": 3, "v": "c", "p": 1, "__deleted": True}]
    assert compare_rows(source, soft, ["id"], delete_mode="soft", deleted_keys=[(3,)]) == []
    assert compare_rows(source, soft[:2], ["id"], delete_mode="soft", deleted_keys=[(3,)])
    for deleted, mode in (([(3,)], "soft"), ([(3,)], "hard"), ([], "hard")):
        rows = soft if mode == "soft" else good
        tampered = tamper_rows(rows, ["id"], [(2,)], deleted, mode)
        assert compare_rows(
            source, tampered, ["id"], delete_mode=mode, deleted_keys=deleted if mode == "soft" else []
        )
        assert rows == (soft if mode == "soft" else good)  # the input is untouched


@pytest.mark.slow
def test_full_set(capture: Capture, tmp_path: Path) -> None:
    """Every scenario (items 1-9 and 11; TOAST n/a on MariaDB) passes. Slow: fresh connectors."""
    frame = run_scenarios(capture.stack.params, silver_root=tmp_path / "conformance")
    assert failed_scenarios(frame) == [], frame[frame["status"] == "FAILED"][
        ["scenario", "silver_table", "detail"]
    ].to_string()
    assert set(frame["scenario"]) == set(SCENARIOS)
    assert set(frame.loc[frame["status"] == "n/a", "scenario"]) == {"toast_mariadb"}
