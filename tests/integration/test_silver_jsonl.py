"""JSON-lines Bronze end to end: real servers and Debezium write JSON lines, Silver ingests them,
with the PySpark engine and with the streamer engine (HoodieStreamer 0.14.0's ``JsonDFSSource``).

Only the ``ems`` (PostgreSQL) and ``ecomm`` (MariaDB) connectors, to keep the run short: between
them they produce every Debezium encoding the sample data has (MySQL dates as epoch days and
datetimes as epoch milliseconds, PostgreSQL timestamps as epoch microseconds, exact decimals).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from helpers.bronze.read import bronze_files
from helpers.capture import connector_specs, open_backend, register_connectors
from helpers.capture.register import local_endpoints
from helpers.checks.parity import bronze_vs_source, silver_vs_source
from helpers.hudi.read import read_snapshot
from helpers.params import WorkbookParams
from helpers.silver.streamer import run_streamer_once, streamer_job_argv
from helpers.silver.streamer_config import write_streamer_config
from helpers.silver.tables import table_config
from helpers.sources.api import LocalSources

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def _streamer_on_jsonl(params: WorkbookParams, names: list[str], folder: Path) -> None:
    """The streamer engine (HoodieStreamer 0.14.0, ``JsonDFSSource``) on the same JSON-lines
    Bronze: Silver equal to the sources, exact decimals included. Then the trap it avoids: the
    same run with the source schema's decimals left as Avro ``bytes`` and no cast stores the
    numbers' text as the decimal's bytes (not a decimal column at all)."""

    def streamer(silver: str, only: list[str]) -> WorkbookParams:
        return params.model_copy(
            update={
                "lake": params.lake.model_copy(update={"silver": str(folder / silver)}),
                "silver": params.silver.model_copy(
                    update={
                        "engine": "streamer",
                        "sync": False,
                        "tables": tuple(t for t in params.silver.tables if t.name in only),
                    }
                ),
            }
        )

    good = streamer("silver-streamer", names)
    result = run_streamer_once(good)
    assert result["instant"].notna().all(), result
    check = silver_vs_source(good, names)
    assert check["equal"].all(), check[~check["equal"]]
    sale = table_config(good, good.silver.tables[[t.name for t in good.silver.tables].index("sale")])
    assert pa.types.is_decimal(read_snapshot(sale.base_path).schema.field("pricepaid").type)

    naive = streamer("silver-naive", ["sale"])
    [table] = write_streamer_config(naive, folder / "naive-conf")
    schema = json.loads(Path(table.source_schema.removeprefix("file://")).read_text())
    decimal = {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}
    for field in schema["fields"][0]["type"]["fields"]:
        if field["name"] in ("pricepaid", "commission"):
            field["type"] = ["null", decimal]
    Path(table.source_schema.removeprefix("file://")).write_text(json.dumps(schema))
    sql = table.transform_sql.replace("CAST(`pricepaid` AS DECIMAL(8, 2)) AS `pricepaid`", "`pricepaid`")
    sql = sql.replace("CAST(`commission` AS DECIMAL(8, 2)) AS `commission`", "`commission`")
    assert sql != table.transform_sql
    props = Path(table.properties.removeprefix("file://"))
    props.write_text(props.read_text().replace(table.transform_sql, sql))
    argv, env = streamer_job_argv(
        naive, [replace(table, transform_sql=sql)], folder / "naive-run", continuous=False
    )
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=600)  # noqa: S603 - built above
    stored = (
        read_snapshot(table_config(naive, naive.silver.tables[0]).base_path).schema.field("pricepaid").type
    )
    assert not pa.types.is_decimal(stored), stored  # 0.14.0 stored the text's bytes: the corruption


def test_jsonl_bronze_ingests_into_silver_equal_to_the_sources(
    stack_factory: Callable[..., Any], tmp_path: Path
) -> None:
    from helpers.silver.ingest import ingest_all

    overrides = {
        "lake.bronze": str(tmp_path / "bronze"),
        "lake.silver": str(tmp_path / "silver"),
        "capture.bronze_format": "jsonl",
    }
    with stack_factory("wb-jsonl-", overrides) as stack:
        params = stack.params
        sources = LocalSources(params)
        sources.load_sample_data()
        sources.enable_cdc()
        specs = [
            s for s in connector_specs(params, local_endpoints(params)) if s.name.endswith(("-ems", "-ecomm"))
        ]
        backend = open_backend(params)
        try:
            register_connectors(backend, specs, timeout_s=180)
            assert bronze_vs_source(params, specs, wait_s=90)["equal"].all()
            topics = [t for s in specs for t in s.topics.values()]
            files = [p for t in topics for p in bronze_files(params.path(params.lake.bronze), t)]
            assert files and all(p.suffix == ".jsonl" for p in files)
            names = [t.name for t in params.silver.tables if t.source in ("ems", "ecomm")]
            ingested = ingest_all(params, names)
            assert (ingested["files"] > 0).all()
            check = silver_vs_source(params, names)
            assert len(check) == len(names) and check["equal"].all(), check[~check["equal"]]
            _streamer_on_jsonl(params, names, tmp_path)
        finally:
            for spec in specs:
                backend.stop(spec.name)  # type: ignore[attr-defined]
