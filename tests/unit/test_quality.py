"""The code-quality gate CI enforces (the same rules as the optional pre-commit hooks)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from helpers.params import project_root

ROOT = project_root()
PATHS = ["helpers", "tests", "bench", "notebooks"]


@pytest.mark.parametrize(
    "argv",
    [
        [sys.executable, "-m", "ruff", "check", *PATHS],
        [sys.executable, "-m", "ruff", "format", "--check", *PATHS],
        [sys.executable, "-m", "mypy", "helpers"],
    ],
    ids=["ruff-check", "ruff-format", "mypy-strict"],
)
def test_code_quality(argv: list[str]) -> None:
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
