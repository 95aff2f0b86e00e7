"""Silver benchmark: full initial load from Bronze, and source commit -> row readable in Silver.

Not a test. Starts its own servers in a temporary state directory on free ports, loads TICKIT at
full scale, enables CDC (notebook 01), captures to Bronze (notebook 02) and waits until Bronze
replays to the sources, then

* initial load: one-shot :func:`helpers.silver.ingest_all` of every configured Silver table (sale
  twice: CoW and MoR) from the full Bronze; wall time and rows/s against the issue's 60 s;
* continuous: starts the continuous job (``silver.min_interval_s`` 1.0) and makes ``--changes``
  single-row updates per source, one at a time, each timed from the commit's return until the
  official Hudi reader returns the new value; p50 / p95 against the issue's 2.5 s / 6 s.

Run::

    .venv/bin/python bench/bench_silver.py                 # scale 1.0, 100 changes per source
    .venv/bin/python bench/bench_silver.py --scale 0.1 --changes 30
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.capture import connector_specs, open_backend, register_connectors  # noqa: E402
from helpers.capture.api import bronze_vs_source, local_endpoints  # noqa: E402
from helpers.hudi.read import read_snapshot  # noqa: E402
from helpers.params import load_params  # noqa: E402
from helpers.silver import ingest_all, silver_vs_source, table_config  # noqa: E402
from helpers.silver_job import SilverJob  # noqa: E402
from helpers.sources import LocalSources  # noqa: E402
from helpers.stack import LocalStack  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--changes", type=int, default=100, help="single-row commits per source")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench_silver_", dir="/tmp"))
    work.chmod(0o711)
    params = load_params(
        "local",
        overrides={
            "state_dir": str(work / "st"),
            "local.postgres.port": _free_port(),
            "local.mariadb.port": _free_port(),
            "lake.bronze": str(work / "bronze"),
            "lake.silver": str(work / "silver"),
            "tickit.scale": args.scale,
        },
    )
    stack = LocalStack(params)
    job = SilverJob(params)
    try:
        sources = LocalSources(params)
        sources.start()
        sources.load_sample_data()
        sources.enable_cdc()
        specs = connector_specs(params, local_endpoints(params))
        backend = open_backend(params)
        register_connectors(backend, specs, timeout_s=300)
        bronze = bronze_vs_source(params, specs, wait_s=900)
        if not bronze["equal"].all():
            raise SystemExit(f"Bronze did not catch up:\n{bronze}")
        print(
            f"# bench_silver  scale {args.scale}  changes {args.changes}  cores {os.cpu_count()}", flush=True
        )

        started = time.monotonic()
        loaded = ingest_all(params)
        seconds = time.monotonic() - started
        events = int(loaded["events"].sum())
        check = silver_vs_source(params)
        assert check["equal"].all(), check[~check["equal"]]
        source_rows = int(check["source_rows"].sum())
        print("\n## initial load from Bronze (one-shot, every Silver table; sale as CoW and MoR)")
        print("| tables | events ingested | seconds | events/s | target |")
        print("|---|---|---|---|---|")
        verdict = "met" if seconds <= 60 else "NOT met"
        rate = events / seconds
        cells = [str(len(loaded)), f"{events:,} ({source_rows:,} rows)", f"{seconds:.1f}", f"{rate:,.0f}"]
        print(f"| {' | '.join(cells)} | <= 60 s: {verdict} |")

        job.start()
        print(f"\n## source commit -> row readable in Silver (continuous job), {args.changes} per source")
        print("| source | table | p50 s | p95 s | max s | target p50 <= 2.5, p95 <= 6 |")
        print("|---|---|---|---|---|---|")
        cases = [("ems", "category", "catdesc", "catid", 1), ("ecomm", "date", "day", "dateid", None)]
        for source, name, column, key, key_value in cases:
            table = next(t for t in params.silver.tables if t.name == name)
            base = table_config(params, table).base_path
            if key_value is None:
                key_value = int(read_snapshot(base, columns=[key]).column(key)[0].as_py())
            latencies = []
            for i in range(args.changes):
                value = f"b{i:03d}"[: 3 if name == "date" else 50]
                if source == "ems":
                    with stack.connect_postgres(params.source(source).database, autocommit=True) as conn:
                        conn.execute(
                            "UPDATE ems.category SET catdesc = %s WHERE catid = %s", (value, key_value)
                        )
                else:
                    value = f"{i % 1000:03d}"
                    conn2 = stack.connect_mariadb(params.source(source).database, autocommit=True)
                    try:
                        with conn2.cursor() as cur:
                            cur.execute("UPDATE `date` SET day = %s WHERE dateid = %s", (value, key_value))
                    finally:
                        conn2.close()
                committed = time.monotonic()
                while True:
                    rows = read_snapshot(
                        base, columns=[key, column], filters=[(key, "=", str(key_value))]
                    ).to_pylist()
                    if rows and rows[0][column] == value:
                        break
                    if time.monotonic() - committed > 60:
                        raise SystemExit(f"change {i} of {name} not in Silver after 60 s")
                    time.sleep(0.02)
                latencies.append(time.monotonic() - committed)
            q = statistics.quantiles(latencies, n=20)
            p50, p95 = statistics.median(latencies), q[18]
            verdict = "met" if p50 <= 2.5 and p95 <= 6 else "NOT met"
            engine, top = params.source(source).engine, max(latencies)
            print(
                f"| {engine} ({source}) | {name} | {p50:.2f} | {p95:.2f} | {top:.2f} | {verdict} |",
                flush=True,
            )
    finally:
        job.stop()
        stack.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
