"""JSON-lines Bronze end to end: real servers and Debezium write JSON lines, Silver ingests them,
with the PySpark engine and with the streamer engine (HoodieStreamer 0.14.0's ``JsonDFSSource``).

The ``ems`` and ``orders`` (PostgreSQL) and ``ecomm`` (MariaDB) connectors, to keep the run short:
between them they produce every Debezium encoding the sample data has (MySQL dates as epoch days
and datetimes as epoch milliseconds, PostgreSQL timestamps as epoch microseconds, timestamptz as
ISO text, JSON text, exact decimals).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from support.silver_tables import STREAMER_TABLES

from helpers.bronze.read import bronze_files
from helpers.capture import connector_specs, open_backend, register_connectors
from helpers.checks.config_lint import lint_files
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
    Bronze, for ``names`` (``STREAMER_TABLES``: every column kind): Silver equal to the sources,
    exact decimals included. Then the trap it avoids: the same run with the source schema's
    decimals left as Avro ``bytes`` and no cast stores the numbers' text as the decimal's bytes:
    every value wrong, silently."""

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

    # the posts' style: JsonDFSSource, the Bronze schema with its bytes decimals, no transformer
    naive = streamer("silver-naive", ["sale"])
    [table] = write_streamer_config(naive, folder / "naive-conf")
    schema = json.loads(Path(table.source_schema.removeprefix("file://")).read_text())
    for field in schema["fields"][0]["type"]["fields"]:
        if field["name"] in ("pricepaid", "commission"):
            field["type"] = ["null", {"type": "bytes", "logicalType": "decimal", "precision": 8, "scale": 2}]
        elif field["name"] == "saletime":
            field["type"] = ["null", "long"]
    naive_schema = folder / "naive.avsc"
    naive_schema.write_text(json.dumps(schema))
    bronze = params.path(params.lake.bronze) / "tickit.ecomm.sale"
    base_path = table_config(naive, naive.silver.tables[0]).base_path
    props = folder / "naive.properties"
    props.write_text(
        "hoodie.table.name=sale\nhoodie.datasource.write.recordkey.field=payload.salesid\n"
        "hoodie.datasource.write.precombine.field=payload.__pos\n"
        "hoodie.datasource.write.keygenerator.class=org.apache.hudi.keygen.NonpartitionedKeyGenerator\n"
        "hoodie.datasource.write.partitionpath.field=\nhoodie.metadata.enable=false\n"
        f"hoodie.streamer.source.dfs.root={bronze}\n"
        f"hoodie.streamer.schemaprovider.source.schema.file=file://{naive_schema}\n"
    )
    assert "streamer-bytes-decimal" in {f.rule for f in lint_files([props])}  # the linter names the trap
    args = [
        "--props", f"file://{props}", "--target-base-path", f"file://{base_path}", "--target-table", "sale",
        "--table-type", "COPY_ON_WRITE", "--op", "UPSERT",
        "--source-class", "org.apache.hudi.utilities.sources.JsonDFSSource",
        "--source-ordering-field", "payload.__pos",
        "--schemaprovider-class", "org.apache.hudi.utilities.schema.FilebasedSchemaProvider",
    ]  # fmt: skip
    argv, env = streamer_job_argv(naive, [], folder / "naive-run", continuous=False)
    plan = folder / "naive-run" / "plan.json"
    plan.write_text(json.dumps({**json.loads(plan.read_text()), "tables": [{"name": "sale", "args": args}]}))
    subprocess.run(argv, env=env, check=True, capture_output=True, timeout=600)  # noqa: S603 - built above
    payload = read_snapshot(base_path).column("payload").combine_chunks()
    stored = dict(
        zip(payload.field("salesid").to_pylist(), payload.field("pricepaid").to_pylist(), strict=True)
    )
    exact = read_snapshot(sale.base_path, columns=["salesid", "pricepaid"]).to_pydict()
    truth = dict(zip(exact["salesid"], exact["pricepaid"], strict=True))
    assert stored.keys() == truth.keys()
    wrong = [k for k in truth if stored[k] != truth[k] and truth[k] is not None]
    assert len(wrong) > len(truth) // 2, (
        "0.14.0 kept the decimals: the corruption is gone"
    )  # 10.5 -> 8252411.41


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
            s
            for s in connector_specs(params, LocalSources(params).endpoints())
            if s.name.endswith(("-ems", "-ecomm", "-orders"))
        ]
        backend = open_backend(params)
        try:
            register_connectors(backend, specs, timeout_s=180)
            assert bronze_vs_source(params, specs, wait_s=90)["equal"].all()
            topics = [t for s in specs for t in s.topics.values()]
            files = [p for t in topics for p in bronze_files(params.path(params.lake.bronze), t)]
            assert files and all(p.suffix == ".jsonl" for p in files)
            names = [t.name for t in params.silver.tables if t.source in ("ems", "ecomm", "orders")]
            ingested = ingest_all(params, names)
            assert (ingested["files"] > 0).all()
            check = silver_vs_source(params, names)
            assert len(check) == len(names) and check["equal"].all(), check[~check["equal"]]
            _streamer_on_jsonl(params, [n for n in names if n in STREAMER_TABLES], tmp_path)
        finally:
            for spec in specs:
                backend.stop(spec.name)  # type: ignore[attr-defined]
