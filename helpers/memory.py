"""Memory of the workbook's processes, read through ``psutil``: one process's resident memory and
proportional set size, the process tree, the processes of a run (its descendants and every process
in or naming its state directory), and :class:`PeakMemory`, which samples their sum in the
background (the runner's per-notebook and whole-run peaks, the benchmarks').
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import NamedTuple

import psutil

__all__ = [
    "MemoryPeak",
    "PeakMemory",
    "descendants",
    "describe_makeup",
    "process_parents",
    "process_label",
    "process_pss",
    "process_rss",
    "workbook_processes",
]


def process_rss(pid: int) -> int:
    """Resident memory of a process in bytes (0 when it is gone)."""
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def process_pss(pid: int) -> int:
    """Proportional set size of a process in bytes (0 when it is gone): its resident memory with
    each page shared with other processes (a forked worker's copy-on-write pages, a shared library,
    PostgreSQL's shared buffers) counted as that page's share, so the sum over processes is the
    memory they use together. Reading it walks the process's page tables (``smaps_rollup``): tens
    of milliseconds for a large JVM, so :class:`PeakMemory` reads it less often than ``VmRSS``."""
    try:
        return int(psutil.Process(pid).memory_full_info().pss)
    except psutil.Error:
        return 0


#: a JVM's options whose value is the next argument (the main class is the first argument after them)
_JAVA_OPTIONS_WITH_VALUE = frozenset(
    {"-cp", "-classpath", "--class-path", "-jar", "--add-opens", "--add-exports"}
)


def process_label(pid: int) -> str:
    """A short name for what a process is, to group a run's memory by: a JVM's main class
    (``SparkSubmit``, ``CoarseGrainedExecutorBackend``, ``HiveMetaStore``, ``TrinoServer``), a
    Python process's module (``helpers.capture.worker``, ``pyspark.daemon``, ``ipykernel_launcher``)
    or script, else the executable's name (``postgres``, ``mariadbd``); ``"gone"`` if it ended. A
    process caught the moment it starts, before the kernel shows its arguments, is labelled by its
    name (``python``)."""
    try:
        proc = psutil.Process(pid)
        name, args = str(proc.name()), [str(arg) for arg in proc.cmdline()]
    except psutil.Error:
        return "gone"
    program = Path(args[0]).name if args else name
    if program == "java":
        after: str | None = None  # the option whose value this argument is
        for arg in args[1:]:
            if after == "-jar":
                return Path(arg).stem
            if after is None and not arg.startswith("-"):
                return arg.rsplit(".", 1)[-1]
            after = arg if after is None and arg in _JAVA_OPTIONS_WITH_VALUE else None
        return "java"
    if program.startswith("python"):
        # the interpreter's own options end at -m MODULE, -c COMMAND or the script
        for index, arg in enumerate(args[1:], start=1):
            if arg == "-m" and index + 1 < len(args):
                return args[index + 1]
            if arg == "-c":
                return "python -c"
            if not arg.startswith("-"):
                return Path(arg).name
        return "python"
    return name


def process_parents() -> dict[int, int]:
    """Every process's parent."""
    return {proc.pid: proc.info["ppid"] for proc in psutil.process_iter(["ppid"])}


def descendants(root_pid: int, parents: Mapping[int, int] | None = None) -> set[int]:
    """``root_pid`` and every process below it in the process tree."""
    parents = process_parents() if parents is None else parents
    found, frontier = {root_pid}, [root_pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in found]
        found.update(children)
        frontier.extend(children)
    return found


def workbook_processes(root_pid: int, state_dir: Path) -> set[int]:
    """The processes of a workbook run: ``root_pid`` and its :func:`descendants`, plus every
    process that runs in or names ``state_dir`` (the database servers, capture workers, the Silver
    job and the metastore detach from the process tree)."""
    marker = str(Path(state_dir).resolve())
    found: set[int] = set()
    parents: dict[int, int] = {}
    for proc in psutil.process_iter(["ppid", "cmdline", "cwd"]):  # one pass: the tree comes from it too
        parents[proc.pid] = proc.info["ppid"]
        cmdline = " ".join(proc.info["cmdline"] or ())
        cwd = proc.info["cwd"] or ""
        if marker in cmdline or cwd.startswith(marker):
            found.add(proc.pid)
    return found | descendants(root_pid, parents)


def _makeup(memory: Mapping[int, int], labels: Mapping[int, str]) -> list[tuple[str, int, int]]:
    """``memory`` (bytes per process) summed per label (:func:`process_label`): (label, processes,
    bytes), largest first."""
    groups: dict[str, list[int]] = {}
    for pid, size in memory.items():
        groups.setdefault(labels[pid], []).append(size)
    return sorted(((label, len(sizes), sum(sizes)) for label, sizes in groups.items()), key=lambda g: -g[2])


def describe_makeup(makeup: Iterable[tuple[str, int, int]], top: int = 6) -> str:
    """A :attr:`PeakMemory.makeup` in one line: the ``top`` largest groups, then the rest."""
    groups = list(makeup)
    shown = [f"{label}{f' x{n}' if n > 1 else ''} {size / 2**30:.2f}" for label, n, size in groups[:top]]
    rest = groups[top:]
    if rest:
        shown.append(f"{sum(c for _, c, _ in rest)} others {sum(s for _, _, s in rest) / 2**30:.2f}")
    return ", ".join(shown) + " GiB"


class MemoryPeak(NamedTuple):
    """The highest summed memory of a run's processes over a stretch of time, in bytes."""

    #: summed resident memory (``VmRSS``): a page shared by several processes counts once for each
    rss: int
    #: summed proportional set size (:func:`process_pss`): shared pages split between their sharers
    pss: int


class PeakMemory:
    """Samples the summed memory of a set of processes in a background thread: resident memory
    every ``interval_s``, and the proportional set size every ``pss_every``-th sample, whenever the
    resident sum passes its highest so far (at most every 2 s), and at each ``mark()``.
    The proportional set size costs more to read (:func:`process_pss`: about 80 ms of CPU for a
    running pipeline's 5 GiB, so every 4 s is 2 % of one core); ``pss_every=None`` reads none.

    ``peak`` is the highest of each since the start; ``mark()`` starts a new section and returns
    the previous section's peak (one section per notebook). ``makeup`` is the highest
    proportional sample taken apart: its sum for each :func:`process_label`, with how many
    processes have that label, largest first.
    """

    def __init__(
        self,
        state_dir: Path | None = None,
        interval_s: float = 0.5,
        root_pid: int | None = None,
        pss_every: int | None = 8,
        pids: Callable[[], Iterable[int]] | None = None,
    ) -> None:
        """Sample ``pids()`` if given, else :func:`workbook_processes` of ``root_pid`` (default: this
        process) and ``state_dir``.

        Raises:
            ValueError: with neither ``pids`` nor ``state_dir``, or ``pss_every`` below 1.
        """
        if pids is None:
            if state_dir is None:
                raise ValueError("PeakMemory needs a state directory or a function giving the processes")
            pids = functools.partial(workbook_processes, root_pid or os.getpid(), state_dir)
        if pss_every is not None and pss_every < 1:
            raise ValueError(f"PeakMemory's pss_every must be 1 or more (or None), not {pss_every}")
        self.pids = pids
        self.interval_s = interval_s
        self.pss_every = pss_every
        self.peak = MemoryPeak(0, 0)
        self.makeup: list[tuple[str, int, int]] = []  # (label, processes, bytes) at the peak
        self._section = MemoryPeak(0, 0)
        self._samples = 0
        self._last_pss = 0.0
        self._lock = threading.Lock()  # one sample at a time, so none straddles a mark()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)

    @property
    def peak_bytes(self) -> int:
        """The highest summed resident memory since the start."""
        return self.peak.rss

    def sample(self, pss: bool | None = None) -> int:
        """One measurement now, with the proportional set size when ``pss`` (by default: see the
        class); returns the summed resident memory in bytes."""
        with self._lock:
            return self._sample(pss)

    def _sample(self, pss: bool | None) -> int:
        pids = list(self.pids())
        resident = {pid: process_rss(pid) for pid in pids}
        total = sum(resident.values())
        self._samples += 1
        if pss is None and self.pss_every is not None:
            due = (self._samples - 1) % self.pss_every == 0
            high = total > self.peak.rss and time.monotonic() - self._last_pss >= 2.0
            pss = due or high
        proportional = 0
        if pss and self.pss_every is not None:
            self._last_pss = time.monotonic()
            # each process named before its size is read, so one that ends meanwhile keeps its name
            labels = {pid: process_label(pid) for pid in pids}
            # a process whose proportional size cannot be read counts with its resident memory
            each = {pid: process_pss(pid) or resident[pid] for pid in pids}
            proportional = sum(each.values())
            if proportional > self.peak.pss:
                self.makeup = _makeup(each, labels)
        self.peak = MemoryPeak(max(self.peak.rss, total), max(self.peak.pss, proportional))
        self._section = MemoryPeak(max(self._section.rss, total), max(self._section.pss, proportional))
        return total

    def mark(self) -> MemoryPeak:
        """The peak of the section that ends now; a new section starts."""
        with self._lock:
            self._sample(pss=True)
            peak, self._section = self._section, MemoryPeak(0, 0)
        return peak

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def start(self) -> PeakMemory:
        """Take the first sample and start sampling in the background."""
        self.sample(pss=True)
        self._thread.start()
        return self

    def stop(self) -> MemoryPeak:
        """Stop sampling after one last sample; the peak since the start."""
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample(pss=True)
        return self.peak

    def __enter__(self) -> PeakMemory:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
