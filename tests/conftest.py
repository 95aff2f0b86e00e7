"""Shared pytest configuration (helpers append their fixtures below)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers.isolation import isolated_params
from helpers.local.metastore import LocalMetastore
from helpers.local.stack import LocalStack
from helpers.spark import build_spark_session


def pytest_configure(config: pytest.Config) -> None:
    """Spark workers must import the same interpreter's packages (pyarrow, helpers)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


# --- two workers (``./workbook test`` runs pytest-xdist with ``-n 2``) ----------------------------

#: Test files (and folders, ending in ``/``) of the second worker: the unit tier, then the Kafka
#: Bronze sink and the notebook tiers. Each starts its own servers on free ports and needs none of
#: the integration tier's session fixtures (the shared pipeline); the first worker runs every other
#: file, in order. The unit tier (about 70 s, one process, no servers) runs here, before the
#: second worker's stacks, since the first worker's files are the longer chain (2,631 s summed
#: against 1,912 s in the fresh-clone run at ``0ec2b99``). Two groups, so at most two stacks
#: run at once and the time tests spend waiting on servers is used. Tried on 2026-11-28 and taken
#: back: adding the Kafka Connect, cluster-on-S3 and CDC set-up files here evened the workers' summed
#: durations (3,278 s and 2,790 s, from 3,071 s and 2,040 s) but pytest's wall grew from 3,108 s to
#: 3,302 s. The two cores are the limit; heavy files side by side only slow each other. Tried again
#: the same day, the other way: five of the first worker's last files (S3, JSON-lines Silver, slice,
#: Spark cluster, stack; 436 s) moved to the second worker's end, where ``vmstat`` had shown the
#: machine mostly 10-35 % idle for 15 minutes: pytest's wall grew from 2,718 s to 2,816 s, and the
#: summed durations from 4,493 s to 5,511 s. Taken back too.
#: 2026-11-30: two fresh-clone runs at cf372b6 and 6b2c149 took 2,686 s and 2,740 s end to end, at
#: CI's 45-minute limit; ``vmstat`` showed the machine 97-99 % busy while both workers ran, then
#: 64-73 % for the first worker's last 11 minutes alone (its summed durations 2,513 s against the
#: second's 1,859 s). The self-contained cluster-on-S3 flow (209 s, a process of its own with its
#: own servers) moved to the second worker: the next fresh-clone run took 2,669 s end to end
#: (pytest 2,473 s; summed 2,455 s and 1,976 s), all 800 passed.
#: 2026-11-30 (later): the fresh-clone run at a83ac12 summed 2,104 s on the first worker against 1,721 s
#: (pytest 2,127 s), and the landing run of the next commit took 2,698 s end to end. The
#: self-contained JSON-lines Silver flow (159 s, its own stack) moved to the second worker. The
#: fresh-clone run at 80bd5d9 then took 2,662 s end to end (pytest 2,425 s), the workers summing
#: 2,402 s and 2,095 s on a slower day (the Kafka sink file 755 s against 659 s at a83ac12): the
#: self-contained Spark standalone cluster file (168 s, its own cluster) moved over too.
#: 2026-12-04: the streamer's file moved to the start of the first worker's integration tier (its
#: continuous tests mostly wait, and were the worker's tail alone for 265 s at 42.0 min end to end):
#: the next fresh-clone run took 38.7 min (pytest 2,100 s against 2,252 s), but failed
#: test_capture_local's snapshot test, which needs ``date``'s Bronze to hold one snapshot and the
#: streamer's re-snapshot test had added a second. Taken back.
SECOND_WORKER = (
    "tests/unit/",
    "tests/integration/test_cluster_s3.py",
    "tests/notebooks/test_workbook.py",
    "tests/notebooks/test_workbook_kafka.py",
    "tests/integration/test_kafka_bronze_sink.py",
    "tests/integration/test_silver_jsonl.py",
    "tests/integration/test_spark_cluster.py",
)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n 2``: two fixed groups of test files (:data:`SECOND_WORKER` and the rest), each run
    in collection order by one worker. xdist's own ``loadgroup`` marks do not work with pytest 9.2
    (it renames node ids, which pytest 9.2 no longer allows), so the groups are made here."""
    from xdist.scheduler import LoadScopeScheduling

    class TwoGroups(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            second = any(path == f or (f.endswith("/") and path.startswith(f)) for f in SECOND_WORKER)
            return "second" if second else "first"

    return TwoGroups(config, log)


# --- the project's own lake stays untouched -----------------------------------------------------

_PROJECT_LAKE = Path(__file__).resolve().parent.parent / "lake"


def _lake_files() -> dict[str, float]:
    if not _PROJECT_LAKE.exists():
        return {}
    return {str(p): p.stat().st_mtime for p in _PROJECT_LAKE.rglob("*") if p.is_file()}


@pytest.fixture(scope="session", autouse=True)
def project_lake_untouched() -> Iterator[None]:
    """Fails the session when a test wrote into the project's own ``lake/`` (the user's Bronze
    and Silver zones): every test's stack and pipeline must use a lake of its own. A Kafka test
    once left venue and date events of its own database in ``lake/bronze``."""
    before = _lake_files()
    yield
    after = _lake_files()
    changed = sorted(p for p in after if before.get(p) != after[p])
    if changed:
        pytest.fail(f"tests wrote into the project's lake/: {changed[:5]} ({len(changed)} files)")


# --- Spark (helpers.spark) ------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark_params():  # type: ignore[no-untyped-def]
    """Parameters of the test session's Spark session: the CI set with a metastore of its own
    (the Hive Metastore service on a free port, in a throw-away state directory)."""
    with isolated_params("wb-spark-") as params:
        LocalMetastore(params).start()
        yield params


@pytest.fixture(scope="session")
def spark(spark_params):  # type: ignore[no-untyped-def]
    """One local SparkSession for the whole test session, built by ``helpers.spark`` (the official
    Hudi bundle, Hive catalog in the session's own metastore)."""
    session = build_spark_session(spark_params, app_name="workbook-tests")
    yield session
    session.stop()


# --- Local stack (helpers.local.stack) ------------------------------------------------------------
# `local_stack`: one running PostgreSQL + MariaDB for the whole session, in a throw-away state
# dir under /tmp (the server users must traverse it) with free ports; use it in integration
# tests of loaders etc. Tests that kill or stop servers build their own with `stack_factory`.


@contextlib.contextmanager
def temporary_stack(prefix: str, overrides: dict[str, Any] | None = None) -> Iterator[Any]:
    # never the project's own lake/: a sink or worker started with this stack writes in its own.
    # Trino (600 MiB, 15 s) only where a test asks for it ({"local.query_engine": "trino"}: the
    # stack's own tests, the S3 stack); the SQL tests run theirs on the Spark session's metastore
    with isolated_params(prefix, {"local.query_engine": "duckdb", **(overrides or {})}) as params:
        stack = LocalStack(params)
        stack.start()
        yield stack


@pytest.fixture(scope="session")
def stack_factory() -> Callable[..., Any]:
    """``with stack_factory("prefix-", {"dotted.key": value}) as stack:`` -> a started LocalStack
    (``stack.params`` holds its parameters); stopped and deleted on exit."""
    return temporary_stack


@pytest.fixture(scope="session")
def local_stack() -> Iterator[Any]:
    """A started :class:`helpers.local.stack.LocalStack` shared by the session's integration tests."""
    with temporary_stack("wb-session-") as stack:
        yield stack
