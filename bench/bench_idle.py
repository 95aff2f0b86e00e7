"""What an idle pipeline costs (issue 30, target 5): CPU of the continuous Silver job and the
capture workers while nothing changes at the sources, and the job's memory.

Not a test. It runs notebooks 01 to 03 in a state directory of its own (free ports, a temporary
lake; ``tickit.scale`` 0.1 by default: an idle pipeline does not depend on how much it loaded),
then measures four times on the same running pipeline, ``--seconds`` each:

* **idle pacing** (the default parameters): once no round has taken a file for
  ``silver.idle_after_s``, the job starts a round every ``silver.idle_interval_watched_s``
  (Bronze is a local folder, whose file notices wake the job);
* **baseline, the idle pause as without notices**: the same job restarted with
  ``silver.idle_interval_watched_s`` at ``silver.idle_interval_s``, as the job paced before it
  relied on the notices;
* **baseline, a round every ``silver.min_interval_s``**: the same job restarted with
  ``silver.idle_after_s`` at a day, as the job ran before it had idle pacing;
* **baseline, capture workers without timer slack**: the workers restarted with
  ``capture.timer_slack_us`` 0 (the kernel's 50 µs; :class:`helpers.capture.backends.EmbeddedBackend`
  says what the slack saves), the job again with idle pacing.

CPU is each process tree's user and system time from ``/proc`` over the window (threads that ended
in it included), as a share of one core. Memory is the highest resident set of the job's Spark
driver JVM and of its Python, sampled every 5 s.

Run::

    .venv/bin/python bench/bench_idle.py                  # 300 s per window
    .venv/bin/python bench/bench_idle.py --seconds 120
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _targets import record  # noqa: E402

from helpers.capture.backends import worker_pids  # noqa: E402
from helpers.isolation import isolated_folder, isolated_overrides  # noqa: E402
from helpers.local.class_data import driver_java  # noqa: E402
from helpers.memory import descendants, process_parents, process_rss  # noqa: E402
from helpers.params import WorkbookParams, load_params  # noqa: E402
from helpers.pipeline import ensure_pipeline, stop_all  # noqa: E402
from helpers.proc import live_pid  # noqa: E402
from helpers.runner import run_workbook  # noqa: E402
from helpers.silver.job import SilverJob  # noqa: E402

TARGET_CPU = 2.0  # % of one core, the job and the capture workers together
TARGET_JVM_MIB = 1024.0
TICKS = os.sysconf("SC_CLK_TCK")


def _stat(path: Path) -> tuple[str, int] | None:
    """A ``/proc`` ``stat`` file's name and user + system ticks (None: the process or thread is
    gone)."""
    try:
        stat = path.read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return stat[stat.index("(") + 1 : stat.rindex(")")], int(fields[11]) + int(fields[12])
    except (OSError, ValueError, IndexError):
        return None


def _cpu_seconds(pids: set[int]) -> float:
    stats = [_stat(Path(f"/proc/{pid}/stat")) for pid in pids]
    return sum(s[1] for s in stats if s is not None) / TICKS


#: (pid, tid) -> ("process/thread" name, user + system ticks)
Threads = dict[tuple[int, int], tuple[str, int]]


def _thread_ticks(pids: set[int]) -> Threads:
    """Each live thread's (process name/thread name, user + system ticks), by (pid, tid)."""
    out = {}
    for pid in pids:
        process = _process_name(pid)
        for task in Path(f"/proc/{pid}/task").glob("*"):
            stat = _stat(task / "stat")
            if stat is not None:
                out[(pid, int(task.name))] = (f"{process}/{stat[0]}", stat[1])
    return out


def _by_thread(before: Threads, pids: set[int], seconds: float) -> list[tuple[str, float]]:
    """Share of one core per thread over the window (threads that ended in it are left out; the
    tree's total includes them), largest first. A JVM thread is named by what it runs as well
    (:func:`thread_owners`, asked once the window has ended); threads alike share a line."""
    shares: dict[str, float] = {}
    after = _thread_ticks(pids)  # before jcmd's attach, which costs its JVM some CPU
    owners = {pid: _java_thread_owners(pid) for pid in pids}
    for (pid, tid), (name, ticks) in after.items():
        used = ticks - before.get((pid, tid), (name, 0))[1]
        owner = owners.get(pid, {}).get(tid)
        label = f"{name} ({owner})" if owner else name
        shares[label] = shares.get(label, 0.0) + used / TICKS / seconds * 100
    return sorted(((n, v) for n, v in shares.items() if v > 0), key=lambda item: -item[1])


#: Frames of the JDK itself: a thread's own code is the first frame from the top outside these.
_JDK = ("java.", "javax.", "jdk.", "sun.", "com.sun.")
_HEADER = re.compile(r'^"(?P<name>.*)" .*\bnid=(?P<nid>0x[0-9a-f]+)')
_FRAME = re.compile(r"^\s+at (?P<method>[\w.$<>]+)\(")


def thread_owners(dump: str) -> dict[int, str]:
    """What each thread of a ``jcmd <pid> Thread.print`` dump runs, by native thread id (the
    ``/proc`` task id): its full Java name and its two topmost frames outside the JDK (class
    without package, then method), e.g. ``Thread-4: MeasurementCollector$MeasurementPublisher.run``.
    A thread with no frame of its own (an idle pool thread) gets its name only."""
    owners: dict[int, str] = {}
    tid: int | None = None
    name = ""
    frames: list[str] = []

    def close() -> None:
        if tid is not None:
            owners[tid] = f"{name}: {' < '.join(frames)}" if frames else name

    for line in dump.splitlines():
        header = _HEADER.match(line)
        if header:
            close()
            tid, name, frames = int(header["nid"], 16), header["name"], []
            continue
        frame = _FRAME.match(line)
        if tid is None or not frame or len(frames) == 2:
            continue
        method = frame["method"]
        if method.startswith(_JDK) or "$$Lambda" in method:
            continue
        cls, _, call = method.rpartition(".")
        frames.append(f"{cls.rsplit('.', 1)[-1]}.{call}")
    close()
    return owners


def _attachable(pid: int) -> bool:
    """Whether ``jcmd`` may ask ``pid`` without harm. It attaches through the JVM's listener
    socket, ``/tmp/.java_pid<pid>``, and where there is none yet it sends SIGQUIT for the JVM to
    open one, which ends a process whose JVM leaves that signal alone. So: a JVM whose listener
    already runs (a capture worker's JPype JVM starts it at once, since it runs with ``-Xrs``, and
    HotSpot does so for ``-Xrs``), or a ``java`` launcher's JVM without ``-Xrs`` (the Spark
    driver), which handles SIGQUIT itself."""
    if Path(f"/tmp/.java_pid{pid}").exists():
        return "libjvm.so" in Path(f"/proc/{pid}/maps").read_text()
    args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return Path(os.readlink(f"/proc/{pid}/exe")).name == "java" and b"-Xrs" not in args


def _java_thread_owners(pid: int) -> dict[int, str]:
    """:func:`thread_owners` of a running JVM; empty for a process that :func:`_attachable` leaves
    alone, or when ``jcmd`` fails."""
    java = driver_java()
    try:
        if java is None or not _attachable(pid):
            return {}
        dump = subprocess.run(
            [str(java.parent / "jcmd"), str(pid), "Thread.print"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return thread_owners(dump)


def _process_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _roots(params: WorkbookParams) -> dict[str, int]:
    """The job's and each capture worker's pid, by name."""
    roots = {f"capture {name}": pid for name, pid in worker_pids(params.state_path).items()}
    job = live_pid(params.state_path / "silver" / "job.pid")
    if job is None:
        raise SystemExit("the continuous Silver job is not running: no figures")
    roots["Silver job"] = job
    return roots


def measure(
    params: WorkbookParams, seconds: float
) -> tuple[dict[str, float], dict[str, float], dict[str, list[tuple[str, float]]]]:
    """CPU share of one core per process tree over ``seconds``; the job's peak RSS (MiB) per
    process name (``java``: the Spark driver; ``python``: the job's own loop); and each tree's
    share per thread (a JVM thread with its Java name and its topmost frames of its own)."""
    roots = _roots(params)
    parents = process_parents()
    trees = {name: descendants(pid, parents) for name, pid in roots.items()}
    threads_before = {name: _thread_ticks(pids) for name, pids in trees.items()}
    before = {name: _cpu_seconds(pids) for name, pids in trees.items()}
    started = time.monotonic()
    peak: dict[str, float] = {}
    while time.monotonic() - started < seconds:
        for pid in trees["Silver job"]:
            name = _process_name(pid)
            peak[name] = max(peak.get(name, 0.0), process_rss(pid) / 2**20)
        time.sleep(5)
    elapsed = time.monotonic() - started
    shares = {name: (_cpu_seconds(pids) - before[name]) / elapsed * 100 for name, pids in trees.items()}
    threads = {name: _by_thread(threads_before[name], pids, elapsed) for name, pids in trees.items()}
    return shares, peak, threads


def _print_threads(trees: dict[str, list[tuple[str, float]]]) -> None:
    """A table of each process tree's five largest threads (share of one core)."""
    print("| process | threads (share of one core) |")
    print("|---|---|")
    for name, threads in trees.items():
        top = ", ".join(f"`{thread}` {share:.2f} %" for thread, share in threads[:5])
        print(f"| {name} | {top} |")


def _restart_job(params: WorkbookParams, settle_s: float) -> None:
    job = SilverJob(params)
    job.stop()
    job.start()
    time.sleep(settle_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=0.1, help="tickit.scale")
    parser.add_argument("--seconds", type=float, default=300.0, help="length of each window")
    args = parser.parse_args()
    work = isolated_folder("wb-bench-idle-")
    overrides = {**isolated_overrides(work), "tickit.scale": args.scale}
    params = load_params("local", overrides)
    baseline_params = load_params("local", {**overrides, "silver.idle_after_s": 86_400})
    unwatched_params = load_params(
        "local", {**overrides, "silver.idle_interval_watched_s": params.silver.idle_interval_s}
    )
    no_slack_params = load_params("local", {**overrides, "capture.timer_slack_us": 0})
    try:
        result = run_workbook("local", overrides, only=["01", "02", "03"], progress=False)
        print(result.summary(), flush=True)
        if not result.ok:
            raise SystemExit("a notebook failed: no figures")
        # the job of notebook 03 runs with the defaults: wait until it paces as idle (and at least
        # two minutes: the capture workers' JVMs still compile their loops after notebook 03)
        _restart_job(params, max(params.silver.idle_after_s + 15, 120.0))
        paced, paced_peak, paced_threads = measure(params, args.seconds)
        _restart_job(unwatched_params, max(unwatched_params.silver.idle_after_s + 15, 75.0))
        unwatched, _, _ = measure(unwatched_params, args.seconds)
        _restart_job(baseline_params, 30)
        every, every_peak, _ = measure(baseline_params, args.seconds)
        ensure_pipeline(no_slack_params)  # the workers' configuration changed: each restarts
        _restart_job(no_slack_params, max(no_slack_params.silver.idle_after_s + 15, 120.0))
        no_slack, _, no_slack_threads = measure(no_slack_params, args.seconds)
    finally:
        stop_all(params)
        shutil.rmtree(work, ignore_errors=True)
    print(
        f"\nIdle pipeline at tickit.scale={args.scale}: CPU as a share of one core over {args.seconds:.0f} s "
        "per window, nothing changing at the sources\n"
    )
    print(
        f"| process | idle pacing (a round every {params.silver.idle_interval_watched_s:g} s, "
        f"woken by Bronze's notices) | baseline (a round every {params.silver.idle_interval_s:g} s once "
        f"idle) | baseline (a round every {params.silver.min_interval_s:g} s) | "
        "baseline (capture workers without timer slack) |"
    )
    print("|---|---|---|---|---|")
    windows = (unwatched, every, no_slack)
    for name in paced:
        others = " | ".join(f"{w.get(name, float('nan')):.2f} %" for w in windows)
        print(f"| {name} | {paced[name]:.2f} % | {others} |")
    total = sum(paced.values())
    total_unwatched, total_every, total_no_slack = (sum(w.values()) for w in windows)
    print(
        f"| **all together** (target <= {TARGET_CPU:g} %) | **{total:.2f} %** | {total_unwatched:.2f} % | "
        f"{total_every:.2f} % | {total_no_slack:.2f} % |"
    )
    for name in sorted(set(paced_peak) | set(every_peak)):
        rss = (paced_peak.get(name, 0.0), every_peak.get(name, 0.0))
        print(f"| Silver job peak RSS, {name} | {rss[0]:.0f} MiB | | {rss[1]:.0f} MiB | |")
    print("\nWhere the idle-pacing window's CPU went, by thread (the largest five of each process tree):\n")
    _print_threads(paced_threads)
    print("\nThe same without timer slack in the capture workers:\n")
    _print_threads({n: t for n, t in no_slack_threads.items() if n.startswith("capture")})
    if "java" not in paced_peak or "java" not in every_peak:
        raise SystemExit("the Silver job's Spark driver JVM was not found in its process tree: no JVM figure")
    jvm = max(paced_peak["java"], every_peak["java"])
    print(
        f"\nCPU target {'met' if total <= TARGET_CPU else 'NOT met'}; "
        f"job JVM <= {TARGET_JVM_MIB:.0f} MiB {'met' if jvm <= TARGET_JVM_MIB else 'NOT met'}"
    )
    record(
        "30.5",
        f"idle: the Silver job and the capture workers <= {TARGET_CPU:g} % of one core together",
        f"{total:.2f} % over {args.seconds:.0f} s",
        f"a round every {params.silver.idle_interval_s:g} s once idle: {total_unwatched:.2f} %; "
        f"every {params.silver.min_interval_s:g} s: {total_every:.2f} %; capture workers "
        f"without timer slack: {total_no_slack:.2f} %",
        total <= TARGET_CPU,
        limit='"An idle pipeline" ("What stops the 2 % target")',
    )
    record(
        "30.5",
        f"idle: the Silver job's Spark driver <= {TARGET_JVM_MIB:.0f} MiB",
        f"{jvm:.0f} MiB",
        f"a round every {params.silver.min_interval_s:g} s: {every_peak.get('java', 0.0):.0f} MiB",
        jvm <= TARGET_JVM_MIB,
    )


if __name__ == "__main__":
    main()
