"""The workbook's one command line: ``python -m helpers.cli <command>`` (``./workbook <command>``).

Commands: ``run`` (``--env aws``: EMR Studio notebook executions), ``stack start|stop|status``,
``status``, ``changes list|run NAME``, ``conformance [--short] [--only NAME] [--list]``,
``resnapshot TABLE`` (a new snapshot of one table while capture runs),
``lint-config [FILE...]`` (Debezium / Kafka Connect / DeltaStreamer configurations),
``package [--upload]``, ``cluster create|check|streamer-steps`` (the EMR cluster; the streamer
engine's DeltaStreamer steps on an EMR 6.15 cluster) and ``lab [--port N]``
(JupyterLab); :func:`main` is the entry point. Every command exits 0 on success, 1 when what it
checks failed, 2 on bad input or set-up errors.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from tabulate import tabulate

from helpers.checks import conformance
from helpers.checks.config_lint import has_errors, lint_files, lint_workbook
from helpers.checks.divergence import DIFFERS
from helpers.deploy import emr, streamer_steps
from helpers.deploy.executions import run_notebook_executions
from helpers.deploy.package import build_package, upload_package
from helpers.errors import WorkbookError
from helpers.local.lab import lab_dir, run_lab
from helpers.params import ENVIRONMENTS, WorkbookParams, load_params, parse_overrides
from helpers.pipeline import ensure_pipeline, pipeline_status, start_servers, stop_all
from helpers.proc import ServerStatus
from helpers.runner import run_workbook
from helpers.silver.backend import open_silver
from helpers.silver.streamer_config import write_streamer_config
from helpers.sources.edge_cases.catalogue import EDGE_CASES, apply_edge_case

__all__ = ["build_parser", "main"]

_LOCAL_ENVS = [e for e in ENVIRONMENTS if e != "aws"]


def _add_params_options(parser: argparse.ArgumentParser, envs: Sequence[str]) -> None:
    parser.add_argument("--env", default="local", choices=list(envs), help="parameter overlay")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter, e.g. tickit.scale=0.1 (value parsed as YAML; repeatable)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = argparse.ArgumentParser(prog="workbook", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run every notebook in order (the main job)")
    _add_params_options(run, ENVIRONMENTS)
    run.add_argument("--only", action="append", default=[], metavar="NN", help="notebooks starting with NN")
    run.add_argument("--run-dir", type=Path, default=None, help="folder of this run's outputs")
    run.add_argument("--no-progress", action="store_true", help="no progress bars")

    stack = sub.add_parser("stack", help="start, stop or show the local pipeline")
    stack.add_argument("action", choices=["start", "stop", "status"])
    _add_params_options(stack, _LOCAL_ENVS)
    stack.add_argument("--state-dir", help="override params state_dir")

    status = sub.add_parser(
        "status", help="servers, connectors, the Silver job, the lag and Silver against the source per table"
    )
    _add_params_options(status, _LOCAL_ENVS)
    status.add_argument(
        "--no-check", action="store_true", help="show the last recorded checks of Silver against the source"
    )
    status.add_argument("--state-dir", help="override params state_dir")

    chg = sub.add_parser("changes", help="scripted CDC edge cases on the local sources")
    chg.add_argument("action", choices=["list", "run"])
    chg.add_argument("scenario", nargs="?", help="the scenario to run")
    _add_params_options(chg, _LOCAL_ENVS)

    res = sub.add_parser(
        "resnapshot", help="a new snapshot of one table while capture runs; Silver ends equal to the source"
    )
    res.add_argument("table", help="the Silver table (or its source table, e.g. ems.category)")
    res.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for the snapshot")
    _add_params_options(res, _LOCAL_ENVS)

    conf = sub.add_parser("conformance", help="the CDC edge cases checked end to end in Silver")
    _add_params_options(conf, _LOCAL_ENVS)
    conf.add_argument("--short", action="store_true", help="the short set (the one CI runs)")
    conf.add_argument("--only", action="append", default=[], metavar="NAME", help="only this scenario")
    conf.add_argument("--list", action="store_true", help="list the scenarios and exit")

    pkg = sub.add_parser("package", help="the wheel, EMR bootstrap script and manifest for AWS")
    pkg.add_argument("--upload", action="store_true", help="upload them to s3://<bucket>/<prefix>/<version>/")
    pkg.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="e.g. aws.package.bucket=NAME"
    )
    pkg.add_argument("--dist", type=Path, default=None, help="output folder (default dist/workbook)")
    cluster = sub.add_parser("cluster", help="the EMR cluster: print (or --apply) its request, or check one")
    cluster.add_argument("action", choices=["create", "check", "streamer-steps"])
    _add_params_options(cluster, ["aws"])
    cluster.set_defaults(env="aws")
    cluster.add_argument(
        "--apply",
        action="store_true",
        help="create: call RunJobFlow; streamer-steps: upload and add the steps (default: a dry run)",
    )
    cluster.add_argument("--cluster-id", help="check: the cluster j-... (default aws.emr.cluster_id)")
    lint = sub.add_parser(
        "lint-config", help="risky settings in Debezium, Kafka Connect and DeltaStreamer configurations"
    )
    lint.add_argument(
        "files", nargs="*", type=Path, help="JSON or .properties files (none: the workbook's own for --env)"
    )
    _add_params_options(lint, ENVIRONMENTS)
    lab = sub.add_parser("lab", help="JupyterLab on notebooks/, on 127.0.0.1 with a new token")
    _add_params_options(lab, _LOCAL_ENVS)
    lab.add_argument("--state-dir", help="override params state_dir (the lab's files go to <state_dir>/lab)")
    lab.add_argument("--port", type=int, default=None, help="port on 127.0.0.1 (default: a free one)")
    return parser


def _params(args: argparse.Namespace) -> WorkbookParams:
    overrides: dict[str, Any] = parse_overrides(args.set)
    if getattr(args, "state_dir", None):
        overrides["state_dir"] = args.state_dir
    return load_params(args.env, overrides=overrides)


def _servers(statuses: Sequence[ServerStatus]) -> str:
    rows = [[s.server, s.state, s.pid or "-", s.port, s.version, s.data_dir] for s in statuses]
    return tabulate(rows, headers=["server", "state", "pid", "port", "version", "data dir"])


def _run(args: argparse.Namespace) -> int:
    execute = run_notebook_executions if args.env == "aws" else run_workbook
    result = execute(
        env=args.env,
        overrides=parse_overrides(args.set),
        only=args.only,
        run_dir=args.run_dir,
        progress=not args.no_progress,
    )
    print(result.summary())
    return 0 if result.ok else 1


def _stack(args: argparse.Namespace) -> int:
    params = _params(args)
    if args.action == "start":
        print(_servers(start_servers(params)))
    elif args.action == "stop":
        print(_servers(stop_all(params)))
    else:  # `status` checks Silver against the sources; `stack status` shows the last checks
        status = pipeline_status(params, check=args.command == "status" and not args.no_check)
        print(status)
        if (status["divergence"]["result"] == DIFFERS).any():
            if args.env != "local" or args.set or args.state_dir:
                print("(run the repair with this command's --env, --set and --state-dir flags)")
            return 1
    return 0


def _changes(args: argparse.Namespace) -> int:
    if args.action == "list":
        for name, case in EDGE_CASES.items():
            print(f"{name:29} {case.summary}")
        return 0
    if not args.scenario:
        print("changes run needs a scenario name (see: changes list)", file=sys.stderr)
        return 2
    result = apply_edge_case(_params(args), args.scenario)
    deleted = f", deleted {result.deleted}" if result.deleted else ""
    print(f"{result.scenario}: topic {result.topic}, keys {result.keys}{deleted}; {result.note}")
    for statement in result.statements:
        print(f"  {statement[:160]}")
    return 0


def _resnapshot(args: argparse.Namespace) -> int:
    params = _params(args)
    result = open_silver(params).resnapshot(args.table, timeout_s=args.timeout)
    print(
        f"{result.table}: incremental snapshot completed in {result.seconds:.1f} s"
        f" (signal {result.signal_id}); marker at {result.position} in {result.marker_file}."
        " The Silver job applies it in its next round (or: ./workbook run); rows deleted at the source"
        " while Silver had diverged are removed then."
    )
    return 0


_CONFORMANCE_COLUMNS = [
    "scenario", "item", "source", "table_type", "delete_mode", "status", "negative_check", "seconds",
]  # fmt: skip


def _conformance(args: argparse.Namespace) -> int:
    if args.list:
        for name, s in conformance.SCENARIOS.items():
            flags = ("short " if s.short else "") + ("slow" if s.slow else "")
            print(f"{name:28} item {s.item:2} {flags}")
        return 0
    params = _params(args)
    with conformance.one_run_at_a_time(params):  # a second run is refused before it starts anything
        ensure_pipeline(params)
        started = time.monotonic()
        # the full set unless --short (notebook 07 follows conformance.short instead)
        frame = conformance.run_scenarios(params, args.only or None, short=args.short, progress=True)
    with pd.option_context("display.max_rows", None, "display.max_colwidth", 90, "display.width", 200):
        print(frame[_CONFORMANCE_COLUMNS])
    failed = conformance.failed_scenarios(frame)
    for _, row in frame[frame["status"] == "FAILED"].iterrows():
        print(f"FAILED {row['scenario']} {row['silver_table']}: {row['detail']}", file=sys.stderr)
    scenarios = len(set(frame["scenario"]))
    print(f"{scenarios} scenario(s) in {time.monotonic() - started:.0f} s; failed: {failed or 'none'}")
    return 1 if failed else 0


def _package(args: argparse.Namespace) -> int:
    params = load_params("aws", overrides=parse_overrides(args.set), check_placeholders=False)
    built = build_package(params, dist_dir=args.dist, require_bucket=args.upload)
    print(built.describe())
    if args.upload:
        assert params.aws is not None  # the aws overlay has the section
        for uri in upload_package(built, region=params.aws.region):
            print(f"uploaded {uri}")
        print(f"EMR bootstrap action: --bootstrap-actions {built.bootstrap_action}")
    return 0


def _streamer_steps(params: WorkbookParams, apply: bool) -> int:
    location = streamer_steps.streamer_location(params)
    folder = params.state_path / "streamer" / "aws-conf"
    tables = write_streamer_config(params, folder, location=location)
    done = streamer_steps.submit_streamer_steps(params, tables, folder, dry_run=not apply)
    if not done.step_ids:
        print(json.dumps(done.steps, indent=2))
        print(
            f"dry run: nothing uploaded to {location}; add --apply to upload and add the steps",
            file=sys.stderr,
        )
        return 0
    for uri in done.uploaded:
        print(f"uploaded {uri}")
    print(" ".join(done.step_ids))
    return 0


def _cluster(args: argparse.Namespace) -> int:
    params = _params(args)
    if args.action == "streamer-steps":
        return _streamer_steps(params, args.apply)
    if args.action == "create":
        created = emr.create_cluster(params, dry_run=not args.apply)
        if created.cluster_id is None:
            print(json.dumps(created.request, indent=2))
            print(
                "dry run: nothing created; add --apply to call RunJobFlow with this request", file=sys.stderr
            )
        else:
            print(created.cluster_id)
            print(
                f"created; check it once WAITING: cluster check --cluster-id {created.cluster_id}",
                file=sys.stderr,
            )
        return 0
    cluster_id = args.cluster_id or emr.aws_settings(params, "check the EMR cluster").emr.cluster_id
    if not cluster_id:
        print("cluster check needs --cluster-id j-... (or aws.emr.cluster_id)", file=sys.stderr)
        return 2
    findings = emr.check_cluster(cluster_id, params, emr.open_emr_client(params))
    rows = [[f.check, "ok" if f.passed else "FAIL", f.actual, f.fix or ""] for f in findings]
    print(
        tabulate(rows, headers=["check", "result", "cluster has", "fix"], maxcolwidths=[None, None, 50, 70])
    )
    return 0 if all(f.passed for f in findings) else 1


def _lint_config(args: argparse.Namespace) -> int:
    if args.files:
        findings = lint_files(args.files)
        what = f"{len(args.files)} file(s)"
    else:
        params = load_params(args.env, overrides=parse_overrides(args.set), check_placeholders=False)
        findings = lint_workbook(params)
        what = f"the workbook's own configurations ({args.env})"
    rows = [[f.severity, f.rule, f.config, f.key, f.line or "-", f.value, f.problem, f.fix] for f in findings]
    if rows:
        print(
            tabulate(
                rows,
                headers=["severity", "rule", "config", "key", "line", "value", "what goes wrong", "fix"],
                maxcolwidths=[None, None, 30, 36, None, 30, 50, 40],
            )
        )
    errors = sum(f.severity == "error" for f in findings)
    print(f"{what}: {errors} error(s), {len(findings) - errors} warning(s)")
    return 1 if has_errors(findings) else 0


def _lab(args: argparse.Namespace) -> int:
    return run_lab(lab_dir(_params(args)), port=args.port)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit code (the error message, if any, goes to stderr).

    SIGTERM and SIGHUP (``timeout``, a closed terminal, a process manager) stop a command as
    Ctrl-C does, so what it started is stopped too (``./workbook lab`` stops JupyterLab and its
    kernels); the exit code is then 130, or the command's own (the lab's 0)."""
    args = build_parser().parse_args(argv)
    for stop_signal in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(stop_signal) is not signal.SIG_IGN:  # nohup's ignored SIGHUP stays so
            signal.signal(stop_signal, _interrupt)
    # the console shows the workbook's own messages; libraries only warnings and errors (py4j logs
    # every closed gateway connection at INFO: hundreds of lines in a conformance run)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s", stream=sys.stderr)
    for name in ("helpers", "__main__"):
        logging.getLogger(name).setLevel(logging.INFO)
    handlers = {
        "run": _run,
        "stack": _stack,
        "status": _stack,
        "changes": _changes,
        "resnapshot": _resnapshot,
        "conformance": _conformance,
        "package": _package,
        "cluster": _cluster,
        "lab": _lab,
        "lint-config": _lint_config,
    }
    if args.command == "status":
        args.action = "status"
    try:
        return handlers[args.command](args)
    except WorkbookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:
        print(f"stopped ({exc or 'SIGINT'})", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
