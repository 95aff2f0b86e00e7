"""The lake on the local S3-compatible server (S3Proxy 2.7.0, :mod:`helpers.local.s3`).

One server per module, started by project code on a free port in a throw-away state dir, with
``lake.bronze`` and ``lake.silver`` at ``s3://`` URIs. Tests run in file order: the Bronze files and
the Silver table written by the first ones are read back after a restart of the server by the last.
Expected final state of the ``category`` table: keys 1-10 renamed ``v2-<id>``, 11-15 deleted,
16-40 as first written (price 1.25 + id/100).
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.sockets import listening

from helpers.bronze.events import event_from_json
from helpers.bronze.read import read_bronze
from helpers.bronze.writer import BronzeWriter
from helpers.checks.compare import compare_tables
from helpers.errors import StackError
from helpers.hudi.read import read_snapshot
from helpers.lake_store import open_store, s3_client, use_lake_s3
from helpers.local.s3 import LocalS3Server, boto3_s3_client
from helpers.memory import process_rss
from helpers.params import WorkbookParams, load_params
from helpers.proc import free_port
from helpers.silver.tables import bronze_store, table_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

TOPIC = "tickit.ems.category"
DAY = int(dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC).timestamp() * 1000)
BUCKET = "wb-lake-test"
ROOT = Path(__file__).resolve().parents[2]


def _raw(lsn: int, catid: int, name: str, op: str = "c") -> str:
    fields = [
        {"type": "int32", "optional": False, "field": "catid"},
        {"type": "string", "optional": True, "field": "catname"},
        {
            "type": "bytes",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Decimal",
            "parameters": {"scale": "2", "connect.decimal.precision": "8"},
            "field": "price",
        },
        {"type": "string", "optional": True, "field": "__deleted"},
        {"type": "string", "optional": True, "field": "__op"},
        {"type": "int64", "optional": True, "field": "__lsn"},
        {"type": "int64", "optional": True, "field": "__source_ts_ms"},
    ]
    payload = {
        "catid": catid,
        "catname": name,
        "price": 1.25 + catid / 100,
        "__deleted": "true" if op == "d" else "false",
        "__op": op,
        "__lsn": lsn,
        "__source_ts_ms": DAY + lsn,
    }
    schema = {"type": "struct", "fields": fields, "optional": False, "name": f"{TOPIC}.Value"}
    return json.dumps({"schema": schema, "payload": payload})


BATCH_1 = [_raw(100 + i, i, f"cat-{i}") for i in range(1, 41)]
BATCH_2 = [_raw(200 + i, i, f"v2-{i}", "u") for i in range(1, 11)] + [
    _raw(300 + i, i, f"cat-{i}", "d") for i in range(11, 16)
]


def _expected() -> pa.Table:
    """The source's rows after both batches."""
    names = {i: f"cat-{i}" for i in range(1, 41)} | {i: f"v2-{i}" for i in range(1, 11)}
    keys = [i for i in range(1, 41) if not 11 <= i <= 15]
    return pa.table(
        {
            "catid": pa.array(keys, pa.int32()),
            "catname": [names[i] for i in keys],
            "price": pa.array([decimal.Decimal(f"{1.25 + i / 100:.2f}") for i in keys], pa.decimal128(8, 2)),
        }
    )


@pytest.fixture(scope="module")
def overrides(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    state = tmp_path_factory.mktemp("wb-s3")
    return {
        "state_dir": str(state / "st"),
        "local.s3.enabled": True,
        "local.s3.port": free_port(),
        "local.s3.bucket": BUCKET,
        "lake.bronze": f"s3://{BUCKET}/bronze",
        "lake.silver": f"s3://{BUCKET}/silver",
        "silver.sync": False,
        "spark.catalog": "none",
    }


@pytest.fixture(scope="module")
def params(overrides: dict[str, Any]) -> Iterator[WorkbookParams]:
    params = load_params("ci", overrides)
    server = LocalS3Server(params)
    try:
        server.start()
        use_lake_s3(params)
        yield params
    finally:
        server.stop()


def _category(params: WorkbookParams) -> Any:
    return next(t for t in params.silver.tables if t.name == "category")


def test_server_runs_on_loopback_with_private_keys(params: WorkbookParams) -> None:
    """The server listens on 127.0.0.1 only; its keys file and properties are 0600; the secret is on
    no command line and in no log; a client with a wrong secret is refused; starting again keeps
    the same process; another program on the port is named in the error."""
    server = LocalS3Server(params)
    status = server.status()
    assert status.running and status.port == params.local.s3.port
    assert listening(status.pid) == {("127.0.0.1", status.port)}
    home = params.state_path / "s3"
    for name in ("keys.json", "s3proxy.properties"):
        assert stat.S_IMODE((home / name).stat().st_mode) == 0o600, name
    secret = server.connection().secret_key
    assert len(secret) >= 30
    assert secret not in Path(f"/proc/{status.pid}/cmdline").read_bytes().decode()
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert secret not in ps and server.connection().access_key not in ps
    assert secret not in server.log_file.read_text()
    assert secret not in repr(server.connection())
    wrong = boto3_s3_client(server.connection().__class__(server.endpoint_url, "WBX", "not-the-secret"))
    with pytest.raises(Exception, match="SignatureDoesNotMatch|InvalidAccessKeyId|AccessDenied"):
        wrong.list_objects_v2(Bucket=BUCKET)
    assert server.start().pid == status.pid  # idempotent
    taken = load_params(
        "ci",
        {
            "state_dir": str(params.state_path) + "-other",
            "local.s3.enabled": True,
            "local.s3.port": status.port,
        },
    )
    with pytest.raises(StackError, match=f"Failed to start the local S3 server: port {status.port}"):
        LocalS3Server(taken).start()


def test_s3store_puts_lists_reads_and_uploads_in_parts(params: WorkbookParams) -> None:
    """Through ``open_store`` (boto3 with the local endpoint): a write is listed (direct children
    or recursively), read back byte for byte and deleted; a 12 MiB multipart upload reads back
    whole; a ranged GET gives the first bytes."""
    store = open_store(f"s3://{BUCKET}/scratch")
    where = store.write("a/b/one.bin", b"first")
    store.write("a/two.bin", b"second")
    assert where == f"s3://{BUCKET}/scratch/a/b/one.bin"
    assert [e.name for e in store.list("a")] == ["two.bin"]
    assert [e.name for e in store.list("a", recursive=True)] == ["one.bin", "two.bin"]
    assert store.read(where) == b"first"
    store.delete(where)
    assert [e.name for e in store.list("a", recursive=True)] == ["two.bin"]

    from boto3.s3.transfer import TransferConfig

    s3 = s3_client()
    data = os.urandom(12 * 1024 * 1024)
    config = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
    parts: list[str] = []
    s3.meta.events.register("after-call.s3.UploadPart", lambda **kw: parts.append(kw["parsed"]["ETag"]))
    s3.upload_fileobj(io.BytesIO(data), BUCKET, "scratch/big.bin", Config=config)
    assert len(parts) == 3  # three UploadPart calls (S3Proxy's file system gives a plain MD5 ETag)
    assert s3.head_object(Bucket=BUCKET, Key="scratch/big.bin")["ContentLength"] == len(data)
    assert store.read(f"s3://{BUCKET}/scratch/big.bin") == data
    ranged = s3.get_object(Bucket=BUCKET, Key="scratch/big.bin", Range="bytes=0-9")["Body"].read()
    assert ranged == data[:10]


def test_bronze_written_to_s3_and_read_back(params: WorkbookParams) -> None:
    """Two batches written by the Bronze writer to the ``s3://`` root: one object per batch under
    ``<topic>/year=2026/month=03/day=01/``, listed by Silver's Bronze store, and read back as the
    55 events in order; writing a batch again rewrites the same object."""
    writer = BronzeWriter(params.lake.bronze)
    files = []
    for batch in (BATCH_1, BATCH_2):
        events = [e for e in (event_from_json(TOPIC, r) for r in batch) if e is not None]
        files += writer.write_batch(events)
    writer.write_batch([e for e in (event_from_json(TOPIC, r) for r in BATCH_2) if e is not None])
    assert [str(f.path).rsplit("/", 4)[1:4] for f in files] == [["year=2026", "month=03", "day=01"]] * 2
    assert all(str(f.path).startswith(f"s3://{BUCKET}/bronze/{TOPIC}/") for f in files)
    listed = bronze_store(params).list(TOPIC)
    assert sorted(o.uri for o in listed) == sorted(str(f.path) for f in files)
    rows = read_bronze(params.lake.bronze, TOPIC)
    assert [(r["catid"], r["__op"]) for r in rows] == [(i, "c") for i in range(1, 41)] + [
        (i, "u") for i in range(1, 11)
    ] + [(i, "d") for i in range(11, 16)]
    assert rows[0]["price"] == decimal.Decimal("1.26")


def test_silver_hudi_table_on_s3_equals_the_source(
    params: WorkbookParams, overrides: dict[str, Any], tmp_path: Path
) -> None:
    """``ingest_table`` in a process of its own (Spark s3a, the official Hudi bundle) writes the
    ``category`` table to ``s3://`` Silver from that Bronze: 2 files, 55 events, one commit. The
    Rust reader and the Spark datasource both read back the expected 35 rows; the table is Hudi
    table version 6; no key is on the command line of that process or of its Spark JVM; s3a's
    upload buffers were in the driver's scratch folder under the state directory."""
    spec = tmp_path / "overrides.json"
    spec.write_text(json.dumps(overrides))
    out = tmp_path / "spark.parquet"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "tests")])}
    proc = subprocess.run(
        [sys.executable, "-m", "support.s3_silver", str(spec), "category", str(out)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # s3a buffered the upload's blocks in the driver's scratch folder, not in /tmp/hadoop-<user>
    buffers = list((Path(overrides["state_dir"]) / "tmp" / "spark").glob("*/hadoop/s3a"))
    assert len(buffers) == 1 and buffers[0].is_dir(), buffers
    report = json.loads(Path(str(out) + ".json").read_text())
    result = report["result"]
    assert (result["files"], result["events"], result["deletes"]) == (2, 55, 0) and result["instant"]
    secret = LocalS3Server(params).connection().secret_key
    assert any("org.apache.spark.deploy.SparkSubmit" in c for c in report["cmdlines"]), report["cmdlines"]
    assert not [c for c in report["cmdlines"] if secret in c]
    assert secret not in proc.stdout + proc.stderr

    base = table_config(params, _category(params)).base_path
    assert base == f"s3://{BUCKET}/silver/category"
    expected = _expected()
    rust = read_snapshot(base)
    assert compare_tables(expected, rust, ["catid"]) == []
    assert compare_tables(expected, pq.read_table(out), ["catid"]) == []
    props = open_store(base).read(f"{base}/.hoodie/hoodie.properties").decode()
    assert "hoodie.table.version=6" in props.splitlines()


def test_restart_keeps_bronze_silver_and_keys(params: WorkbookParams) -> None:
    """After a stop (no process left) and a start, the keys are the same and Bronze, the Silver
    table (Rust reader) and the bucket read back as before."""
    server = LocalS3Server(params)
    keys = server.connection()
    before = read_snapshot(table_config(params, _category(params)).base_path)
    first = server.status()
    assert server.stop().running is False
    assert server.pid() is None and not Path(f"/proc/{first.pid}").exists()
    again = server.start()
    assert again.running and again.pid != first.pid
    assert server.connection() == keys
    print(f"local S3 server RSS after restart: {process_rss(again.pid) / 2**20:.0f} MiB")
    assert len(read_bronze(params.lake.bronze, TOPIC)) == 55
    after = read_snapshot(table_config(params, _category(params)).base_path)
    assert compare_tables(_expected(), after, ["catid"]) == []
    assert after.num_rows == before.num_rows == 35
