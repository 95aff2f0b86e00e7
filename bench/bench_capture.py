"""Capture benchmark: source-commit-to-Bronze-visible latency and initial-snapshot throughput.

Not a test. Starts its own servers in a temporary state directory on free ports (``.state`` is
not touched), loads TICKIT at full scale, enables CDC as notebook 01 does, registers the embedded
connectors as notebook 02 does (default capture parameters: ``flush_interval_ms`` 500), then

* snapshot throughput: rows of the initial snapshot per second, per connector, from the first
  registration call until every captured table's op=r count equals the source's count;
* latency: ``--changes`` (default 100) single-row commits per source, one at a time, each timed
  from the commit's return to the moment a Bronze file holding it is visible (the directory is
  polled every 2 ms); p50 / p95 / max per source, against the issue's targets
  (p50 <= 0.5 s, p95 <= 2 s).

Run::

    .venv/bin/python bench/bench_capture.py                 # scale 1.0, 100 changes per source
    .venv/bin/python bench/bench_capture.py --scale 0.1 --changes 200
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

from helpers.capture import connector_specs, open_backend, read_bronze  # noqa: E402
from helpers.capture.backends import wait_until_running  # noqa: E402
from helpers.capture.register import local_endpoints  # noqa: E402
from helpers.params import load_params  # noqa: E402
from helpers.pipeline import stop_all  # noqa: E402
from helpers.sources.api import LocalSources  # noqa: E402
from helpers.sources.local.stack import LocalStack  # noqa: E402


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _visible(topic_dir: Path, known: set[str]) -> list[Path]:
    out = []
    for dirpath, _, files in os.walk(topic_dir):
        for name in files:
            if not name.startswith(".") and name not in known:
                out.append(Path(dirpath) / name)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--changes", type=int, default=100, help="single-row commits per source")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench_capture_", dir="/tmp"))
    work.chmod(0o711)
    bronze = work / "bronze"
    params = load_params(
        "local",
        overrides={
            "state_dir": str(work / "st"),
            "local.postgres.port": _free_port(),
            "local.mariadb.port": _free_port(),
            "lake.bronze": str(bronze),
            "tickit.scale": args.scale,
        },
    )
    stack = LocalStack(params)
    sources = LocalSources(params)
    backend = None
    specs = []
    try:
        sources.start()
        sources.load_sample_data()
        sources.enable_cdc()
        counts = {(r.system, r.table): int(r.rows) for r in sources.row_counts().itertuples()}
        specs = connector_specs(params, local_endpoints(params))
        backend = open_backend(params)
        print(
            f"# bench_capture  scale {args.scale}  changes {args.changes}  cores {os.cpu_count()}", flush=True
        )
        started = time.monotonic()
        for spec in specs:
            backend.create_or_update(spec)
        done: dict[str, float] = {}
        while len(done) < len(specs) and time.monotonic() - started < 900:
            for spec in specs:
                if spec.name in done:
                    continue
                status = backend.status(spec.name)
                if status.state == "FAILED":
                    raise SystemExit(f"{spec.name} FAILED: {status.error}")
                snap = status.details.get("snapshot_rows") or {}
                want = {t: counts[(spec.name.split("-", 1)[1], t.split(".", 1)[1])] for t in spec.topics}
                if all(snap.get(t, 0) >= n for t, n in want.items()):
                    done[spec.name] = time.monotonic() - started
            time.sleep(0.05)
        print("\n## initial snapshot (from registration until every table's op=r count = source count)")
        print("| connector | rows | seconds | rows/s |")
        print("|---|---|---|---|")
        for spec in specs:
            rows = sum(counts[(spec.name.split("-", 1)[1], t.split(".", 1)[1])] for t in spec.topics)
            secs = done.get(spec.name)
            print(
                f"| {spec.name} | {rows:,} | {secs:.1f} | {rows / secs:,.0f} |"
                if secs
                else f"| {spec.name} | {rows:,} | n/a | n/a |"
            )

        total = sum(counts.values())
        if len(done) == len(specs):
            slowest = max(done.values())
            print(f"| all four, concurrently | {total:,} | {slowest:.1f} | {total / slowest:,.0f} |")
        print(f"\n## commit -> Bronze visible, {args.changes} single-row commits per source, one at a time")
        print("| source | p50 s | p95 s | max s | target p50 <= 0.5, p95 <= 2 |")
        print("|---|---|---|---|---|")
        for source in ("ems", "ecomm"):
            spec = next(s for s in specs if s.name.endswith(f"-{source}"))
            wait_until_running(backend, spec.name, timeout_s=60)
            sp = params.source(source)
            topic = (
                f"{params.project}.{sp.namespace}.category"
                if source == "ems"
                else f"{params.project}.ecomm.sale"
            )
            topic_dir = bronze / topic
            known = {p.name for p in _visible(topic_dir, set())}
            latencies = []
            pg = stack.connect_postgres(sp.database, autocommit=True) if source == "ems" else None
            my = stack.connect_mariadb(sp.database, autocommit=True) if source == "ecomm" else None
            for i in range(args.changes):
                if pg is not None:
                    pg.execute("UPDATE ems.category SET catdesc = %s WHERE catid = 1", (f"bench {i}",))
                else:
                    assert my is not None
                    with my.cursor() as cur:
                        cur.execute("UPDATE sale SET qtysold = %s WHERE salesid = 1", (1 + i % 8,))
                committed = time.monotonic()
                while True:
                    new = _visible(topic_dir, known)
                    if new:
                        break
                    if time.monotonic() - committed > 30:
                        raise SystemExit(f"change {i} on {topic} not visible after 30 s")
                    time.sleep(0.002)
                latencies.append(time.monotonic() - committed)
                known.update(p.name for p in new)
            if pg is not None:
                pg.close()
            if my is not None:
                my.close()
            updates = [r for r in read_bronze(bronze, topic) if r["__op"] == "u"]
            assert len(updates) >= args.changes, f"{topic}: {len(updates)} updates in Bronze"
            q = statistics.quantiles(latencies, n=20)
            p50, p95 = statistics.median(latencies), q[18]
            verdict = "met" if p50 <= 0.5 and p95 <= 2 else "NOT met"
            print(f"| {sp.engine} ({source}) | {p50:.3f} | {p95:.3f} | {max(latencies):.3f} | {verdict} |")
    finally:
        if backend is not None:
            for spec in specs:
                backend.stop(spec.name)  # type: ignore[attr-defined]
        stop_all(stack.params)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
