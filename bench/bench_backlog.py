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
Two slots as one executor of two cores (the goal's figure) and as two executors of one core.
Measured twice: with the executors free on the machine, and confined to as many CPUs as they have
task slots (:func:`spread_run`). Each round keeps Spark's event log, read back to show how long
0, 1 and 2 tasks ran at once, and the driver's and the machine's CPU seconds (:class:`RunProfile`).

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
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _targets import record  # noqa: E402

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
import psutil
import helpers
from helpers.params import load_params
from helpers.silver.ingest import ingest_table
from helpers.spark import build_spark_session
overrides = json.loads(sys.argv[1])
params = load_params("local", overrides=overrides)
spark = build_spark_session(params, app_name="bench-backlog")
jvm = spark.sparkContext._jvm
table = next(t for t in params.silver.tables if t.name == "sale")
def cpu():  # (this driver's Python and JVM, the whole machine): CPU seconds so far
    me = psutil.Process()
    driver = sum(sum(p.cpu_times()[:2]) for p in [me, *me.children(recursive=True)])  # user, system
    machine = psutil.cpu_times()
    return driver, machine.user + machine.nice + machine.system + machine.irq + machine.softirq
cpu_before, window_from = cpu(), time.time()
started = time.monotonic()
result = ingest_table(params, table, spark=spark)
seconds = time.monotonic() - started
cpu_after, window_to = cpu(), time.time()
heap = 0
for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
    if str(pool.getType()) == "Heap memory":
        heap += pool.getPeakUsage().getUsed()
spark.stop()  # closes the event log, when the round keeps one
print(json.dumps({"events": result.events, "seconds": seconds, "instant": result.instant,
                  "helpers": helpers.__file__,
                  "python_peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "jvm_heap_peak": heap, "window_ms": [window_from * 1000, window_to * 1000],
                  "driver_cpu": cpu_after[0] - cpu_before[0],
                  "machine_cpu": cpu_after[1] - cpu_before[1]}))
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


def one_round(tree: Path, bronze: Path, work: Path, extra: dict[str, object] | None = None) -> dict[str, Any]:
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
    report: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
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
            old = [r for _, label, r in rows if label == "old path"]
            was = (
                f"old path {', '.join(_gib(r['python_peak']) for r in old)}"
                if old
                else "no old path this run"
            )
            record(
                "25",
                f"driver Python peak <= {GOAL_PEAK_GIB} GiB, flat within 10 % "
                f"({', '.join(f'{e:,}' for e in sizes)} events)",
                f"{_gib(max(peaks))} at most, {spread:.1%} apart",
                was,
                max(peaks) <= GOAL_PEAK_GIB * 2**30 and spread <= 0.10,
            )
            old_rate = [r["events"] / r["seconds"] for r in old[-1:]]
            record(
                "25",
                f">= {GOAL_RATE:,.0f} events/s at the largest backlog",
                f"{rate:,.0f} events/s at {sizes[-1]:,} events",
                f"old path {old_rate[0]:,.0f} events/s" if old_rate else "no old path this run",
                rate >= GOAL_RATE,
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


#: One CPU's fixed work for :func:`machine_spread`: a Python loop of about two seconds here.
_BURN = "x = 0\nfor i in range(25_000_000):\n    x += i * i\n"


def _burn(cpus: Sequence[int]) -> float:
    """Wall seconds of one :data:`_BURN` on each of ``cpus`` at once, each process on its own CPU."""
    started = time.monotonic()
    procs = []
    for cpu in cpus:
        proc = subprocess.Popen([sys.executable, "-c", _BURN])  # noqa: S603 - fixed argv
        os.sched_setaffinity(proc.pid, {cpu})
        procs.append(proc)
    for proc in procs:
        proc.wait()
    return time.monotonic() - started


def machine_spread(cpus: Sequence[int]) -> float:
    """What the machine's first two CPUs give at this moment: the same CPU-bound work on each of
    them at once against on one alone (2 x the time alone over the time of the pair; 2.0 when
    the second CPU is as free as the first). A shared machine's second CPU is not always that,
    and the spread's goal is set against two whole CPUs, so the benchmark measures them in the
    same run, before and after its rounds."""
    alone = (_burn(cpus[:1]) + _burn(cpus[:1])) / 2
    return 2 * alone / _burn(cpus[:2])


#: the spread's executor layouts: (task slots, executors); one slot, then two in one executor
#: (the goal's figure: an executor's cores, as on EMR), then two executors of one slot each
LAYOUTS = ((1, 1), (2, 1), (2, 2))


def _layout(slots: int, executors: int) -> str:
    if executors == 1:
        return f"one executor of {slots} core{'s' if slots > 1 else ''}"
    return f"{executors} executors of {slots // executors} core each"


def spread_run(work: Path, bronze: Path) -> None:
    """The 2.25 M backlog on the local standalone cluster in each of :data:`LAYOUTS`; twice.

    First as Spark counts cores (``spark.cores.max`` task slots, the executors free to use the
    whole machine), then with the executors confined to as many of the machine's CPUs as they have
    task slots: the worker's CPU affinity is set before the round, and the executor JVMs it
    launches, with their Python workers, inherit it, so that one executor core also means one CPU
    (free, a task's JVM thread and its Python worker use both CPUs of a two-core machine). The
    driver is not confined either way. Each round keeps Spark's event log, and
    :func:`print_profiles` shows where its time went."""
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
    profiles: dict[tuple[int, int, bool], RunProfile] = {}
    machine = [machine_spread(cpus)]
    print(f"  the machine's own two CPUs before the rounds: {machine[0]:.2f}x", flush=True)
    try:
        for pinned in (False, True):
            for slots, executors in LAYOUTS:
                if worker is not None:
                    _confine(worker, set(cpus[:slots]) if pinned else set(cpus))
                name = f"{slots}-{executors}-{int(pinned)}"
                events = work / f"events-{name}"
                events.mkdir(parents=True)
                extra = {
                    **overrides,
                    "spark.master": cluster.url,
                    "spark.conf": {
                        "spark.cores.max": str(slots),
                        "spark.executor.cores": str(slots // executors),
                        "spark.eventLog.enabled": "true",
                        "spark.eventLog.dir": events.as_uri(),
                    },
                }
                report = one_round(ROOT, bronze, work / f"spread-{name}", extra)
                profiles[slots, executors, pinned] = RunProfile.read(events, report)
                how = f"confined to {slots} CPU(s)" if pinned else "free on the machine"
                print(f"  cluster, {_layout(slots, executors)}, {how}: {report['seconds']:.1f} s", flush=True)
    finally:
        cluster.stop()
    machine.append(machine_spread(cpus))
    print("\n## Spread: 2.25 M events on the local standalone cluster\n")
    print(
        f"| task slots | executors | free on the {len(cpus)} CPUs | speed-up | confined to as many CPUs "
        "as slots | speed-up |"
    )
    print("|---|---|---|---|---|---|")
    for slots, executors in LAYOUTS:
        free, confined = profiles[slots, executors, False], profiles[slots, executors, True]
        gains = [profiles[1, 1, pinned].wall_s / p.wall_s for pinned, p in ((False, free), (True, confined))]
        goal = ""
        if (slots, executors) == (2, 1):
            goal = f" (goal >= {GOAL_SPREAD}x: {'met' if gains[1] >= GOAL_SPREAD else 'NOT met'})"
        print(
            f"| {slots}{' (baseline)' if slots == 1 else ''} | {_layout(slots, executors)} | "
            f"{free.wall_s:.1f} s | {gains[0]:.2f}x | {confined.wall_s:.1f} s | {gains[1]:.2f}x{goal} |"
        )
    bound = [
        len(cpus) / (profiles[1, 1, pinned].machine_cpu_s / profiles[1, 1, pinned].wall_s)
        for pinned in (False, True)
    ]
    one, two = profiles[1, 1, True], profiles[2, 1, True]
    record(
        "25",
        f"spread >= {GOAL_SPREAD}x, 2.25 M events, one executor core then two (confined to as many CPUs)",
        f"{one.wall_s / two.wall_s:.2f}x ({two.wall_s:.1f} s; bound {bound[1]:.2f}x)",
        f"one executor core {one.wall_s:.1f} s; the machine's own two CPUs "
        f"{machine[0]:.2f}x before, {machine[1]:.2f}x after",
        one.wall_s / two.wall_s >= GOAL_SPREAD,
        limit='"The spread job by job"',
    )
    print(
        f"\nThe most {len(cpus)} CPUs allow, if the work stayed the same: the one-slot round's CPU seconds "
        f"(driver and executors) over {len(cpus)} CPUs: free {bound[0]:.2f}x, confined {bound[1]:.2f}x"
    )
    print(
        "The machine's own first two CPUs in the same run (one CPU-bound Python process on each at "
        f"once, against one alone, the same work each; 2.00x: the second CPU as free as the first): "
        f"{machine[0]:.2f}x before the rounds, {machine[1]:.2f}x after"
    )
    print_profiles(profiles, len(cpus))


@dataclass(frozen=True)
class JobRun:
    """One Spark job of a round: the driver's time alone before it (since the previous job ended,
    or the round began), its own wall time, and its tasks' count and summed run time."""

    name: str
    gap_s: float
    seconds: float
    tasks: int
    task_s: float


@dataclass(frozen=True)
class RunProfile:
    """Where one cluster round's wall time went, from Spark's own event log and ``/proc``.

    The round's window is the driver's ``ingest_table`` call. From the event log's task ends
    (launch and finish time of each task): how long 0, 1, 2 ... tasks were running at once, and
    how much of the window had no Spark job at all (the driver alone, between jobs). From ``/proc``
    (the round's own figures): the CPU seconds of the driver (its Python and JVM) and of the
    whole machine over the window; the machine's less the driver's is the executors' (their JVMs
    and Python workers), on a machine with nothing else running."""

    wall_s: float
    running: dict[int, float]  # tasks running at once -> seconds of the window
    no_job_s: float  # seconds of the window with no Spark job running
    driver_cpu_s: float
    machine_cpu_s: float
    stages: list[tuple[float, int, str]]  # (seconds, tasks, name), longest first
    jobs: list[JobRun]  # in the order they started

    @classmethod
    def read(cls, folder: Path, report: dict[str, Any]) -> RunProfile:
        start, end = report["window_ms"]
        logs = [f for f in folder.iterdir() if f.is_file()]
        if len(logs) != 1:
            raise SystemExit(f"expected one Spark event log in {folder}, found {[f.name for f in logs]}")
        edges: list[tuple[float, int]] = []
        jobs: dict[int, list[float]] = {}
        names: dict[int, str] = {}
        stage_job: dict[int, int] = {}
        task_s: dict[int, list[float]] = {}  # job -> [tasks, task seconds]
        stages: list[tuple[float, int, str]] = []
        with logs[0].open(encoding="utf-8") as lines:
            for line in lines:
                event = json.loads(line)
                kind = event["Event"]
                if kind == "SparkListenerTaskEnd":
                    info = event["Task Info"]
                    edges += [(info["Launch Time"], 1), (info["Finish Time"], -1)]
                    done = task_s.setdefault(stage_job.get(event["Stage ID"], -1), [0, 0.0])
                    done[0] += 1
                    done[1] += (info["Finish Time"] - info["Launch Time"]) / 1000
                elif kind == "SparkListenerJobStart":
                    jobs[event["Job ID"]] = [event["Submission Time"], end]
                    infos = event["Stage Infos"]
                    names[event["Job ID"]] = infos[-1]["Stage Name"].split(" at ")[0] if infos else "?"
                    stage_job.update({stage: event["Job ID"] for stage in event["Stage IDs"]})
                elif kind == "SparkListenerJobEnd":
                    jobs[event["Job ID"]][1] = event["Completion Time"]
                elif kind == "SparkListenerStageCompleted":
                    info = event["Stage Info"]
                    seconds = (info["Completion Time"] - info["Submission Time"]) / 1000
                    stages.append((seconds, info["Number of Tasks"], info["Stage Name"].split(" at ")[0]))
        running: dict[int, float] = {}
        level, previous = 0, start
        for at, step in sorted(edges):
            at = min(max(at, start), end)
            running[level] = running.get(level, 0.0) + (at - previous) / 1000
            level, previous = level + step, at
        running[level] = running.get(level, 0.0) + (end - previous) / 1000
        # the jobs in the order they started; the window's time with none running is the sum of
        # the gaps before each (clipped to the window) and after the last
        runs, reach, alone = [], start, 0.0
        for job, (begin, finish) in sorted(jobs.items(), key=lambda item: item[1][0]):
            gap = max(0.0, min(begin, end) - reach)
            tasks, seconds = task_s.get(job, [0, 0.0])
            runs.append(JobRun(names[job], gap / 1000, (finish - begin) / 1000, int(tasks), seconds))
            alone, reach = alone + gap, max(reach, min(finish, end))
        alone += end - reach
        return cls(
            wall_s=(end - start) / 1000,
            running=running,
            no_job_s=alone / 1000,
            driver_cpu_s=float(report["driver_cpu"]),
            machine_cpu_s=float(report["machine_cpu"]),
            stages=sorted(stages, reverse=True),
            jobs=runs,
        )


def print_profiles(profiles: dict[tuple[int, int, bool], RunProfile], cpus: int) -> None:
    """The spread's rounds side by side: what ran in parallel, and what the CPUs did."""
    print("\n## Where the spread's time went (Spark's event log; CPU from /proc)\n")
    print(
        "| task slots | executors | CPUs | wall | no Spark job (driver alone) | 0 tasks | 1 task | "
        "2 tasks | busy CPUs, whole machine | of which the driver | the executors | CPU seconds |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = sorted(profiles.items(), key=lambda item: (item[0][2], item[0][0], item[0][1]))
    for (slots, executors, pinned), p in rows:
        shares = [p.running.get(n, 0.0) / p.wall_s for n in (0, 1)]
        shares.append(sum(s for n, s in p.running.items() if n >= 2) / p.wall_s)
        where = f"confined to {slots}" if pinned else f"free on {cpus}"
        print(
            f"| {slots} | {_layout(slots, executors)} | {where} | "
            f"{p.wall_s:.1f} s | {p.no_job_s:.1f} s | {shares[0]:.0%} | {shares[1]:.0%} | {shares[2]:.0%} | "
            f"{p.machine_cpu_s / p.wall_s:.2f} | {p.driver_cpu_s / p.wall_s:.2f} | "
            f"{(p.machine_cpu_s - p.driver_cpu_s) / p.wall_s:.2f} | {p.machine_cpu_s:.0f} |"
        )
    for (slots, executors, pinned), p in rows:
        longest = "; ".join(f"{name} {sec:.1f} s ({tasks} tasks)" for sec, tasks, name in p.stages[:5])
        how = "confined" if pinned else "free"
        print(f"\n{_layout(slots, executors)}, {how}: longest stages: {longest}")
    print_jobs(profiles.get((1, 1, True)), profiles.get((2, 1, True)))


def print_jobs(one: RunProfile | None, two: RunProfile | None) -> None:
    """The confined one-slot and two-slot rounds job by job: what each job gained from the second
    slot, how much longer its tasks ran side by side (their summed run time), and the driver's
    time alone before each job, which a second slot cannot shorten."""
    if one is None or two is None:
        return
    if [j.name for j in one.jobs] != [j.name for j in two.jobs]:
        print("\nJob by job: the two rounds ran different jobs, not compared")
        return
    print("\n## The spread job by job (one executor, confined: one core, then two)\n")
    print("| job | tasks | driver alone before it | 1 slot | 2 slots | speed-up | task seconds, 1 / 2 |")
    print("|---|---|---|---|---|---|---|")
    for a, b in zip(one.jobs, two.jobs, strict=True):
        gain = f"{a.seconds / b.seconds:.2f}x" if b.seconds > 0 else "-"
        print(
            f"| {a.name} | {a.tasks} | {a.gap_s:.2f} / {b.gap_s:.2f} s | {a.seconds:.2f} s | "
            f"{b.seconds:.2f} s | {gain} | {a.task_s:.2f} / {b.task_s:.2f} s |"
        )
    jobs = [sum(j.seconds for j in p.jobs) for p in (one, two)]
    tasks = [sum(j.task_s for j in p.jobs) for p in (one, two)]
    print(
        f"\nThe jobs alone: {jobs[0]:.1f} s, then {jobs[1]:.1f} s ({jobs[0] / jobs[1]:.2f}x); their tasks "
        f"ran {tasks[0]:.1f} s, then {tasks[1]:.1f} s ({tasks[1] / tasks[0] - 1:+.0%} side by side); no "
        f"Spark job at all (the driver alone) {one.no_job_s:.1f} s and {two.no_job_s:.1f} s"
    )


if __name__ == "__main__":
    sys.exit(main())
