"""The short conformance set (issue 30, target 1: notebook 07's short set in at most 30 s at full
scale): its scenarios side by side, sharing their ingestion rounds, against the baseline of every
scenario alone, one after another, on the same running pipeline in the same run.

Not a test. It runs notebooks 01 to 03 in a state directory of its own (free ports, a temporary
lake; ``tickit.scale`` 1.0 by default, the workbook's full scale), then runs the short set
``--repeat`` times each way, alternating (alone first), each into a Silver root of its own. For
each run: the wall time, the Hudi commits written into the variant tables (one per ingestion
round that took a file) and whether every scenario passed with its negative check detected.

``--parallel N`` adds a side-by-side run with ``silver.parallel_tables`` N (variant tables
ingested N at a time; the workbook's value is 2) beside the workbook's own.

What stops the target is printed beside it: the variants' Hudi commits, each timed from its
timeline, from its instant time (Hudi takes it as the write starts, before the index lookup) to
its completed file. Summed and divided by the variants written at a time
(``silver.parallel_tables``), that is the time the short set cannot go below on this machine
while every scenario writes its four variants; the rest of a run is the rounds' own Spark jobs
(the Bronze files' checks and counts, the tombstones), Hudi's work before and after its instant
(the write client, the clean), waiting for capture, and the comparisons.

Notebook 03's continuous Silver job runs throughout. The harness holds it for a run
(:mod:`helpers.silver.hold`), and the job takes the scenarios' changes to the workbook's own
tables after it: each run is also timed until the job has caught up (no Bronze file pending, its
first round after the run finished). One more way is the workbook's, the job not held (ingesting
beside the scenarios, as before the hold): the hold's baseline.

Run::

    .venv/bin/python bench/bench_conformance.py
    .venv/bin/python bench/bench_conformance.py --scale 0.01 --repeat 2 --parallel 8
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _targets import record  # noqa: E402

from helpers.checks.conformance import failed_scenarios, run_scenarios  # noqa: E402
from helpers.hudi.timeline import completed_instants  # noqa: E402
from helpers.instants import instant_to_datetime  # noqa: E402
from helpers.isolation import isolated_folder, isolated_overrides  # noqa: E402
from helpers.params import WorkbookParams, load_params  # noqa: E402
from helpers.pipeline import stop_all  # noqa: E402
from helpers.poll import wait_until  # noqa: E402
from helpers.runner import run_workbook  # noqa: E402
from helpers.silver.backend import wait_for_job_round  # noqa: E402
from helpers.silver.job import SilverJob, pending_lag  # noqa: E402

TARGET_S = 30.0


def _commits(root: Path) -> tuple[int, float]:
    """Completed commits and delta commits in every variant table under ``root``, and their
    summed seconds: each from its instant time to its completed file's modification time (the
    workbook writes instant times in UTC, ``hoodie.table.timeline.timezone``)."""
    count, seconds = 0, 0.0
    for table in sorted(root.iterdir()):
        if not (table / ".hoodie" / "hoodie.properties").exists():
            continue
        for instant in completed_instants(str(table), actions=("commit", "deltacommit")):
            count += 1
            seconds += max(0.0, instant.modified_time - instant_to_datetime(instant.timestamp).timestamp())
    return count, seconds


def _caught_up(params: WorkbookParams) -> float:
    """Seconds until the continuous job has finished a round after now and no Bronze file of the
    workbook's own tables is pending."""
    started = time.monotonic()
    job = SilverJob(params)
    wait_for_job_round(job)
    wait_until(
        lambda: all(t["pending_files"] == 0 for t in pending_lag(params).values()),
        timeout_s=300,
        what="the continuous job to take every Bronze file",
    )
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="tickit.scale")
    parser.add_argument("--repeat", type=int, default=1, help="runs each way, alternating")
    parser.add_argument(
        "--parallel",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="also run side by side with silver.parallel_tables N (repeatable)",
    )
    args = parser.parse_args()
    work = isolated_folder("wb-bench-conf-")
    overrides = {**isolated_overrides(work), "tickit.scale": args.scale}
    params = load_params("local", overrides)
    shared_way = f"side by side ({params.silver.parallel_tables} at a time)"
    unheld_way = f"{shared_way}, the job not held"
    ways = [
        ("alone", False, params, True),
        (shared_way, True, params, True),
        (unheld_way, True, params, False),
    ]
    for n in args.parallel:
        if n == params.silver.parallel_tables:
            continue  # the shared way already runs with n at a time: one column, one median
        other = params.model_copy(update={"silver": params.silver.model_copy(update={"parallel_tables": n})})
        ways.append((f"side by side ({n} at a time)", True, other, True))
    #: per way and run: seconds, commits, every scenario passed, the job's catch-up, Hudi's commits' seconds
    runs: dict[str, list[tuple[float, int, bool, float, float]]] = {way: [] for way, *_ in ways}
    try:
        result = run_workbook("local", overrides, only=["01", "02", "03"], progress=False)
        print(result.summary(), flush=True)
        if not result.ok:
            raise SystemExit("a notebook failed: no figures")
        for i in range(args.repeat):
            for j, (way, side_by_side, way_params, hold) in enumerate(ways):
                root = work / "conformance" / f"{i}-{j}"
                started = time.monotonic()
                frame = run_scenarios(
                    way_params, short=True, silver_root=root, side_by_side=side_by_side, hold_job=hold
                )
                seconds = time.monotonic() - started
                catch_up = _caught_up(params)
                ok = not failed_scenarios(frame) and bool((frame["negative_check"] == "detected").all())
                commits, hudi_s = _commits(root)
                runs[way].append((seconds, commits, ok, catch_up, hudi_s))
                print(
                    f"{way}: {seconds:.1f} s, then the job caught up in {catch_up:.1f} s; "
                    f"{commits} commits ({hudi_s:.1f} s of Hudi commits), all passed: {ok}",
                    flush=True,
                )
                if not ok:
                    failed = frame[frame["status"] != "passed"]
                    print(failed[["scenario", "silver_table", "detail"]].to_string())
    finally:
        stop_all(params)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nShort conformance set at tickit.scale={args.scale}, {args.repeat} run(s) each way\n")
    names = [way for way, *_ in ways]
    print(f"| figure | {' | '.join(names)} |")
    print(f"|---|{'---|' * len(ways)}")
    print(
        f"| seconds (median; target <= {TARGET_S:g} s) | "
        + " | ".join(f"{statistics.median(r[0] for r in runs[way]):.1f}" for way in names)
        + " |"
    )
    print(
        "| then the continuous job caught up (median s) | "
        + " | ".join(f"{statistics.median(r[3] for r in runs[way]):.1f}" for way in names)
        + " |"
    )
    print("| Hudi commits into the variants | " + " | ".join(str(runs[w][0][1]) for w in names) + " |")
    print(
        "| their summed seconds, instant time to completed file (median) | "
        + " | ".join(f"{statistics.median(r[4] for r in runs[way]):.1f}" for way in names)
        + " |"
    )
    print(
        "| every scenario passed, tampering detected | "
        + " | ".join(str(all(r[2] for r in runs[w])) for w in names)
        + " |"
    )
    print(f"\nthe workbook's way: {shared_way}; the others are baselines")
    shared = statistics.median(r[0] for r in runs[shared_way])
    passed = all(r[2] for r in runs[shared_way])
    met = shared <= TARGET_S and passed
    print(f"target {'met' if met else 'NOT met'}")
    at_a_time = params.silver.parallel_tables
    floor = statistics.median(r[4] for r in runs[shared_way]) / at_a_time
    print(
        f"the limit: the variants' Hudi commits alone, {at_a_time} at a time, take {floor:.1f} s "
        f"of the workbook's way's {shared:.1f} s"
    )
    alone = statistics.median(r[0] for r in runs["alone"])
    unheld = statistics.median(r[0] for r in runs[unheld_way])
    record(
        "30.1",
        f"short conformance set <= {TARGET_S:g} s at tickit.scale {args.scale:g}, tampered copies found",
        f"{shared:.1f} s {shared_way}, the job held, {runs[shared_way][0][1]} commits, every scenario "
        f"passed: {passed}; the Hudi commits alone, {at_a_time} at a time, {floor:.1f} s of it",
        f"the job not held {unheld:.1f} s; one at a time {alone:.1f} s, {runs['alone'][0][1]} commits",
        met,
        limit='"Where a short set\'s time goes", "The short set taken apart again"',
    )


if __name__ == "__main__":
    main()
