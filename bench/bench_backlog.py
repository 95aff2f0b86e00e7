"""Silver first loads of growing Bronze backlogs: time, events/s and the driver's memory, beside the
old driver-side path measured in the same run; then the spread over a local Spark cluster.

Not a test. Bronze is a synthetic ``sale`` backlog written by the project's own Bronze writer
(:mod:`helpers.bronze.synthetic`, cached under ``.cache/bench/``), of about 0.45 M, 2.25 M and 9 M
events (the TICKIT ``sale`` table at scale 1, 5 and 20: 38 % of the events are the snapshot's
keys, then updates and deletes). Each first load of ``sale`` into an empty Silver table runs in a
driver process of its own, so its peak resident memory is its own:

* **now**: this tree's ingestion (the executors do the data work; ``local[2]``);
* **old path** (the baseline): the same call in a git worktree of ``--baseline`` (``09feb2d``, the
  last commit whose round read Bronze in the driver's Python), with the same jars and venv.

Per size: wall time of the round, events/s, the driver's Python peak RSS and the driver JVM's
peak heap (the sum of its heap pools' peaks). Goals: Python peak <= 0.5 GiB and flat within 10 %
across the sizes; >= 40,000 events/s at 9 M events.

**Spread** (unless ``--no-spread``): the 2.25 M backlog on the local standalone cluster
(:mod:`helpers.local.spark_cluster`) with one executor core, then two; goal: a speed-up >= 1.6x.
Measured twice: with the executors free on the machine, and confined to as many CPUs as they have
task slots (:func:`spread_run`).

Run::

    .venv/bin/python bench/bench_backlog.py                       # all sizes, both paths, spread
    .venv/bin/python bench/bench_backlog.py --sizes 450000 --no-spread
    .venv/bin/python bench/bench_backlog.py --sizes '' --baseline ''  # the spread alone
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.bronze.synthetic import write_sale_backlog  # noqa: E402
from helpers.local.spark_cluster import LocalSparkCluster  # noqa: E402
from helpers.params import load_params  # noqa: E402
from helpers.proc import free_port  # noqa: E402

BASELINE = "09feb2d"
KEYS_PER_EVENT = 172_456 / 450_341  # TICKIT sale rows per event of a full-scale Bronze
GOAL_RATE = 40_000.0
GOAL_PEAK_GIB = 0.5
GOAL_SPREAD = 1.6
CACHE = ROOT / ".cache" / "bench"

#: The driver of one round, run with ``python -c`` in the tree under test (old and new alike).
ROUND = r"""
import json, resource, sys, time
import helpers
from helpers.params import load_params
from helpers.silver.ingest import ingest_table
from helpers.spark import build_spark_session
overrides = json.loads(sys.argv[1])
params = load_params("local", overrides=overrides)
spark = build_spark_session(params, app_name="bench-backlog")
jvm = spark.sparkContext._jvm
table = next(t for t in params.silver.tables if t.name == "sale")
started = time.monotonic()
result = ingest_table(params, table, spark=spark)
seconds = time.monotonic() - started
heap = 0
for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
    if str(pool.getType()) == "Heap memory":
        heap += pool.getPeakUsage().getUsed()
print(json.dumps({"events": result.events, "seconds": seconds, "instant": result.instant,
                  "helpers": helpers.__file__,
                  "python_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "jvm_heap_peak": heap}))
"""


def backlog(events: int) -> Path:
    """The cached Bronze zone of a backlog of ``events`` (written on first use)."""
    folder = CACHE / f"backlog-{events}"
    done = folder / ".complete"
    if not done.exists():
        shutil.rmtree(folder, ignore_errors=True)
        started = time.monotonic()
        summary = write_sale_backlog(folder / "bronze", events=events, keys=int(events * KEYS_PER_EVENT))
        done.write_text(json.dumps(summary.__dict__))
        print(
            f"  wrote {summary.files} Bronze files of {events:,} events in {time.monotonic() - started:.0f} s"
        )
    return folder / "bronze"


def baseline_tree(commit: str) -> Path:
    """A detached git worktree of ``commit`` (the old path), created once under ``.cache/``, with
    the jars that commit pins: this tree's jars linked into its own ``.jars`` (the same files), and
    what only it pins (the Derby jars of its metastore) fetched by its own ``scripts/fetch_jars.sh``
    from Maven Central, checked against its ``scripts/jars.tsv``."""
    tree = CACHE / f"tree-{commit}"
    if not (tree / "helpers").exists():
        subprocess.run(["git", "worktree", "prune"], cwd=ROOT, check=True)
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT, check=True)
    jars = tree / ".jars"
    if jars.is_symlink():  # a worktree made before the old tree fetched its own jars
        jars.unlink()
    jars.mkdir(exist_ok=True)
    for entry in (ROOT / ".jars").iterdir():
        if not (jars / entry.name).exists() and not (jars / entry.name).is_symlink():
            (jars / entry.name).symlink_to(entry)
    env = {**os.environ, "WORKBOOK_M2": str(ROOT / ".cache" / "m2")}
    subprocess.run(["bash", "scripts/fetch_jars.sh", "spark", "metastore"], cwd=tree, env=env, check=True)
    return tree


def one_round(
    tree: Path, bronze: Path, work: Path, extra: dict[str, object] | None = None
) -> dict[str, float]:
    """A first load of ``sale`` from ``bronze`` into an empty Silver under ``work``, by the code of
    ``tree``, in a driver process of its own."""
    silver = work / "silver"
    shutil.rmtree(silver, ignore_errors=True)
    overrides = {
        "state_dir": str(work / "st"),
        "lake.bronze": str(bronze),
        "lake.silver": str(silver),
        "spark.catalog": "none",
        "silver.sync": False,
        "silver.max_files_per_round": 100_000,
        **(extra or {}),
    }
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run(
        [sys.executable, "-c", ROUND, json.dumps(overrides)],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"round failed in {tree}:\n{proc.stderr[-3000:]}")
    report: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    if not str(report["helpers"]).startswith(str(tree)):
        raise SystemExit(f"the round ran {report['helpers']}, not the code of {tree}")
    shutil.rmtree(silver, ignore_errors=True)
    return report


def _gib(value: float) -> str:
    return f"{value / 2**30:.2f} GiB"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="450000,2250000,9000000", help="backlog sizes in events")
    parser.add_argument("--baseline", default=BASELINE, help="commit of the old path ('' for none)")
    parser.add_argument("--no-spread", action="store_true", help="skip the cluster spread")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    work = Path(tempfile.mkdtemp(prefix="wb-bench-backlog-", dir="/tmp"))
    trees = {"now": ROOT}
    if args.baseline:
        trees["old path"] = baseline_tree(args.baseline)
    rows = []
    try:
        for events in sizes:
            bronze = backlog(events)
            for label, tree in trees.items():
                report = one_round(tree, bronze, work / label.replace(" ", "-"))
                rows.append((events, label, report))
                print(
                    f"  {events:>10,} events  {label:<9} {report['seconds']:7.1f} s "
                    f"{report['events'] / report['seconds']:>9,.0f} ev/s  "
                    f"python {_gib(report['python_peak'])}  jvm heap {_gib(report['jvm_heap_peak'])}",
                    flush=True,
                )
        if rows:
            print("\n## Backlog scaling: first load of sale into an empty Silver table (local[2])\n")
            print("| events | path | seconds | events/s | driver Python peak | driver JVM heap peak |")
            print("|---|---|---|---|---|---|")
        for events, label, r in rows:
            print(
                f"| {events:,} | {label} | {r['seconds']:.1f} | {r['events'] / r['seconds']:,.0f} | "
                f"{_gib(r['python_peak'])} | {_gib(r['jvm_heap_peak'])} |"
            )
        now = [r for _, label, r in rows if label == "now"]
        if now:
            peaks = [r["python_peak"] for r in now]
            spread = (max(peaks) - min(peaks)) / min(peaks)
            biggest = now[-1]
            rate = biggest["events"] / biggest["seconds"]
            print(
                f"\ndriver Python peak: {_gib(max(peaks))} at most, {spread:.1%} apart "
                f"(goal <= {GOAL_PEAK_GIB} GiB, flat within 10 %: "
                f"{'met' if max(peaks) <= GOAL_PEAK_GIB * 2**30 and spread <= 0.10 else 'NOT met'})"
            )
            print(
                f"events/s at {sizes[-1]:,}: {rate:,.0f} (goal >= {GOAL_RATE:,.0f}: "
                f"{'met' if rate >= GOAL_RATE else 'NOT met'})"
            )
        if not args.no_spread:
            spread_run(work, backlog(2_250_000))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _confine(pid: int, cpus: set[int]) -> None:
    """Set the CPU affinity of every thread of process ``pid`` (an affinity is a thread's own; the
    executors the worker launches are forked by one of its threads, and inherit that one's)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except (ProcessLookupError, FileNotFoundError):  # a thread that ended meanwhile
            continue


def spread_run(work: Path, bronze: Path) -> None:
    """The 2.25 M backlog on the local standalone cluster: one executor core, then two; twice.

    First as Spark counts cores (``spark.cores.max`` task slots, the executors free to use the
    whole machine), then with each executor confined to as many of the machine's CPUs as it has
    task slots: the worker's CPU affinity is set before the round, and the executor JVMs it
    launches, with their Python workers, inherit it, so that one executor core also means one CPU
    (free, a task's JVM thread and its Python worker use both CPUs of a two-core machine). The
    driver (metadata only) is not confined either way."""
    port = free_port()
    overrides = {
        "state_dir": str(work / "cluster-st"),
        "local.spark.port": port,
        "local.spark.web_port": free_port(),
        "local.spark.worker_web_port": free_port(),
        "local.spark.worker_cores": 2,
        "local.spark.worker_memory": "3g",
        "local.spark.executor_memory": "1400m",
    }
    params = load_params("local", overrides=overrides)
    cluster = LocalSparkCluster(params)
    cluster.start()
    worker = cluster.pids()["worker"]
    cpus = sorted(os.sched_getaffinity(0))
    timings: dict[tuple[int, bool], float] = {}
    try:
        for pinned in (False, True):
            for cores in (1, 2):
                if worker is not None:
                    _confine(worker, set(cpus[:cores]) if pinned else set(cpus))
                extra = {
                    **overrides,
                    "spark.master": cluster.url,
                    "spark.conf": {"spark.cores.max": str(cores), "spark.executor.cores": "1"},
                }
                report = one_round(ROOT, bronze, work / f"spread-{cores}-{int(pinned)}", extra)
                timings[cores, pinned] = report["seconds"]
                how = f"confined to {cores} CPU(s)" if pinned else "free on the machine"
                print(f"  cluster, {cores} executor core(s), {how}: {report['seconds']:.1f} s", flush=True)
    finally:
        cluster.stop()
    print("\n## Spread: 2.25 M events on the local standalone cluster\n")
    print(
        f"| executor cores | executors free on the {len(cpus)} CPUs | speed-up | executors confined "
        "to as many CPUs | speed-up |"
    )
    print("|---|---|---|---|---|")
    print(f"| 1 (baseline) | {timings[1, False]:.1f} s | 1.00x | {timings[1, True]:.1f} s | 1.00x |")
    free, confined = timings[1, False] / timings[2, False], timings[1, True] / timings[2, True]
    verdict = "met" if confined >= GOAL_SPREAD else "NOT met"
    print(
        f"| 2 | {timings[2, False]:.1f} s | {free:.2f}x | {timings[2, True]:.1f} s | "
        f"{confined:.2f}x (goal >= {GOAL_SPREAD}x: {verdict}) |"
    )


if __name__ == "__main__":
    sys.exit(main())
