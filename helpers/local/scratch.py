"""Scratch folders of the local Spark drivers, under the state directory instead of ``/tmp``.

A local driver keeps scratch files in Spark's local dir (``spark-*`` with its Python files and, in
the streamer runtime's Spark 3.4, a 107 MB copy of its jars; ``blockmgr-*``) and in the JVM's
temporary dir (the native libraries of lz4 and Snappy, Hive's ``<session>_resources`` folders,
which stay even after a normal exit: four per workbook run). Spark removes its own folders when
the driver stops, but a driver killed with ``kill -9`` (what the crash tests do, and what an
out-of-memory kill does) leaves them; one day of the project's tests left 280 ``spark-*`` folders,
2.3 GB, in ``/tmp``.

So each Python process that starts local drivers gives them one folder,
``<state_dir>/tmp/spark/<pid>-<start>`` (its pid and its start time, so that a reused pid is not
mistaken for it), and a folder is removed the next time a driver starts in that state directory
once nothing uses it: neither the process that made it nor any process whose command line names
it (a driver JVM can outlive the Python process that started it). Written here because Spark and
Hadoop clean only their own exits.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import psutil

from helpers.proc import identity_alive, process_identity

__all__ = ["SCRATCH_DIR", "driver_scratch", "scratch_conf"]

#: Under the state directory: one folder per Python process that starts local drivers.
SCRATCH_DIR = Path("tmp") / "spark"


def _named_by_a_process(folders: list[Path]) -> set[Path]:
    """Those of ``folders`` that a running process's command line names (``-Djava.io.tmpdir=``,
    ``spark.local.dir=``)."""
    named: set[Path] = set()
    for proc in psutil.process_iter(["cmdline"]):
        line = "\0".join(proc.info["cmdline"] or ())
        named.update(f for f in folders if str(f) in line)
    return named


def driver_scratch(state_path: Path) -> Path:
    """This process's scratch folder for local drivers under ``state_path`` (created), after the
    folders nothing uses any more are removed."""
    root = state_path / SCRATCH_DIR
    if root.is_dir():
        orphans = [entry for entry in root.iterdir() if not identity_alive(entry.name)]
        if orphans:
            in_use = _named_by_a_process(orphans)
            for entry in orphans:
                if entry not in in_use:
                    shutil.rmtree(entry, ignore_errors=True)
    folder = root / process_identity()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def scratch_conf(folder: str | Path, driver_options: str) -> dict[str, str]:
    """The Spark settings that put a local driver's scratch files in ``folder``: Spark's local dir,
    the JVM's temporary dir appended to ``driver_options`` (the driver's other JVM options), and
    Hadoop's (``hadoop.tmp.dir``, whose ``s3a`` folder holds the blocks of an upload to S3 while
    they are written: ``/tmp/hadoop-<user>`` by default). The workbook's own sessions
    (:func:`helpers.spark.spark_conf`) and the streamer runtime's ``spark-submit``
    (:mod:`helpers.silver.streamer`) both take them from here."""
    return {
        "spark.local.dir": str(folder),
        "spark.driver.extraJavaOptions": f"{driver_options} -Djava.io.tmpdir={folder}".strip(),
        "spark.hadoop.hadoop.tmp.dir": str(Path(folder) / "hadoop"),
    }
