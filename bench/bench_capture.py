"""Capture benchmark: source-commit-to-Bronze-visible latency and initial-snapshot throughput.

Not a test. Starts its own servers in a temporary state directory on free ports (``.state`` is
not touched), loads TICKIT at full scale, enables CDC as notebook 01 does, registers the embedded
connectors as notebook 02 does (default capture parameters: ``capture.flush_interval_ms``, 250), then

* snapshot throughput: rows of the initial snapshot per second, per connector, from the first
  registration call until every captured table's op=r count equals the source's count;
* latency: ``--changes`` (default 100) single-row commits per source, one at a time, each timed
  from the commit's return to the moment a Bronze file holding it is visible (the directory is
  polled every 2 ms); p50 / p95 / max per source, against the issue's targets
  (p50 <= 0.5 s, p95 <= 2 s);
* its baseline in the same run: the same changes after the source's connector is restarted from
  its offsets with a poll interval of ``--short-poll-ms`` (default 25; no new snapshot), then put
  back. The difference is the share of the engine's batching window (``capture.flush_interval_ms``)
  in the latency; what is left is Debezium's delivery and the Bronze write.

Run::

    .venv/bin/python bench/bench_capture.py                 # scale 1.0, 100 changes per source
    .venv/bin/python bench/bench_capture.py --scale 0.1 --changes 200
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import quantiles, source_to_bronze, temporary_params  # noqa: E402

from helpers.capture import connector_specs, open_backend  # noqa: E402
from helpers.capture.backends import wait_until_running  # noqa: E402
from helpers.sources.api import LocalSources  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--changes", type=int, default=100, help="single-row commits per source")
    parser.add_argument(
        "--short-poll-ms", type=int, default=25, help="the baseline's poll interval (the default is 250)"
    )
    args = parser.parse_args()

    with temporary_params("bench_capture_", {"tickit.scale": args.scale}) as params:
        sources = LocalSources(params)
        sources.start()
        sources.load_sample_data()
        sources.enable_cdc()
        counts = {(r.system, r.table): int(r.rows) for r in sources.row_counts().itertuples()}
        specs = connector_specs(params, LocalSources(params).endpoints())
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
        if len(done) < len(specs):
            late = sorted(s.name for s in specs if s.name not in done)
            raise SystemExit(f"the initial snapshot of {', '.join(late)} did not finish within 900 s")
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
        poll = params.capture.flush_interval_ms
        short_capture = params.capture.model_copy(update={"flush_interval_ms": args.short_poll_ms})
        short = open_backend(params.model_copy(update={"capture": short_capture}))
        print(f"\n## commit -> Bronze visible, {args.changes} single-row commits per source, one at a time")
        print(
            f"| source | p50 s | p95 s | max s | target p50 <= 0.5, p95 <= 2 "
            f"| baseline: poll every {args.short_poll_ms} ms instead of {poll}, p50 / p95 s |"
        )
        print("|---|---|---|---|---|---|")
        for source in ("ems", "ecomm"):
            spec = next(s for s in specs if s.name.endswith(f"-{source}"))
            wait_until_running(backend, spec.name, timeout_s=60)
            p50, p95, top = quantiles(source_to_bronze(params, source, args.changes))
            short.create_or_update(spec)  # restarted from its offsets: no new snapshot
            wait_until_running(short, spec.name, timeout_s=60)
            b50, b95, _ = quantiles(source_to_bronze(params, source, args.changes, first=args.changes))
            backend.create_or_update(spec)  # the default poll interval again
            verdict = "met" if p50 <= 0.5 and p95 <= 2 else "NOT met"
            engine = params.source(source).engine
            row = f"| {engine} ({source}) | {p50:.3f} | {p95:.3f} | {top:.3f} | {verdict}"
            print(f"{row} | {b50:.3f} / {b95:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
