"""The streamer engine against the PySpark engine on the same Bronze: (a) full load, (b) source
commit -> row readable in Silver with each engine's continuous job, and each runtime's memory.

Not a test. Starts its own servers in a temporary state directory on free ports, loads TICKIT at
``--scale``, enables CDC, captures to Bronze and waits until Bronze replays to the sources, then:

* (a) full load of every Silver table from that Bronze, once per engine into a Silver of its own,
  each in a process of its own: the PySpark engine (``ingest_all`` in a child Python with its
  Spark 3.5.6 JVM; the baseline) and the streamer engine (the driver's ``spark-submit`` on the
  pyspark 3.4.1 runtime, Hudi 0.14.0). Wall time, and peak resident memory of the process tree
  (Python and JVM), sampled every 0.2 s. Both Silvers are checked against the sources.
* (b) each engine's continuous job in turn (every table, as the workbook runs it), ``--changes``
  single-row updates of ``category`` (PostgreSQL) and of ``sale`` (MariaDB, read back from the
  CoW table): commit's return until the official reader returns the new value, p50 / p95, and the
  job's peak memory while it ran.

Run::

    .venv/bin/python bench/bench_streamer.py                  # scale 1.0, 30 changes per case
    .venv/bin/python bench/bench_streamer.py --scale 0.1 --changes 20
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import Case, commit_to_silver, quantiles, silver_base, single_row_updates, temporary_params  # noqa: E402

from helpers.capture import connector_specs, open_backend, register_connectors  # noqa: E402
from helpers.checks.parity import bronze_vs_source, silver_vs_source  # noqa: E402
from helpers.memory import PeakMemory, descendants  # noqa: E402
from helpers.params import WorkbookParams  # noqa: E402
from helpers.silver.job import SilverJob  # noqa: E402
from helpers.silver.streamer import streamer_job_argv  # noqa: E402
from helpers.silver.streamer_config import write_streamer_config  # noqa: E402
from helpers.sources.api import LocalSources  # noqa: E402


def _peak(pid: int) -> PeakMemory:
    """The memory of a process and its descendants, sampled every 0.2 s until ``stop()``."""
    return PeakMemory(interval_s=0.2, pss_every=None, pids=functools.partial(descendants, pid)).start()


def _engine(params: WorkbookParams, engine: str, silver: Path) -> WorkbookParams:
    return params.model_copy(
        update={
            "lake": params.lake.model_copy(update={"silver": str(silver)}),
            "silver": params.silver.model_copy(update={"engine": engine, "sync": False}),
        }
    )


def _full_load(params: WorkbookParams, engine: str, work: Path) -> tuple[float, float]:
    """Seconds and peak GiB of one full load in a process of its own."""
    if engine == "pyspark":
        config = work / "pyspark-params.json"
        config.write_text(json.dumps(params.model_dump(mode="json", by_alias=True)))
        code = (
            "import json; from helpers.params import WorkbookParams; "
            "from helpers.silver.ingest import ingest_all; "
            f"ingest_all(WorkbookParams.model_validate(json.load(open({str(config)!r}))))"
        )
        argv, env = [sys.executable, "-c", code], {**os.environ, "PYTHONPATH": str(Path.cwd())}
    else:
        argv, env = streamer_job_argv(
            params, write_streamer_config(params), work / "streamer-once", continuous=False
        )
    started = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: S603
    peak = _peak(proc.pid)
    if proc.wait() != 0:
        raise SystemExit(f"{engine}: the full load failed (exit code {proc.returncode})")
    return time.monotonic() - started, peak.stop().rss / 2**30


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--changes", type=int, default=30, help="single-row commits per case")
    args = parser.parse_args()
    with temporary_params("bench_streamer_", {"tickit.scale": args.scale}) as params:
        sources = LocalSources(params)
        sources.start()
        sources.load_sample_data()
        sources.enable_cdc()
        specs = connector_specs(params, LocalSources(params).endpoints())
        register_connectors(open_backend(params), specs, timeout_s=300)
        if not bronze_vs_source(params, specs, wait_s=900)["equal"].all():
            raise SystemExit("Bronze did not catch up")
        work = params.state_path.parent
        engines = {e: _engine(params, e, work / f"silver-{e}") for e in ("pyspark", "streamer")}
        print(
            f"# bench_streamer  scale {args.scale}  changes {args.changes}  cores {os.cpu_count()}",
            flush=True,
        )
        print("\n## (a) full load of every Silver table from the same Bronze, a process of its own each")
        print("| engine | seconds | peak memory GiB | Silver equals the sources |")
        print("|---|---|---|---|")
        loads = {}
        for engine, engine_params in engines.items():
            seconds, peak = _full_load(engine_params, engine, work)
            equal = bool(silver_vs_source(engine_params)["equal"].all())
            loads[engine] = seconds
            label = (
                "pyspark, Hudi 1.0.2 / Spark 3.5.6 (baseline)"
                if engine == "pyspark"
                else "streamer, Hudi 0.14.0 / Spark 3.4.1"
            )
            print(f"| {label} | {seconds:.1f} | {peak:.2f} | {equal} |", flush=True)
        print(f"\nstreamer / baseline: {loads['streamer'] / loads['pyspark']:.2f}x")
        print(f"\n## (b) source commit -> row readable in Silver, continuous job, {args.changes} per case")
        print("| engine | table | p50 s | p95 s | max s | job peak memory GiB |")
        print("|---|---|---|---|---|---|")
        for engine, engine_params in engines.items():
            job = SilverJob(engine_params)
            job.start()
            deadline = time.monotonic() + 300
            while job.status().get("state") != "RUNNING" or not job.status().get("loops"):
                if time.monotonic() > deadline or job.status().get("state") in ("DEAD", "FAILED"):
                    raise SystemExit(f"{engine}: the continuous job did not run: {job.status()}")
                time.sleep(0.5)
            peak = _peak(job.pid() or 0)
            try:
                cases = (
                    ("ems", "tickit.ems.category", ("category", "catid", "catdesc"),
                     "UPDATE ems.category SET catdesc = %s WHERE catid = %s"),
                    ("ecomm", "tickit.ecomm.sale", ("sale", "salesid", "qtysold"),
                     "UPDATE sale SET qtysold = %s WHERE salesid = %s"),
                )  # fmt: skip
                for source, topic, (name, key, column), sql in cases:
                    case = Case(name, silver_base(engine_params, name), key, column)
                    offset = 300 if engine == "pyspark" else 600

                    def value_of(i: int, name: str = name, offset: int = offset) -> Any:
                        return f"v{offset + i}" if name == "category" else offset + i

                    with single_row_updates(params, source, sql) as update:
                        commit_to_silver(
                            [case], Path(params.lake.bronze) / topic, update, value_of, args.changes
                        )
                    p50, p95, top = quantiles(case.latencies)
                    cells = [
                        engine,
                        case.label,
                        f"{p50:.2f}",
                        f"{p95:.2f}",
                        f"{top:.2f}",
                        f"{peak.peak.rss / 2**30:.2f}",
                    ]
                    print(f"| {' | '.join(cells)} |", flush=True)
            finally:
                peak.stop()
                job.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
