"""Load a script of ``bench/`` as a module, for the unit tests of its pure parts: the benchmarks
are scripts (``python bench/<name>.py``), not a package, and import their siblings by name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def load_bench_module(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``bench/<name>.py`` loaded under a name of its own, with ``bench/`` on ``sys.path`` (its
    ``from _targets import ...``) and in ``sys.modules`` (dataclasses look their module up) for
    the test's duration only."""
    monkeypatch.syspath_prepend(str(BENCH))
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module
