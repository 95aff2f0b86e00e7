"""The class-data sharing (CDS) archive of local Spark drivers: the JVM maps the classes of Spark,
Hudi and their libraries, already parsed and verified, from one file instead of loading some 19,000
classes from jars at every start. The local cluster's executors map it too: its worker starts them
with the driver's class path (the project jars, then Spark's own), which the archive's check accepts.

A cold local driver that writes two tiny Hudi commits and reads one back used 20.0-21.8 s of CPU
(start 3.3-3.6 s) without the set-up's archive and 13.8-16.2 s with it (start 1.7-2.3 s), runs
alternated on this machine kind (throwaway script, three runs each). Every notebook kernel,
continuous Silver job and test session starts such a JVM.

The archive is made by the set-up (``scripts/bootstrap.sh`` runs :mod:`helpers.warmup`):
a training driver records the classes it loads (``-XX:DumpLoadedClassList``) while it runs a short
Silver round, then the same ``java`` writes the archive (``-Xshare:dump``) for the driver's class
path. It lives in the git-ignored ``.cache/cds/<key>/``: the key digests the ``java`` binary, the
project jars and pyspark's jars (their paths, sizes and modification times), so a changed jar or JDK
has no archive until the next set-up, and its drivers simply load their classes from the jars. The
JVM checks the class path and the jars again when it maps the archive and, on any mismatch, runs
without it (``-Xshare:auto``, Java's default).

Written here because no component does it: Spark has no setting for it, and Java 17 makes a
dynamic archive only at a normal exit, which a PySpark driver does not reach (its launcher ends it).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from helpers.errors import SparkSetupError
from helpers.local.cache import WORK_PREFIX, drop_others, files_key, publish_folder
from helpers.params import project_root

__all__ = ["ARCHIVE", "CACHE", "archive_for", "archive_key", "driver_java", "publish_archive"]

#: Where the archives live, under the project root (git-ignored).
CACHE = Path(".cache") / "cds"
#: The archive's file name in its key's folder (present only once complete: the folder is moved
#: into place whole).
ARCHIVE = "spark-driver.jsa"


def driver_java() -> Path | None:
    """The ``java`` that ``spark-submit`` starts: ``$JAVA_HOME/bin/java``, else the one on the
    ``PATH`` (its real path), else None."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def _pyspark_jars() -> list[Path]:
    import pyspark  # the driver's own Spark: its jars are most of the class path

    folder = Path(pyspark.__file__).parent / "jars"
    return sorted(folder.glob("*.jar"))


def archive_key(jars: Sequence[str], java: Path) -> str:
    """A digest of what the archive was made for: ``java``, the project ``jars`` (in order) and
    pyspark's jars, each with its size and modification time."""
    return files_key([java, *map(Path, jars), *_pyspark_jars()])


def archive_for(jars: Sequence[str]) -> Path | None:
    """The archive made for a local driver with these project ``jars`` on its class path, or None
    (none made yet, no ``java``, or a jar gone)."""
    java = driver_java()
    if java is None:
        return None
    try:
        key = archive_key(jars, java)
    except OSError:
        return None
    archive = project_root() / CACHE / key / ARCHIVE
    return archive if archive.is_file() else None


def publish_archive(jars: Sequence[str], class_list: Path, classpath: str, java: Path) -> Path:
    """Write the archive of ``class_list`` for ``classpath`` with ``java`` (``-Xshare:dump``) and
    move it into its key's folder in one rename; archives of other keys are deleted (a running
    JVM keeps the file it mapped), and so are work folders an interrupted set-up left.

    Args:
        jars: the project jars the training driver had (the key).
        class_list: the classes it loaded (``-XX:DumpLoadedClassList``).
        classpath: its ``java.class.path``.
        java: its ``java`` (the one that reads the archive).

    Returns:
        The archive.

    Raises:
        SparkSetupError: when ``java -Xshare:dump`` fails (its last lines) or gives no answer in 600 s.
    """
    cache = project_root() / CACHE
    cache.mkdir(parents=True, exist_ok=True)
    key = archive_key(jars, java)
    work = Path(tempfile.mkdtemp(prefix=WORK_PREFIX, dir=cache))
    try:
        argv = [
            str(java),
            "-Xshare:dump",
            f"-XX:SharedClassListFile={class_list}",
            f"-XX:SharedArchiveFile={work / ARCHIVE}",
            "-cp",
            classpath,
        ]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)  # noqa: S603
        except subprocess.TimeoutExpired as exc:
            raise SparkSetupError(
                "Failed to write the Spark driver's class-data archive: no answer in 600 s"
            ) from exc
        if done.returncode != 0 or not (work / ARCHIVE).is_file():
            lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
            raise SparkSetupError(
                f"Failed to write the Spark driver's class-data archive (java -Xshare:dump exit status "
                f"{done.returncode}):\n" + "\n".join(lines[-12:])
            )
        folder = cache / key
        publish_folder(work, folder, ARCHIVE)  # another set-up may have been first: its archive stays
        drop_others(cache, keep=key)
        return folder / ARCHIVE
    finally:
        shutil.rmtree(work, ignore_errors=True)
