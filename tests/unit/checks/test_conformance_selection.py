"""Which conformance scenarios notebook 07 runs: ``conformance.scenarios`` by name, else the set
``conformance.short`` chooses; and a check of theirs that must hold on a state run before."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from helpers.bronze.events import TRUNCATE_OP, UNAVAILABLE_VALUE, BronzeEvent, event_from_json, marker_event
from helpers.bronze.replay import replay_arrow
from helpers.bronze.writer import BronzeWriter
from helpers.checks.conformance import SCENARIOS, run_scenarios, scenario_groups, short_set
from helpers.checks.conformance.drivers import check_tombstones
from helpers.checks.conformance.model import (
    SLICE_FROM,
    ScenarioContext,
    bronze_differences,
    in_slice,
    variants,
)
from helpers.errors import ParamsError
from helpers.params import load_params
from helpers.sources.edge_cases.session import CATEGORY, SALE, SALE_BY_QTY
from helpers.sources.sample.tickit_tables import expected_row_counts


def _category_change(topic: str, key: int | None, op: str, deleted: str) -> BronzeEvent:
    """A Debezium-shaped change event of ``ems.category`` (key, operation, delete flag)."""
    schema = {
        "type": "struct",
        "fields": [
            {"field": "catid", "type": "int16", "optional": True},
            {"field": "__op", "type": "string", "optional": True},
            {"field": "__lsn", "type": "int64", "optional": True},
            {"field": "__source_ts_ms", "type": "int64", "optional": True},
            {"field": "__deleted", "type": "string", "optional": True},
        ],
    }
    payload = {"catid": key, "__op": op, "__lsn": 10, "__source_ts_ms": 1, "__deleted": deleted}
    event = event_from_json(topic, json.dumps({"schema": schema, "payload": payload}))
    assert event is not None
    return event


def test_the_ci_parameters_name_one_known_scenario_of_the_short_set() -> None:
    """The notebook tier's notebook 07 runs one short-set scenario; the integration tier runs the
    short set on both engines."""
    names = load_params("ci").conformance.scenarios
    assert len(names) == 1 and set(names) <= set(SCENARIOS) and set(names) <= set(short_set())


def test_the_local_default_names_none_so_the_short_set_runs() -> None:
    params = load_params("local")
    assert params.conformance.scenarios == () and params.conformance.short


def test_a_scenario_name_set_on_the_command_line_is_a_tuple() -> None:
    params = load_params("local", {"conformance.scenarios": ["deletes_postgres"]})
    assert params.conformance.scenarios == ("deletes_postgres",)


def test_an_unknown_scenario_fails_naming_the_known_ones_before_anything_runs() -> None:
    params = load_params("local", {"conformance.scenarios": ["deletes_oracle"]})
    with pytest.raises(ParamsError, match=r"deletes_oracle.*deletes_postgres"):
        run_scenarios(params, params.conformance.scenarios)


def test_a_truncate_marker_in_bronze_is_no_tombstone(tmp_path: Path) -> None:
    """Item 1's Bronze check runs again on a state where item 13 left a TRUNCATE marker in the
    topic (the main command run twice): the marker has no key, but it is an event, not a
    null-value tombstone; a real keyless event still is one."""
    params = load_params("ci", {"state_dir": str(tmp_path / "st"), "lake.bronze": str(tmp_path / "bronze")})
    ctx = ScenarioContext(params, params, (CATEGORY,))
    topic = CATEGORY.topic(params)
    writer = BronzeWriter(tmp_path / "bronze", "avro")

    writer.write_batch([_category_change(topic, 5, "d", "true")])
    writer.write_batch([marker_event(topic, TRUNCATE_OP, "category", {"__lsn": 20}, 2)])
    check_tombstones(ctx, CATEGORY, [(5,)])
    assert ctx.problems == [], ctx.problems
    writer.write_batch([_category_change(topic, None, "u", "false")])  # keyless and no marker: reported
    check_tombstones(ctx, CATEGORY, [(5,)])
    assert ctx.problems and "1 null-value (tombstone)" in ctx.problems[0]


def test_a_missing_delete_event_is_reported_by_key_after_the_wait(tmp_path: Path) -> None:
    """Bronze can replay equal to the source before a short-lived row's events arrive: the check
    waits for them, then names the keys whose delete event never came."""
    params = load_params("ci", {"state_dir": str(tmp_path / "st"), "lake.bronze": str(tmp_path / "bronze")})
    ctx = ScenarioContext(params, params, (CATEGORY,))
    writer = BronzeWriter(tmp_path / "bronze", "avro")
    writer.write_batch([_category_change(CATEGORY.topic(params), 5, "d", "true")])
    check_tombstones(ctx, CATEGORY, [(5,), (6,)], timeout_s=1.0)
    assert ctx.problems == ["Bronze lacks delete events for [(6,)] of [(5,), (6,)] after 1 s"]


def test_the_sale_variants_are_slices_above_every_tickit_key() -> None:
    """The scenarios on ``sale`` work on a slice: its variants hold keys from SLICE_FROM on, which
    no TICKIT sale reaches at the largest scale the parameters allow (salesid runs 1..rows), and
    the source rows and replayed Bronze they are compared with are cut the same way."""
    top = expected_row_counts(10.0)["sale"]
    for target in (SALE, SALE_BY_QTY):
        assert top < SLICE_FROM[target] < 2**31 - 1_000_000  # an INT column, room for the scenarios
        assert {t.min_key for t in variants(target)} == {SLICE_FROM[target]}
        assert all("_slice_" in t.name for t in variants(target))
    assert {t.min_key for t in variants(CATEGORY)} == {None}
    rows = pa.table(
        {"salesid": [1, top, SLICE_FROM[SALE], None, SLICE_FROM[SALE] + 7], "qtysold": [1, 2, 3, 4, 5]}
    )
    assert in_slice(rows, SALE).column("qtysold").to_pylist() == [3, 4, 5]  # a keyless marker stays
    category = pa.table({"catid": [1, 2]})
    assert in_slice(category, CATEGORY) is category
    markers_only = pa.table({"__op": ["t"]})  # no event with a key yet: nothing to cut
    assert in_slice(markers_only, SALE) is markers_only


def test_the_slice_s_events_replay_to_the_slice_of_the_whole_replay() -> None:
    """``bronze_differences`` cuts Bronze to the slice before replaying it: a key's replay needs only
    its own events and the keyless TRUNCATE markers, so the slice's replay is the same rows as the
    whole topic's replay cut afterwards, with updates, deletes, a re-insert, a TOAST placeholder
    and a marker, on keys both sides of the slice, in shuffled order."""
    low, high = 7, SLICE_FROM[SALE]

    def event(key: int | None, op: str, pos: int, qty: Any = 1) -> dict[str, Any]:
        return {
            "salesid": key,
            "qtysold": qty,
            "__op": op,
            "__deleted": "true" if op == "d" else ("false" if key is not None else None),
            "__file": "bin.000003",
            "__pos": pos,
            "__row": 0,
        }

    events = [
        event(low, "c", 10),
        event(high, "c", 11),
        event(high + 1, "c", 12),
        event(None, "t", 20),  # TRUNCATE: everything before it is gone, on both sides
        event(low, "c", 30),
        event(high, "c", 31, 5),
        event(high, "u", 32, UNAVAILABLE_VALUE),  # a placeholder: keeps qtysold 5
        event(high + 2, "c", 33),
        event(high + 2, "d", 34),
        event(high + 3, "c", 35),
        event(high + 3, "d", 36),
        event(high + 3, "c", 37, 9),  # re-inserted
        event(low + 1, "u", 38),
    ]
    random.Random(5).shuffle(events)
    # one type per column, as a Bronze file holds it (the placeholder is text in the event)
    table = pa.Table.from_pylist([{**e, "qtysold": str(e["qtysold"])} for e in events])
    whole = in_slice(replay_arrow(table, SALE.key), SALE).sort_by("salesid")
    cut = replay_arrow(in_slice(table, SALE), SALE.key).sort_by("salesid")
    assert cut.equals(whole)
    assert cut.column("salesid").to_pylist() == [high, high + 3]
    assert cut.column("qtysold").to_pylist() == ["5", "9"]


def test_a_topic_capture_has_not_written_yet_is_a_difference_to_wait_on(tmp_path: Path) -> None:
    """Waiting for Bronze right after capture started (the MariaDB lane's first scenario, while the
    snapshot of ``ecomm`` is still being written): no file of the topic yet is reported as a
    difference, so the wait goes on; it once failed the scenario with a ``KeyError``."""
    params = load_params("ci", {"state_dir": str(tmp_path / "st"), "lake.bronze": str(tmp_path / "bronze")})
    problems = bronze_differences(params, SALE, tmp_path / "bronze")
    assert problems == [f"Bronze under {tmp_path / 'bronze'} replays no row of {SALE.topic(params)} yet"]


def test_groups_run_the_key_scenarios_together_then_truncates_on_distinct_tables_then_the_rest() -> None:
    """``run_scenarios``' order: the scenarios that change only their own keys share one group; the
    TRUNCATE scenarios share the next one when their tables differ; everything else runs alone,
    in the order given. Without ``side_by_side``, every scenario alone."""
    short = short_set()
    groups = scenario_groups(short)
    shared = [n for n in short if SCENARIOS[n].shares_rounds]
    assert groups == [shared, ["truncate_postgres", "truncate_mariadb"]]
    assert {SCENARIOS[n].targets[0].table for n in groups[1]} == {"category", "date"}

    everything = list(SCENARIOS)
    full = scenario_groups(everything)
    assert full[1] == ["truncate_postgres", "truncate_mariadb"]
    alone = [g[0] for g in full[2:]]
    assert all(len(g) == 1 for g in full[2:])
    assert alone == [n for n in everything if n not in full[0] and n not in full[1]]
    assert "toast_mariadb" in alone  # not applicable: a row of its own, never in a group
    assert scenario_groups(short, side_by_side=False) == [[n] for n in short]


def test_truncates_of_one_table_go_to_different_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two scenarios that truncate the same table never run side by side."""
    import dataclasses

    import helpers.checks.conformance.harness as harness

    twin = dataclasses.replace(SCENARIOS["truncate_postgres"], name="truncate_postgres_again")
    monkeypatch.setitem(harness.SCENARIOS, twin.name, twin)
    groups = scenario_groups(["truncate_postgres", "truncate_mariadb", "truncate_postgres_again"])
    assert groups == [["truncate_postgres", "truncate_mariadb"], ["truncate_postgres_again"]]
