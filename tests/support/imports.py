"""What a module imports when a fresh interpreter loads it: for the processes that must stay
light (each capture worker, each executor's Python worker)."""

from __future__ import annotations

import json
import subprocess
import sys


def modules_imported_by(module: str) -> frozenset[str]:
    """The names in ``sys.modules`` after ``import <module>`` in a new Python process.

    Raises:
        AssertionError: when the import fails (with the process's error output).
    """
    code = f"import json, sys, {module}\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return frozenset(json.loads(done.stdout.strip().splitlines()[-1]))
