"""Catalog entries as Hudi's sync makes them; Glue through botocore's Stubber; the local file."""

from __future__ import annotations

from pathlib import Path

import boto3
import pyarrow as pa
import pytest
from botocore.stub import Stubber

from helpers.catalog import catalog_tables, hive_type, read_local_catalog, register_glue, register_local
from helpers.errors import AwsError, HudiError

SCHEMA = pa.schema(
    [
        ("_hoodie_commit_time", pa.string()),
        ("salesid", pa.int32()),
        ("pricepaid", pa.decimal128(8, 2)),
        ("saletime", pa.timestamp("us", tz="UTC")),
        ("dateid", pa.int16()),
    ]
)


def test_mor_gets_ro_and_rt_entries_cow_one_and_partition_keys_leave_the_columns() -> None:
    mor = catalog_tables("sale_mor", "s3://b/silver/sale_mor", SCHEMA, "MERGE_ON_READ", ["dateid"])
    assert [(e.name, e.query_type) for e in mor] == [
        ("sale_mor_ro", "read_optimized"),
        ("sale_mor_rt", "snapshot"),
    ]
    assert mor[1].input_format.endswith("HoodieParquetRealtimeInputFormat")
    assert mor[0].partition_keys == (("dateid", "int"),)
    assert ("dateid", "int") not in mor[0].columns
    assert dict(mor[0].columns)["pricepaid"] == "decimal(8,2)"
    cow = catalog_tables("sale", "/lake/silver/sale", SCHEMA, "COPY_ON_WRITE", [])
    assert [e.name for e in cow] == ["sale"] and cow[0].input_format.endswith("HoodieParquetInputFormat")
    with pytest.raises(HudiError, match="catalog type"):
        hive_type(pa.list_(pa.int32()))


def test_glue_creates_database_and_tables_then_updates_them() -> None:
    glue = boto3.client("glue", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    entries = catalog_tables("sale_mor", "s3://b/silver/sale_mor", SCHEMA, "MERGE_ON_READ", [])
    with Stubber(glue) as stub:
        stub.add_client_error(
            "get_database", "EntityNotFoundException", expected_params={"Name": "tickit_silver"}
        )
        stub.add_response(
            "create_database",
            {},
            {
                "DatabaseInput": {
                    "Name": "tickit_silver",
                    "Description": "CDC lakehouse workbook: Silver Hudi tables",
                }
            },
        )
        for entry in entries:
            stub.add_client_error(
                "get_table",
                "EntityNotFoundException",
                expected_params={"DatabaseName": "tickit_silver", "Name": entry.name},
            )
            stub.add_response("create_table", {}, None)
        assert register_glue(glue, "tickit_silver", entries) == ["created sale_mor_ro", "created sale_mor_rt"]
        stub.add_response("get_database", {"Database": {"Name": "tickit_silver"}}, {"Name": "tickit_silver"})
        stub.add_response(
            "get_table",
            {"Table": {"Name": "sale_mor_ro"}},
            {"DatabaseName": "tickit_silver", "Name": "sale_mor_ro"},
        )
        stub.add_response("update_table", {}, None)
        assert register_glue(glue, "tickit_silver", entries[:1]) == ["updated sale_mor_ro"]
        stub.add_response("get_database", {"Database": {"Name": "tickit_silver"}}, {"Name": "tickit_silver"})
        stub.add_client_error("get_table", "AccessDeniedException", "no glue:GetTable")
        with pytest.raises(AwsError, match="tickit_silver.sale_mor_ro.*no glue:GetTable"):
            register_glue(glue, "tickit_silver", entries[:1])
        stub.assert_no_pending_responses()


def test_local_catalog_is_replaced_atomically_and_merges_entries(tmp_path: Path) -> None:
    path = tmp_path / "silver" / "_catalog.json"
    register_local(path, "tickit_silver", catalog_tables("sale", "/l/sale", SCHEMA, "COPY_ON_WRITE", []))
    register_local(
        path, "tickit_silver", catalog_tables("sale_mor", "/l/sale_mor", SCHEMA, "MERGE_ON_READ", [])
    )
    doc = read_local_catalog(path)
    assert sorted(doc["databases"]["tickit_silver"]) == ["sale", "sale_mor_ro", "sale_mor_rt"]
    assert doc["databases"]["tickit_silver"]["sale"]["location"] == "/l/sale"
    assert not list(path.parent.glob(".*tmp*"))
