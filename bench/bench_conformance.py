"""Notebook 07's short conformance set with the two engines' scenarios side by side, against one
after another, in one run.

Not a test: the measurement behind ``conformance.parallel_engines``. From an empty state directory
of its own (free ports, a temporary lake), it runs notebooks 01 to 03 once, then the short set four
times on the same running pipeline, each into Silver variant tables of its own root:

* cold (the variant tables are created, as in a first workbook run): one after another (the
  baseline), then side by side;
* warm (the tables exist, as in a re-run): one after another, then side by side.

Each row prints the wall time and whether every scenario passed.

Run::

    .venv/bin/python bench/bench_conformance.py               # full scale (the local default)
    .venv/bin/python bench/bench_conformance.py --env ci      # TICKIT 1 %
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.checks.conformance import failed_scenarios, run_scenarios  # noqa: E402
from helpers.isolation import isolated_folder, isolated_overrides  # noqa: E402
from helpers.params import load_params  # noqa: E402
from helpers.pipeline import ensure_pipeline, stop_all  # noqa: E402
from helpers.runner import run_workbook  # noqa: E402

#: notebook 07's goal for its short set at full scale (issue 30)
TARGET_S = 30.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="local", help="parameter set (local: full scale; ci: TICKIT 1 %%)")
    args = parser.parse_args()
    work = isolated_folder("bench-conformance-")
    overrides = isolated_overrides(work)
    params = load_params(args.env, overrides)
    rows: list[tuple[str, int, float, list[str]]] = []
    try:
        print(f"building Silver: notebooks 01-03 ({args.env}) in {work}", flush=True)
        built = run_workbook(args.env, overrides, only=("01", "02", "03"), progress=False)
        if not built.ok:
            print(built.summary())
            return 1
        ensure_pipeline(params)
        for state in ("cold", "warm"):
            for lanes in (1, 2):
                lane_params = load_params(args.env, {**overrides, "conformance.parallel_engines": lanes})
                root = work / f"conformance-{lanes}"
                start = time.perf_counter()
                frame = run_scenarios(lane_params, short=True, silver_root=root)
                seconds = time.perf_counter() - start
                failed = failed_scenarios(frame)
                rows.append((state, lanes, seconds, failed))
                print(f"{state}, {lanes} lane(s): {seconds:.1f} s, failed {failed}", flush=True)
    finally:
        stop_all(params)
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"| short set ({args.env}) | side by side (2 lanes) | one after another (baseline) | goal |")
    print("|---|---|---|---|")
    for state in ("cold", "warm"):
        one, two = (next(r for r in rows if r[0] == state and r[1] == n) for n in (1, 2))
        verdict = "all passed" if not (one[3] or two[3]) else f"FAILED {sorted(set(one[3] + two[3]))}"
        print(
            f"| {state} ({verdict}) | {two[2]:.1f} s | {one[2]:.1f} s | <= {TARGET_S:.0f} s; "
            f"speed-up {one[2] / two[2]:.2f}x |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
