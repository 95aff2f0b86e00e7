"""Measure the whole workbook: ``./workbook run``'s notebooks at full scale, twice.

Not a test: a measurement against issue 16's targets. It runs every notebook with the default
(local) parameters from an empty state directory of its own (free ports, a temporary lake; your
``.state`` and ``runs/`` are not touched), then once more with nothing new to load. The baseline
beside each figure is the other run of the same pair: the first (cold) run against the re-run.
Peak memory is the summed resident memory of every process of the run (kernels, Spark, the
database servers, capture workers, the Silver job, the metastore), sampled twice a second.

Run::

    .venv/bin/python bench/bench_workbook.py                 # full scale
    .venv/bin/python bench/bench_workbook.py --scale 0.1
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.isolation import isolated_folder, isolated_overrides
from helpers.params import load_params, parse_overrides  # noqa: E402
from helpers.pipeline import stop_all  # noqa: E402
from helpers.runner import GIB, RunResult, run_workbook  # noqa: E402

TARGET_S = 300.0
TARGET_RERUN_S = 60.0
TARGET_GIB = 6.0


def _row(label: str, first: float, second: float, unit: str, target: str) -> str:
    return f"| {label} | {first:,.1f} {unit} | {second:,.1f} {unit} | {target} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="tickit.scale")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="another parameter (repeatable)"
    )
    args = parser.parse_args()
    work = isolated_folder("wb-bench-run-")
    overrides = {**isolated_overrides(work), "tickit.scale": args.scale, **parse_overrides(args.set)}
    runs: list[RunResult] = []
    try:
        for _ in range(2):
            result = run_workbook("local", overrides, progress=False)
            print(result.summary(), flush=True)
            runs.append(result)
            if not result.ok:
                raise SystemExit("a notebook failed: no figures")
    finally:
        stop_all(load_params("local", overrides))
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    first, second = runs
    print(
        f"\nWhole workbook at tickit.scale={args.scale}{' with ' + ', '.join(args.set) if args.set else ''} "
        "(first run from an empty state; re-run: nothing new)\n"
    )
    print("| figure | first run | re-run | target |")
    print("|---|---|---|---|")
    for a, b in zip(first.notebooks, second.notebooks, strict=True):
        print(_row(a.name, a.seconds, b.seconds, "s", ""))
    print(
        _row(
            "whole workbook",
            first.seconds,
            second.seconds,
            "s",
            f"first <= {TARGET_S:.0f} s, re-run <= {TARGET_RERUN_S:.0f} s",
        )
    )
    print(
        _row(
            "peak memory, all processes",
            (first.peak_rss_bytes or 0) / GIB,
            (second.peak_rss_bytes or 0) / GIB,
            "GiB",
            f"<= {TARGET_GIB:.0f} GiB",
        )
    )
    verdict = first.seconds <= TARGET_S and second.seconds <= TARGET_RERUN_S
    peak = max(first.peak_rss_bytes or 0, second.peak_rss_bytes or 0)
    memory = "met" if peak <= TARGET_GIB * GIB else "NOT met"
    print(f"\ntime targets {'met' if verdict else 'NOT met'}; memory target {memory}")


if __name__ == "__main__":
    main()
