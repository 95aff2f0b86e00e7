"""Profiles benchmark: the two local capture profiles side by side, in one run (issue 15).

Not a test. Runs, one after the other and each on its own servers in a fresh temporary state
directory with free ports (``.state`` is not touched), the same measurements on

* ``embedded`` (the named baseline; ``params/local.yaml``, ``capture.backend: embedded``): one
  Debezium embedded engine per source in a background Python worker with its JVM in the process;
* ``kafka`` (``params/local-kafka.yaml``, ``capture.backend: kafka_connect`` with an empty
  ``capture.kafka_connect.url`` and ``bootstrap_servers``): the project's KRaft broker and Kafka
  Connect distributed worker (:class:`helpers.local.kafka.LocalKafka`) and the Bronze sink
  (:class:`helpers.capture.kafka_sink.BronzeSink`, Spark Structured Streaming into the same
  Bronze writer).

Per profile, after loading TICKIT at ``--scale`` (1.0: 424,319 rows, plus the orders) and
enabling CDC as notebook 01 does:

1. capture servers start (kafka only): ``start_servers`` starting the broker, the worker and the
   sink, until the sink's streaming query runs; the embedded workers start at registration;
2. snapshot throughput: source rows per second from the ``register_connectors`` call until
   ``wait_for_snapshots`` returned (for kafka it follows the sink's status) and a replay of
   Bronze equals the sources (``bronze_vs_source``, asserted; the replay's own time is left out:
   the end is the start of the first replay that found Bronze equal);
3. commit to Bronze: ``--changes`` single-row commits per source kind (PostgreSQL
   ``ems.category``, MariaDB ``ecomm.sale``), one at a time, each from the commit's return until
   a new Bronze file of the topic is visible (polled every 2 ms); p50 / p95;
4. commit to Silver: the continuous Silver job is started and left to catch up with Bronze (its
   time is shown; Silver is then asserted equal to the sources), then ``--silver-changes``
   single-row updates of a small table per source (``category``, ``date``), each from the
   commit's return until the official reader returns the new value; p50 / p95;
5. resident memory per component at the end, everything still running: ``process_rss`` summed
   over each component's process tree (children found by their parent pid in ``/proc/*/stat``),
   so a Python worker with a Spark JVM child counts whole; what was summed is printed below the
   table. PostgreSQL's tree is the postmaster and its backends: each one's RSS includes the shared
   buffers it touched, so that sum overstates.

Everything a profile started is stopped (``helpers.pipeline.stop_all``) and its directory deleted,
also on failure. One table at the end: a row per figure, a column per profile and the ratio
kafka / embedded. Only sanity checks are asserted, no performance.

Run::

    .venv/bin/python bench/bench_profiles.py             # scale 1.0, 50 / 20 changes
    .venv/bin/python bench/bench_profiles.py --scale 0.1 --changes 20 --silver-changes 10
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import (  # noqa: E402
    Case,
    commit_to_silver,
    quantiles,
    silver_base,
    single_row_updates,
    source_to_bronze,
    temporary_params,
)

from helpers.capture.backends import ConnectorBackend, EmbeddedBackend, wait_until_running  # noqa: E402
from helpers.capture.connectors import ConnectorSpec  # noqa: E402
from helpers.capture.kafka_sink import BronzeSink  # noqa: E402
from helpers.capture.register import (  # noqa: E402
    connector_specs,
    expected_rows,
    open_backend,
    register_connectors,
    wait_for_snapshots,
)
from helpers.checks.parity import bronze_vs_source, silver_vs_source  # noqa: E402
from helpers.local.kafka import LocalKafka  # noqa: E402
from helpers.local.registry import LocalRegistry  # noqa: E402
from helpers.local.stack import LocalStack  # noqa: E402
from helpers.memory import descendants, process_parents, process_rss  # noqa: E402
from helpers.naming import table_topic  # noqa: E402
from helpers.params import WorkbookParams  # noqa: E402
from helpers.pipeline import start_servers  # noqa: E402
from helpers.poll import wait_until  # noqa: E402
from helpers.proc import free_port, live_pid  # noqa: E402
from helpers.silver.job import SilverJob  # noqa: E402
from helpers.sources.api import LocalSources  # noqa: E402

BASELINE, OTHER = "embedded", "kafka"
TOTALS = ("RSS capture, all components MiB", "RSS total MiB")

#: The commit-to-Silver cases: source, Silver table, key, column, update, value of change i.
SILVER_CHANGES: list[tuple[str, str, str, str, str, Callable[[int], Any]]] = [
    (
        "ems",
        "category",
        "catid",
        "catdesc",
        "UPDATE ems.category SET catdesc = %s WHERE catid = %s",
        lambda i: f"s{i:03d}",
    ),
    ("ecomm", "date", "dateid", "day", "UPDATE `date` SET day = %s WHERE dateid = %s", lambda i: f"{i:03d}"),
]

#: One figure: label -> (value, format spec); ``None`` where the profile has no such figure.
Figures = dict[str, tuple[float | None, str]]


def profile_overrides(name: str) -> tuple[str, dict[str, Any]]:
    """The parameter file and the overrides of a profile (free ports for the Kafka servers)."""
    if name == BASELINE:
        return "local", {"capture.backend": "embedded"}
    return "local-kafka", {
        "capture.backend": "kafka_connect",
        "capture.kafka_connect.url": "",
        "capture.kafka_connect.bootstrap_servers": "",
        "local.kafka.broker_port": free_port(),
        "local.kafka.controller_port": free_port(),
        "local.kafka.connect_port": free_port(),
        "local.registry.port": free_port(),
        "local.registry.management_port": free_port(),
    }


def tree_rss(root: int, parents: dict[int, int]) -> tuple[int, str]:
    """Resident bytes of ``root`` and its descendants, and what was summed (``python + java``)."""
    tree = descendants(root, parents)
    names: Counter[str] = Counter()
    for pid in tree:
        try:
            names[Path(f"/proc/{pid}/comm").read_text().strip()] += 1
        except OSError:
            continue
    summed = " + ".join(f"{n}" if k == 1 else f"{n} x{k}" for n, k in names.items())
    return sum(process_rss(pid) for pid in tree), summed


def components(
    params: WorkbookParams, backend: ConnectorBackend, specs: list[ConnectorSpec]
) -> dict[str, int]:
    """Component label -> pid, of what runs now (capture components are labelled ``capture: ...``)."""
    out: dict[str, int | None] = {s.server: s.pid for s in LocalStack(params).status()}
    if isinstance(backend, EmbeddedBackend):
        for spec in specs:
            out[f"capture: worker {spec.name}"] = live_pid(backend.directory(spec.name) / "worker.pid")
    else:
        kafka = LocalKafka(params)
        out["capture: kafka broker"] = kafka.broker_pid()
        out["capture: kafka connect worker"] = kafka.connect_pid()
        out["capture: bronze sink"] = BronzeSink(params).pid()
        if params.local.registry.enabled:  # the Avro converter's schemas
            out["capture: schema registry"] = LocalRegistry(params).pid()
    out["silver job"] = SilverJob(params).pid()
    missing = [label for label, pid in out.items() if pid is None]
    if missing:
        raise SystemExit(f"not running at the end: {missing}")
    return {label: int(pid) for label, pid in out.items() if pid is not None}


def _in_own_process(name: str, args: argparse.Namespace) -> tuple[Figures, dict[str, str]]:
    """:func:`run_profile` in a Python process of its own: each profile runs on servers of its own,
    and a Spark session keeps the metastore it was built with for the life of its JVM (a second
    session in the same process reconnected to the first profile's stopped metastore)."""
    with tempfile.TemporaryDirectory(prefix="bench_profiles_out_") as out:
        result = Path(out) / "figures.json"
        argv = [sys.executable, __file__, "--scale", str(args.scale), "--changes", str(args.changes)]
        argv += ["--silver-changes", str(args.silver_changes), "--profile", name, "--out", str(result)]
        subprocess.run([*argv, *(["--keep"] if args.keep else [])], check=True)
        data = json.loads(result.read_text())
    return {k: (v[0], v[1]) for k, v in data["figures"].items()}, data["summed"]


def run_profile(name: str, args: argparse.Namespace) -> tuple[Figures, dict[str, str]]:
    """Every figure of one profile, and per memory row what was summed."""
    env, overrides = profile_overrides(name)
    figures: Figures = {}
    summed: dict[str, str] = {}
    with temporary_params(
        f"bench_profiles_{name}_", {"tickit.scale": args.scale, **overrides}, env=env, keep=args.keep
    ) as params:
        sources = LocalSources(params)
        sources.start()
        sources.load_sample_data()
        sources.enable_cdc()
        started = time.monotonic()
        start_servers(params)  # kafka: the broker, the Connect worker and the sink
        if name == OTHER:
            BronzeSink(params).wait_running(timeout_s=300)
        figures["capture servers start s"] = (time.monotonic() - started if name == OTHER else None, ".1f")

        expected = expected_rows(params, sources.row_counts())
        specs = connector_specs(params, LocalSources(params).endpoints())
        backend = open_backend(params)
        started = time.monotonic()
        register_connectors(backend, specs, timeout_s=300)
        wait_for_snapshots(backend, specs, expected, timeout_s=3600)
        replay_from, deadline = time.monotonic(), time.monotonic() + 600
        while not (check := bronze_vs_source(params, specs))["equal"].all():
            if time.monotonic() > deadline:
                raise SystemExit(f"{name}: Bronze does not equal the sources:\n{check}")
            time.sleep(1)
            replay_from = time.monotonic()
        seconds = replay_from - started
        rows = sum(expected.values())
        figures["snapshot: source rows"] = (rows, ",.0f")
        figures["snapshot: registration to Bronze = sources s"] = (seconds, ".1f")
        figures["snapshot throughput rows/s"] = (rows / seconds, ",.0f")
        figures["snapshot: Bronze files"] = (
            len(list(params.path(params.lake.bronze).rglob("*.avro"))),
            ",.0f",
        )
        figures["snapshot: redelivered events"] = (int(check["redelivered"].sum()), ",.0f")
        print(f"[{name}] snapshot of {rows:,} rows in Bronze after {seconds:.1f} s", flush=True)

        for source in ("ems", "ecomm"):
            spec = next(s for s in specs if s.name.endswith(f"-{source}"))
            wait_until_running(backend, spec.name, timeout_s=60)
            p50, p95, _ = quantiles(source_to_bronze(params, source, args.changes))
            engine = params.source(source).engine
            figures[f"commit -> Bronze {engine} p50 s"] = (p50, ".3f")
            figures[f"commit -> Bronze {engine} p95 s"] = (p95, ".3f")
        print(f"[{name}] commit -> Bronze measured", flush=True)

        job = SilverJob(params)
        started = time.monotonic()
        job.start()

        def caught_up() -> bool:
            st = job.status()
            if st.get("state") == "DEAD":
                raise SystemExit(f"{name}: the Silver job died; see {job.directory / 'job.log'}")
            lag = st.get("lag") or {}
            return bool(lag) and all(v["pending_files"] == 0 for v in lag.values())

        wait_until(
            caught_up, timeout_s=1800, what="the Silver job to catch up with Bronze", max_interval_s=1.0
        )
        figures["Silver job: start and catch up with Bronze s"] = (time.monotonic() - started, ".1f")
        silver = silver_vs_source(params)
        assert silver["equal"].all(), silver[~silver["equal"]]
        bronze = params.path(params.lake.bronze)
        for source, table, key, column, sql, value_of in SILVER_CHANGES:
            case = Case(table, silver_base(params, table), key, column)
            with single_row_updates(params, source, sql) as update:
                commit_to_silver(
                    [case], bronze / table_topic(params, source, table), update, value_of, args.silver_changes
                )
            p50, p95, _ = quantiles(case.latencies)
            engine = params.source(source).engine
            figures[f"commit -> Silver {engine} ({table}) p50 s"] = (p50, ".2f")
            figures[f"commit -> Silver {engine} ({table}) p95 s"] = (p95, ".2f")
        print(f"[{name}] commit -> Silver measured", flush=True)

        parents = process_parents()
        capture = total = 0
        for label, pid in components(params, backend, specs).items():
            rss, summed[label] = tree_rss(pid, parents)
            figures[f"RSS {label} MiB"] = (rss / 2**20, ",.0f")
            total += rss
            capture += rss if label.startswith("capture:") else 0
        figures[TOTALS[0]] = (capture / 2**20, ",.0f")
        figures[TOTALS[1]] = (total / 2**20, ",.0f")
    return figures, summed


def _cell(figure: tuple[float | None, str] | None) -> str:
    if figure is None or figure[0] is None:
        return "n/a"
    return format(figure[0], figure[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--changes", type=int, default=50, help="commit-to-Bronze commits per source")
    parser.add_argument("--silver-changes", type=int, default=20, help="commit-to-Silver updates per source")
    parser.add_argument("--keep", action="store_true", help="keep the temporary state and lakes")
    parser.add_argument("--profile", choices=(BASELINE, OTHER), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.profile:  # one profile, in the process _in_own_process started
        figures, summed = run_profile(args.profile, args)
        args.out.write_text(json.dumps({"figures": figures, "summed": summed}))
        return 0

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"# bench_profiles  scale {args.scale}  changes {args.changes}  silver-changes "
        f"{args.silver_changes}  cores {os.cpu_count()}  commit {commit or '?'}  load {load}",
        flush=True,
    )
    results = {name: _in_own_process(name, args) for name in (BASELINE, OTHER)}
    labels = list(dict.fromkeys(label for figures, _ in results.values() for label in figures))
    # memory: both profiles' capture components, then the Silver job, then the totals
    labels.sort(key=lambda label: (label in TOTALS, label == "RSS silver job MiB"))
    print(f"\n## {BASELINE} (baseline) vs {OTHER}, scale {args.scale}")
    print(f"| figure | {BASELINE} (baseline) | {OTHER} | {OTHER} / {BASELINE} |")
    print("|---|---|---|---|")
    for label in labels:
        base, other = (results[name][0].get(label) for name in (BASELINE, OTHER))
        ratio = ""
        if base and other and base[0] and other[0] is not None:
            ratio = f"{other[0] / base[0]:.2f}x"
        print(f"| {label} | {_cell(base)} | {_cell(other)} | {ratio} |")
    print("\nRSS summed over each component's process tree (process names x count):")
    for name, (_, summed) in results.items():
        print(f"* {name}: " + "; ".join(f"{label}: {what}" for label, what in summed.items()))
    print(f"# load average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
