"""Notebook 05's SQL on Trino (over the local Hive Metastore) against DuckDB, in one run.

Not a test: the measurement behind ``local.query_engine`` (issue 29). From an empty state directory
of its own (free ports, a temporary lake), it runs notebooks 01 to 03 once, so both engines read
the same Silver tables and the same catalog that Hudi's sync filled. Then, with the same files:

* each engine's start: Trino's and the metastore's (stop, then start until ready) against DuckDB's
  (open the engine and read the tables of its first query);
* Trino's start from the set-up's AOT cache (:meth:`helpers.local.trino.LocalTrino.make_aot_cache`)
  against a start without it (the baseline), alternated three times: until ready, Trino's CPU and
  resident memory then, and its first query of the catalog;
* notebook 05 on each engine (papermill, as ``./workbook run``): its time, the peak resident memory
  of all the run's processes, and the peak of the Trino and metastore processes alone;
* every ``sql/`` file on each engine: the first run (Trino plans cold, DuckDB reads its tables)
  and the best of three more.

DuckDB is the baseline printed beside each Trino figure.

Run::

    .venv/bin/python bench/bench_query.py               # the ci scale (TICKIT 1 %)
    .venv/bin/python bench/bench_query.py --env local   # the default scale
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.isolation import isolated_folder, isolated_overrides  # noqa: E402
from helpers.local.metastore import LocalMetastore  # noqa: E402
from helpers.local.trino import LocalTrino  # noqa: E402
from helpers.memory import PeakMemory  # noqa: E402
from helpers.params import WorkbookParams, load_params  # noqa: E402
from helpers.pipeline import stop_all  # noqa: E402
from helpers.query.engines import QueryEngine, open_engine  # noqa: E402
from helpers.query.sql_files import load_sql, sql_files  # noqa: E402
from helpers.runner import GIB, run_workbook  # noqa: E402

#: the parameter values notebook 05 passes (sales_by_seller: a seller with sales, found below)
_ARGS: dict[str, list[Any]] = {"top_events": ["Shows"]}


def _with_engine(params: WorkbookParams, engine: str) -> WorkbookParams:
    return params.model_copy(update={"local": params.local.model_copy(update={"query_engine": engine})})


def _server_pids(params: WorkbookParams) -> list[int]:
    return [p for p in (LocalTrino(params).pid(), LocalMetastore(params).pid()) if p is not None]


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


_Start = tuple[float, float, float, float]  # until ready, CPU then, resident then, a first query


def _trino_starts(params: WorkbookParams, rounds: int = 3) -> dict[bool, list[_Start]]:
    """Trino started with its AOT cache and without it, alternated: seconds until ready, its CPU
    seconds and resident GiB then, and the seconds of a first query of the catalog."""
    out: dict[bool, list[_Start]] = {True: [], False: []}
    for _ in range(rounds):
        for cached in (False, True):
            server = LocalTrino(params, use_aot_cache=cached)
            server.stop()
            ready = _timed(server.start)
            process = psutil.Process(server.pid())
            cpu = sum(process.cpu_times()[:2])
            rss = process.memory_info().rss / GIB
            with open_engine(_with_engine(params, "trino"), progress=False) as engine:
                first = _timed(lambda e=engine: e.query("table_row_counts"))
            out[cached].append((ready, cpu, rss, first))
    return out


def _file_times(engine: QueryEngine, names: list[str], seller: int) -> dict[str, tuple[float, float]]:
    out = {}
    engine.create_views()
    for name in names:
        if load_sql(name).view is not None:
            out[name] = (_timed(lambda n=name: engine._run(engine.load(n), [])), 0.0)  # noqa: SLF001
            continue
        args = [seller] if name == "sales_by_seller" else _ARGS.get(name, [])
        first = _timed(lambda n=name, a=args: engine.query(n, a))
        best = min(_timed(lambda n=name, a=args: engine.query(n, a)) for _ in range(3))
        out[name] = (first, best)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--env", default="ci", help="parameter set (ci: TICKIT 1 %%; local: the default)")
    args = parser.parse_args()
    work = isolated_folder("bench-query-")
    overrides = isolated_overrides(work)
    params = load_params(args.env, overrides)
    try:
        print(f"building Silver: notebooks 01-03 ({args.env}) in {work}", flush=True)
        built = run_workbook(args.env, overrides, only=("01", "02", "03"), progress=False)
        if not built.ok:
            print(built.summary())
            return 1
        trino_start = _timed(lambda: (LocalTrino(params).stop(), LocalTrino(params).start()))
        starts = _trino_starts(params)
        metastore_start = _timed(lambda: (LocalMetastore(params).stop(), LocalMetastore(params).start()))
        names = sql_files()
        times: dict[str, dict[str, tuple[float, float]]] = {}
        opened: dict[str, float] = {}
        for kind in ("trino", "duckdb"):
            start = time.perf_counter()
            engine = open_engine(_with_engine(params, kind), progress=False)
            engine.query("top_sellers")  # DuckDB reads sale and users here; Trino plans its first query
            opened[kind] = time.perf_counter() - start
            seller = int(engine.query("top_sellers")["sellerid"].iloc[0])
            with engine:
                times[kind] = _file_times(engine, names, seller)
        notebook: dict[str, tuple[float, float, float]] = {}
        for kind in ("trino", "duckdb"):
            if kind == "duckdb":  # DuckDB needs no Trino: the stack of that engine runs none
                LocalTrino(params).stop()
            with PeakMemory(interval_s=0.25, pss_every=None, pids=lambda: _server_pids(params)) as servers:
                run = run_workbook(
                    args.env, {**overrides, "local.query_engine": kind}, only=("05",), progress=False
                )
            if not run.ok:
                print(run.summary())
                return 1
            notebook[kind] = (run.seconds, (run.peak_rss_bytes or 0) / GIB, servers.peak.rss / GIB)
    finally:
        stop_all(params)
        shutil.rmtree(work, ignore_errors=True)
    print()
    print(f"| measure ({args.env}) | Trino 476 + Hive Metastore 3.1.3 | DuckDB (baseline) |")
    print("|---|---|---|")
    print(
        f"| server start (stop, start, ready) | Trino {trino_start:.1f} s, "
        f"metastore {metastore_start:.1f} s | none (the metastore: {metastore_start:.1f} s) |"
    )
    print(f"| engine open + first query (top_sellers) | {opened['trino']:.2f} s | {opened['duckdb']:.2f} s |")
    t, d = notebook["trino"], notebook["duckdb"]
    print(f"| notebook 05 | {t[0]:.1f} s | {d[0]:.1f} s |")
    print(f"| notebook 05 peak, all processes | {t[1]:.2f} GiB | {d[1]:.2f} GiB |")
    print(
        f"| peak of Trino + metastore during notebook 05 | {t[2]:.2f} GiB | {d[2]:.2f} GiB (metastore only) |"
    )
    for name in names:
        (tf, tb), (df, db) = times["trino"][name], times["duckdb"][name]
        print(f"| {name}.sql: first / best of 3 | {tf:.2f} / {tb:.2f} s | {df:.2f} / {db:.2f} s |")
    print()
    print("| Trino's start, alternated | from the set-up's AOT cache | without it (baseline) |")
    print("|---|---|---|")
    labels = ("until ready", "Trino's CPU then", "resident then", "first query (table_row_counts)")
    units = ("s", "s", "GiB", "s")
    for i, (label, unit) in enumerate(zip(labels, units, strict=True)):
        with_cache = ", ".join(f"{r[i]:.2f}" for r in starts[True])
        without = ", ".join(f"{r[i]:.2f}" for r in starts[False])
        print(f"| {label} | {with_cache} {unit} | {without} {unit} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
