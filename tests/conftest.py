"""Shared pytest configuration (helpers append their fixtures below)."""

from __future__ import annotations

import os
import sys

# Spark workers must import the same interpreter's packages (pyarrow, helpers).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
