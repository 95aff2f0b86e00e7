"""Shared pytest configuration (helpers append their fixtures below)."""

from __future__ import annotations

import os
import sys

# Spark workers must import the same interpreter's packages (pyarrow, helpers).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


# --- Spark (helpers.spark) ------------------------------------------------------------------
import pytest  # noqa: E402


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local SparkSession for the whole test session, built by ``helpers.spark``."""
    from helpers.spark import build_spark_session

    session = build_spark_session(app_name="workbook-tests", conf={"spark.driver.memory": "4g"})
    yield session
    session.stop()
