"""Athena SQL (helpers.query.engines, helpers.query.sql_files, sql/): the AWS path through pyathena
with a stubbed Athena client (the exact StartQueryExecution requests, parameters bound as
ExecutionParameters), the transpile of every SQL file to DuckDB, parameter conversion, and the
local engine over small Silver tables written by the official Hudi writer from the generators
and registered by Hudi's Hive sync in the test session's metastore (no database servers)."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import boto3
import pandas as pd
import pyarrow as pa
import pyathena
import pytest
from botocore.stub import Stubber
from support.silver_tables import silver_like, write_silver

from helpers.errors import QueryError
from helpers.params import WorkbookParams, load_params
from helpers.query.engines import AthenaEngine, DuckDBEngine, open_engine
from helpers.query.sql_files import athena_literal, load_sql, referenced_tables, sql_files, to_duckdb

pytestmark = pytest.mark.integration

AWS_OVERRIDES: dict[str, Any] = {
    "aws.s3_bucket": "lake-bucket",
    "aws.rds.postgres.instance_id": "pg",
    "aws.rds.mysql.instance_id": "my",
    "aws.rds.sqlserver.instance_id": "ms",
    "aws.athena.output_location": "s3://lake-bucket/athena-results/",
    "lake.bronze": "s3://lake-bucket/bronze",
    "lake.silver": "s3://lake-bucket/silver",
}

#: Parameters each SQL file is run with in these tests (files without ? take none).
PARAMETERS: dict[str, list[Any]] = {"top_events": ["Shows"], "sales_by_seller": [42]}

EXPECTED_FILES = {
    "order_revenue_by_customer",
    "sales_by_category",
    "sales_by_day",
    "sales_by_day_category_view",
    "sales_by_seller",
    "table_row_counts",
    "top_events",
    "top_sellers",
}


# --------------------------------------------------------------------------------------------
# SQL files and conversion


def test_sql_folder_holds_the_documented_files_each_with_a_header() -> None:
    """Every file: one statement, a header saying what it returns/creates and its parameters, and
    as many ? as the header's numbered parameters."""
    assert set(sql_files()) == EXPECTED_FILES
    for name in sql_files():
        sql_file = load_sql(name)
        assert sql_file.header.startswith(("Returns:", "Creates:", "Dashboard", "Prepared")), name
        assert "Parameters:" in sql_file.header, name
        numbered = len(re.findall(r"\b\d\. [a-z_]+ \((?:integer|varchar|decimal|date)\)", sql_file.header))
        assert sql_file.placeholders == len(PARAMETERS.get(name, [])), name
        assert numbered == sql_file.placeholders, name
        assert not sql_file.statement.startswith("--") and not sql_file.statement.endswith(";")


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES))
def test_every_sql_file_transpiles_to_duckdb(name: str) -> None:
    """sqlglot reads each file as Trino and writes DuckDB SQL that DuckDB itself can parse."""
    import duckdb

    sql_file = load_sql(name)
    out = to_duckdb(sql_file.statement, sql_file.label)
    assert out.count("?") == sql_file.placeholders
    duckdb.connect().extract_statements(out)  # raises on a syntax error


def test_dashboard_sql_uses_json_parse_and_unnest_and_transpiles_them() -> None:
    """The dashboard dataset parses the outbox's JSON items and unnests them, in both dialects."""
    sql_file = load_sql("order_revenue_by_customer")
    assert "json_parse(o.payload)" in sql_file.statement
    assert "CROSS JOIN UNNEST" in sql_file.statement and "array(json)" in sql_file.statement
    duck = to_duckdb(sql_file.statement)
    assert "JSON[]" in duck and "UNNEST" in duck and "json_parse" not in duck


def test_referenced_tables_skip_ctes_and_the_created_view() -> None:
    assert referenced_tables(load_sql("order_revenue_by_customer").statement) == {"outbox", "customers"}
    assert referenced_tables(load_sql("sales_by_day_category_view").statement) == {
        "sale",
        "event",
        "category",
    }
    assert referenced_tables(load_sql("sales_by_day").statement) == {"sales_by_day_category"}
    assert load_sql("sales_by_day_category_view").view == "sales_by_day_category"


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (42, "42"),
        (-7, "-7"),
        ("Shows", "'Shows'"),
        ("O'Brien", "'O''Brien'"),
        ("x' OR '1'='1", "'x'' OR ''1''=''1'"),
        ("'; DROP TABLE sale; --", "'''; DROP TABLE sale; --'"),
        ("", "''"),
        (Decimal("12.50"), "DECIMAL '12.50'"),
        (Decimal("1E+3"), "DECIMAL '1000'"),
        (dt.date(2008, 1, 5), "DATE '2008-01-05'"),
    ],
)
def test_athena_literal(value: Any, literal: str) -> None:
    assert athena_literal(value) == literal


def test_injection_attempt_stays_one_string_literal() -> None:
    """Parsed back as Trino SQL, the literal of an injection attempt is one string equal to the input."""
    import sqlglot
    from sqlglot import exp

    for attack in ("x' OR '1'='1", "a'); DELETE FROM sale; --", "\\' OR 1=1 --", "''''"):
        tree = sqlglot.parse_one(
            f"SELECT * FROM sale WHERE catgroup = {athena_literal(attack)}",  # noqa: S608 - the point
            read="trino",
        )
        literals = list(tree.find_all(exp.Literal))
        assert len(literals) == 1 and literals[0].this == attack, attack
        assert not list(tree.find_all(exp.Or)) and not list(tree.find_all(exp.Delete))


@pytest.mark.parametrize(
    "value",
    [True, 1.5, None, dt.datetime(2008, 1, 1), Decimal("NaN"), b"x", ["a"], "nul\x00"],
    ids=["bool", "float", "none", "datetime", "nan", "bytes", "list", "nul"],
)
def test_other_parameter_types_are_rejected(value: Any) -> None:
    with pytest.raises(QueryError, match="Failed to bind"):
        athena_literal(value)


# --------------------------------------------------------------------------------------------
# Athena through pyathena, stubbed


@pytest.fixture
def aws_params() -> WorkbookParams:
    return load_params("aws", AWS_OVERRIDES)


@pytest.fixture
def athena(aws_params: WorkbookParams) -> Iterator[tuple[AthenaEngine, Stubber]]:
    session = boto3.session.Session(
        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="x", region_name="us-east-1"
    )
    assert aws_params.aws is not None
    conn = pyathena.connect(
        session=session,
        region_name=aws_params.aws.region,
        s3_staging_dir=aws_params.aws.athena.output_location,
        schema_name="tickit_cdc_hudi",
        work_group=aws_params.aws.athena.workgroup,
    )
    stubber = Stubber(conn.client)
    engine = open_engine(aws_params, athena_connection=conn)
    assert isinstance(engine, AthenaEngine)
    with stubber:
        yield engine, stubber
    stubber.assert_no_pending_responses()


_ATHENA_TYPES = {"int64": "bigint", "float64": "double", "object": "varchar"}


def _athena_type(series: pd.Series) -> dict[str, Any]:
    first = next((v for v in series if v is not None), None)
    if isinstance(first, Decimal):
        return {"Type": "decimal", "Precision": 38, "Scale": max(0, -int(first.as_tuple().exponent))}
    if isinstance(first, dt.date):
        return {"Type": "date"}
    return {"Type": _ATHENA_TYPES[str(series.dtype)]}


def _result_set(frame: pd.DataFrame) -> dict[str, Any]:
    """An Athena GetQueryResults response holding ``frame`` (header row first, values as text)."""

    def text(v: Any) -> dict[str, str]:
        if isinstance(v, float):
            return {"VarCharValue": repr(v)}
        return {"VarCharValue": v.isoformat() if isinstance(v, dt.date) else str(v)}

    header = {"Data": [{"VarCharValue": c} for c in frame.columns]}
    rows = [{"Data": [text(v) for v in row]} for row in frame.itertuples(index=False)]
    info = [
        {"Name": c, "Precision": 0, "Scale": 0, "Nullable": "UNKNOWN", **_athena_type(frame[c])}
        for c in frame.columns
    ]
    return {"ResultSet": {"Rows": [header, *rows], "ResultSetMetadata": {"ColumnInfo": info}}}


def _expect(stubber: Stubber, query: str, parameters: list[str] | None, result: pd.DataFrame, n: int) -> None:
    request: dict[str, Any] = {
        "QueryString": query,
        "QueryExecutionContext": {"Database": "tickit_cdc_hudi", "Catalog": "awsdatacatalog"},
        "WorkGroup": "primary",
        "ResultConfiguration": {"OutputLocation": "s3://lake-bucket/athena-results/"},
    }
    if parameters is not None:
        request["ExecutionParameters"] = parameters
    qid = f"query-{n}"
    stubber.add_response("start_query_execution", {"QueryExecutionId": qid}, request)
    stubber.add_response(
        "get_query_execution",
        {
            "QueryExecution": {
                "QueryExecutionId": qid,
                "Query": query,
                "StatementType": "DDL" if query.startswith(("CREATE", "PREPARE")) else "DML",
                "Status": {"State": "SUCCEEDED"},
                "ResultConfiguration": {"OutputLocation": f"s3://lake-bucket/athena-results/{qid}.csv"},
            }
        },
        {"QueryExecutionId": qid},
    )
    stubber.add_response("get_query_results", _result_set(result), None)


def test_open_engine_on_aws_connects_pyathena_with_the_params(
    aws_params: WorkbookParams, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a connection given, AWS mode connects pyathena to the Glue database of notebook 03."""
    seen: dict[str, Any] = {}

    def fake_connect(**kwargs: Any) -> object:
        seen.update(kwargs)
        return object()

    monkeypatch.setattr(pyathena, "connect", fake_connect)
    assert isinstance(open_engine(aws_params), AthenaEngine)
    assert seen == {
        "region_name": "us-east-1",
        "work_group": "primary",
        "s3_staging_dir": "s3://lake-bucket/athena-results/",
        "schema_name": "tickit_cdc_hudi",
    }


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES - {"sales_by_day", "sales_by_category"}))
def test_each_sql_file_is_sent_to_athena_with_bound_parameters(
    name: str, athena: tuple[AthenaEngine, Stubber]
) -> None:
    """The request is the file's statement unchanged (no header, no value pasted in) with the
    values as ExecutionParameters; the rows come back as a DataFrame."""
    engine, stubber = athena
    sql_file = load_sql(name)
    values = PARAMETERS.get(name, [])
    literals = [athena_literal(v) for v in values]
    rows = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    _expect(stubber, sql_file.statement, literals or None, rows, 1)
    got = engine.query(name, values)
    for value in values:
        assert str(value) not in sql_file.statement
    pd.testing.assert_frame_equal(got, rows)


def test_a_query_reading_the_view_creates_it_first(athena: tuple[AthenaEngine, Stubber]) -> None:
    """sales_by_day reads the view sales_by_day_category: the engine sends its CREATE OR REPLACE
    VIEW once, then the queries."""
    engine, stubber = athena
    view = load_sql("sales_by_day_category_view").statement
    assert view.startswith("CREATE OR REPLACE VIEW sales_by_day_category AS")
    empty = pd.DataFrame({"x": pd.Series([], dtype="object")})
    day = pd.DataFrame({"sale_date": [dt.date(2008, 1, 1)], "sales": [3], "revenue": [Decimal("10.50")]})
    _expect(stubber, view, None, empty, 1)
    _expect(stubber, load_sql("sales_by_day").statement, None, day, 2)
    _expect(stubber, load_sql("sales_by_category").statement, None, day, 3)
    pd.testing.assert_frame_equal(engine.query("sales_by_day"), day)
    pd.testing.assert_frame_equal(engine.query("sales_by_category"), day)


def test_prepared_statement_on_athena_is_prepare_then_execute_with_parameters(
    athena: tuple[AthenaEngine, Stubber],
) -> None:
    """PREPARE sales_by_seller FROM <file>, then EXECUTE sales_by_seller with the seller id as an
    execution parameter; a hostile string stays a literal in ExecutionParameters."""
    engine, stubber = athena
    statement = load_sql("sales_by_seller").statement
    empty = pd.DataFrame({"x": pd.Series([], dtype="object")})
    rows = pd.DataFrame({"eventid": [7], "revenue": [Decimal("99.00")]})
    _expect(stubber, f"PREPARE sales_by_seller FROM\n{statement}", None, empty, 1)
    _expect(stubber, "EXECUTE sales_by_seller", ["42"], rows, 2)
    _expect(stubber, "EXECUTE sales_by_seller", ["1234"], rows, 3)
    engine.prepare("sales_by_seller", "sales_by_seller")
    pd.testing.assert_frame_equal(engine.execute("sales_by_seller", [42]), rows)
    pd.testing.assert_frame_equal(engine.execute("sales_by_seller", [1234]), rows)

    _expect(stubber, load_sql("top_events").statement, ["'x'' OR ''1''=''1'"], rows, 4)
    engine.query("top_events", ["x' OR '1'='1"])


def test_athena_errors_name_the_file_and_the_engine(athena: tuple[AthenaEngine, Stubber]) -> None:
    engine, stubber = athena
    stubber.add_client_error("start_query_execution", "InvalidRequestException", "line 1:8: bad")
    with pytest.raises(QueryError, match=r"Failed to run sql/top_sellers.sql on Athena: .*bad"):
        engine.query("top_sellers")
    with pytest.raises(QueryError, match=r"sql/top_events.sql on athena: it has 1 parameter"):
        engine.query("top_events")
    with pytest.raises(QueryError, match="prepare it first"):
        engine.execute("never_prepared", [1])
    with pytest.raises(QueryError, match="Failed to bind parameter 1 of sql/top_events.sql"):
        engine.query("top_events", [1.5])


# --------------------------------------------------------------------------------------------
# the local engine over Hudi tables written in the process


@pytest.fixture(scope="module")
def local_silver(
    spark: Any, spark_params: WorkbookParams, tmp_path_factory: pytest.TempPathFactory
) -> tuple[WorkbookParams, dict[str, pd.DataFrame]]:
    """Every Silver table of the CI params written by the official Hudi writer from the generators
    (outbox payloads as the triggers build them), registered by Hudi's Hive sync in a database of
    their own; plus the same data as pandas frames (the oracle)."""
    from helpers.sources.sample.orders import generate_orders, order_payload
    from helpers.sources.sample.tickit import generate_tickit

    silver = tmp_path_factory.mktemp("athena") / "silver"
    params = load_params(
        "ci",
        {
            "lake.silver": str(silver),
            "state_dir": spark_params.state_dir,
            "local.metastore.port": spark_params.local.metastore.port,
            "silver.database": "wb_athena",
            "local.query_engine": "duckdb",  # these tests are DuckDB's; Trino's: test_athena_local.py
        },
    )
    data = dict(generate_tickit(params.tickit.scale, params.tickit.seed))
    data.update(generate_orders(params.orders.customers, params.orders.orders, params.orders.seed))
    items: dict[int, list[dict[str, Any]]] = {}
    for item in data["order_items"].to_pylist():
        items.setdefault(item["order_id"], []).append(item)
    orders = data["orders"].to_pylist()
    data["outbox"] = pa.table(
        {
            "order_id": pa.array([o["order_id"] for o in orders], pa.int32()),
            "payload": [json.dumps(order_payload(o, items.get(o["order_id"], []))) for o in orders],
        }
    )
    data["sale_mor"] = data["sale"]
    for table in params.silver.tables:
        write_silver(spark, params, table, silver_like(data[table.name]))
    return params, {name: t.to_pandas() for name, t in data.items()}


def test_local_engine_results_equal_pandas_over_the_same_data(
    local_silver: tuple[WorkbookParams, dict[str, pd.DataFrame]],
) -> None:
    """Revenue per customer (JSON items unnested) and sales by seller equal the same figures
    computed in pandas from the generated tables (not the outbox); decimals exact."""
    params, frames = local_silver
    engine = open_engine(params, progress=False)
    assert isinstance(engine, DuckDBEngine)
    got = engine.query("order_revenue_by_customer")
    lines = frames["order_items"].merge(frames["orders"], on="order_id")
    lines["revenue"] = [q * p for q, p in zip(lines["quantity"], lines["unit_price"], strict=True)]
    per_order = lines.groupby(["customer_id", "order_id"]).agg(
        quantity=("quantity", "sum"), revenue=("revenue", "sum")
    )
    per_customer = per_order.groupby("customer_id").agg(
        order_count=("quantity", "size"), total_revenue=("revenue", "sum"), avg_quantity=("quantity", "mean")
    )
    assert len(got) == len(per_customer)
    for row in got.itertuples():
        want = per_customer.loc[row.customer_id]
        assert row.order_count == want.order_count and row.total_revenue == want.total_revenue
        assert row.avg_quantity == pytest.approx(want.avg_quantity)
        assert row.avg_revenue == pytest.approx(float(want.total_revenue) / want.order_count)
    assert list(got["total_revenue"]) == sorted(got["total_revenue"], reverse=True)

    seller = int(engine.query("top_sellers")["sellerid"].iloc[0])
    engine.prepare("by_seller", "sales_by_seller")
    by_seller = engine.execute("by_seller", [seller])
    sale = frames["sale"][frames["sale"]["sellerid"] == seller]
    want_revenue = sale.groupby("eventid")["pricepaid"].sum()
    assert dict(zip(by_seller["eventid"], by_seller["revenue"], strict=True)) == want_revenue.to_dict()
    assert by_seller["sales"].sum() == len(sale)


def test_local_engine_reads_each_table_once_per_commit(
    local_silver: tuple[WorkbookParams, dict[str, pd.DataFrame]], spark: Any
) -> None:
    """Only the tables a query needs are read; a new commit makes the next query read that table
    again and see the change; ro/rt of the MoR table are registered separately."""
    params, frames = local_silver
    engine = open_engine(params, progress=False)
    assert isinstance(engine, DuckDBEngine)
    engine.query("top_events", ["Shows"])
    assert set(engine.loaded_tables()["table"]) == {"sale", "event", "category", "venue"}
    before = engine.loaded_tables().set_index("table")["instant"].to_dict()
    counts = engine.query("table_row_counts").set_index("table_name")["row_count"]
    realtime = int(engine.query("SELECT count(*) AS n FROM sale_mor_rt")["n"].iloc[0])
    assert realtime == counts["sale"] == len(frames["sale"])
    category = silver_like(pa.Table.from_pandas(frames["category"].iloc[:1], preserve_index=False))
    category = category.set_column(2, "catname", pa.array(["Renamed"]))
    write_silver(spark, params, next(t for t in params.silver.tables if t.name == "category"), category)
    renamed = engine.query("SELECT catname FROM category WHERE catid = 1")
    assert list(renamed["catname"]) == ["Renamed"]
    after = engine.loaded_tables().set_index("table")["instant"].to_dict()
    assert after["category"] > before["category"] and after["sale"] == before["sale"]


def test_local_engine_errors_name_the_file_and_the_engine(
    local_silver: tuple[WorkbookParams, dict[str, pd.DataFrame]],
) -> None:
    params, _ = local_silver
    engine = open_engine(params, progress=False)
    with pytest.raises(QueryError, match=r"inline SQL on duckdb: unknown table\(s\) \['nope'\]"):
        engine.query("SELECT * FROM nope")
    with pytest.raises(QueryError, match=r"Failed to run inline SQL on duckdb: .*no_such_column"):
        engine.query("SELECT no_such_column FROM category")
    with pytest.raises(QueryError, match=r"Failed to load sql/missing_file.sql"):
        engine.query("missing_file")


@pytest.mark.parametrize("name", sorted(EXPECTED_FILES - {"sales_by_day_category_view"}))
def test_athena_and_the_local_engine_return_the_same_frame_for_the_same_rows(
    name: str,
    local_silver: tuple[WorkbookParams, dict[str, pd.DataFrame]],
    athena: tuple[AthenaEngine, Stubber],
) -> None:
    """Given the rows the local engine computed for a file as Athena's answer (text values plus
    column types, as GetQueryResults returns them), the Athena engine returns an identical
    DataFrame: same columns, dtypes and values (integers, exact decimals, doubles, dates)."""
    params, _ = local_silver
    local = open_engine(params, progress=False)
    values = PARAMETERS.get(name, [])
    if name == "sales_by_seller":
        values = [int(local.query("top_sellers")["sellerid"].iloc[0])]
    expected = local.query(name, values)
    assert len(expected) > 0
    engine, stubber = athena
    n = 1
    if "sales_by_day_category" in referenced_tables(load_sql(name).statement):
        _expect(stubber, load_sql("sales_by_day_category_view").statement, None, pd.DataFrame({"x": []}), n)
        n += 1
    _expect(stubber, load_sql(name).statement, [athena_literal(v) for v in values] or None, expected, n)
    pd.testing.assert_frame_equal(engine.query(name, values), expected)
