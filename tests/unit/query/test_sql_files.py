"""Unit tests of :mod:`helpers.query.sql_files` and of :func:`helpers.query.engines.run_sql` (what
notebook 05 calls) on a local engine over SQL that reads no table."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from helpers.errors import QueryError
from helpers.query.engines import DuckDBEngine, run_sql
from helpers.query.sql_files import bind_parameters, is_sql_name, load_sql, sql_markdown

ANSWER = (
    "-- Returns: the value given, and 42.\n-- Parameters: 1. value (integer)\nSELECT ? AS x, 41 + 1 AS y;\n"
)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "answer.sql").write_text(ANSWER)
    return sql


def _engine(folder: Path) -> DuckDBEngine:
    return DuckDBEngine(lambda: {"unused": {}}, "db", folder=folder, progress=False)


def test_load_sql_splits_header_and_statement(folder: Path) -> None:
    sql_file = load_sql("answer", folder)
    assert sql_file.header.startswith("Returns: the value given")
    assert sql_file.statement == "SELECT ? AS x, 41 + 1 AS y"
    assert sql_file.placeholders == 1 and sql_file.view is None and sql_file.label == "sql/answer.sql"
    assert load_sql("answer.sql", folder) == sql_file
    inline = load_sql("SELECT 1", folder)
    assert inline.label == "inline SQL" and inline.placeholders == 0


def test_sql_markdown_shows_the_label_and_the_whole_text(folder: Path) -> None:
    text = sql_markdown(load_sql("answer", folder))
    assert text.startswith("`sql/answer.sql`\n```sql\n-- Returns:") and text.endswith(";\n```")


@pytest.mark.parametrize(("name", "ok"), [("top_events", True), ("_x1", True), ("1x", False), ("a-b", False)])
def test_is_sql_name(name: str, ok: bool) -> None:
    assert is_sql_name(name) is ok


def test_bind_parameters_checks_count_and_types(folder: Path) -> None:
    sql_file = load_sql("answer", folder)
    assert bind_parameters(sql_file, [7], "duckdb") == [7]
    for good in ("x", Decimal("1.50"), dt.date(2008, 1, 5)):
        assert bind_parameters(sql_file, [good], "duckdb") == [good]
    with pytest.raises(QueryError, match=r"sql/answer.sql on duckdb: it has 1 parameter\(s\) \(\?\), got 2"):
        bind_parameters(sql_file, [1, 2], "duckdb")
    with pytest.raises(QueryError, match="Failed to bind parameter 1 of sql/answer.sql: float"):
        bind_parameters(sql_file, [1.5], "duckdb")
    with pytest.raises(QueryError, match="must be a sequence"):
        bind_parameters(sql_file, "7", "duckdb")


def test_run_sql_saves_the_rows_of_a_query_and_of_a_prepared_statement(folder: Path, tmp_path: Path) -> None:
    """The rows come back and are saved as <prefix><name>.csv; prepared: PREPARE then EXECUTE."""
    out = tmp_path / "artefacts"
    out.mkdir()
    engine = _engine(folder)
    got = run_sql(engine, "answer", [7], folder=out, prefix="05_", show=False)
    assert got.to_dict("records") == [{"x": 7, "y": 42}]
    pd.testing.assert_frame_equal(pd.read_csv(out / "05_answer.csv"), got)
    again = run_sql(engine, "answer", [8], folder=out, prefix="05_", prepared=True, show=False)
    assert again.to_dict("records") == [{"x": 8, "y": 42}]
    assert pd.read_csv(out / "05_answer.csv")["x"].tolist() == [8]
    with pytest.raises(QueryError, match="it has 1 parameter"):
        run_sql(engine, "answer", folder=out, show=False)
