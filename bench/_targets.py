"""The issues' targets as the benchmarks measure them, gathered into one table (not a benchmark).

Each benchmark that measures a target of issue 25 or 30 calls :func:`record` once per target with
its figure, the baseline it measured in the same run, and its verdict. The records go to one JSON
Lines file (:func:`targets_file`: ``bench/results/targets.jsonl``, git-ignored, or the file named
by ``WORKBOOK_BENCH_TARGETS``). ``./workbook bench`` starts a new file and prints the table at the
end (``python bench/_targets.py``); a run resumed with ``--from`` keeps the earlier benchmarks'
records, and a target measured again keeps only its newest record.

A target that is not met names where ``bench/README.md`` takes its measured limit apart
(``limit``), so the table says what stops it, not only that it stops.

Written here rather than taken from a library: it is a few lines of JSON and a table in the
format the benchmarks already print.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shlex
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["TargetRecord", "latest", "record", "summary", "targets_file"]

_ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class TargetRecord:
    """One target as one benchmark measured it.

    Attributes:
        issue: the issue and target, e.g. ``"25"`` or ``"30.1"``.
        target: the target in words, with its goal (``"re-run <= 60 s"``).
        figure: what this run measured, with its unit.
        baseline: the baseline measured in the same run ("" when the target has none).
        met: whether the figure meets the goal; None for a target that is a report, not a goal.
        bench: the benchmark (and its arguments) that measured it.
        limit: for a target not met, the ``bench/README.md`` section that takes its limit apart.
        commit: the tree's commit when the benchmark started (its process imported this
            module), with ``HEAD`` at the record's time after it when a commit landed meanwhile.
        at: when (UTC, ISO 8601).
    """

    issue: str
    target: str
    figure: str
    baseline: str
    met: bool | None
    bench: str
    limit: str = ""
    commit: str = ""
    at: str = ""


def targets_file() -> Path:
    """Where the records go: ``WORKBOOK_BENCH_TARGETS``, else ``bench/results/targets.jsonl``."""
    named = os.environ.get("WORKBOOK_BENCH_TARGETS")
    return Path(named) if named else _ROOT / "bench" / "results" / "targets.jsonl"


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=_ROOT, capture_output=True, text=True, check=False
        )
    except OSError:
        return ""
    return out.stdout.strip()


#: The commit the running benchmark measures: ``HEAD`` when its process started.
_STARTED_AT = _commit()


def _measured_commit() -> str:
    """:data:`_STARTED_AT`, and ``HEAD`` now after it when they differ (a commit landed while the
    benchmark ran: the figure belongs to the first, the record would otherwise name the second)."""
    now = _commit()
    if now and _STARTED_AT and now != _STARTED_AT:
        return f"{_STARTED_AT}; HEAD {now} at the end"
    return _STARTED_AT or now


def record(
    issue: str,
    target: str,
    figure: str,
    baseline: str,
    met: bool | None,
    *,
    limit: str = "",
    bench: str | None = None,
) -> TargetRecord:
    """Append one target's figure to :func:`targets_file` and return its record.

    Args:
        issue: issue and target number (``"30.5"``).
        target: the target with its goal, in words.
        figure: the measured figure, with its unit.
        baseline: the baseline of the same run.
        met: the verdict; None for a figure that is reported, not judged.
        limit: for a target not met, the ``bench/README.md`` section of its measured limit.
        bench: the benchmark's name (default: the running script's file name and arguments).
    """
    name = bench or shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])
    entry = TargetRecord(
        issue,
        target,
        figure,
        baseline,
        met,
        name,
        limit if met is False else "",
        _measured_commit(),
        dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    )
    path = targets_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(asdict(entry)) + "\n")
    return entry


def latest(path: Path) -> list[TargetRecord]:
    """The newest record of each target (issue and target text) in ``path``, ordered by issue,
    then as first recorded; a line that is not a record is skipped with a note on stderr."""
    found: dict[tuple[str, str], TargetRecord] = {}
    order: dict[tuple[str, str], int] = {}
    if not path.exists():
        return []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            entry = TargetRecord(**json.loads(line))
        except (ValueError, TypeError) as exc:
            print(f"{path}:{n}: not a target record ({exc}), skipped", file=sys.stderr)
            continue
        key = (entry.issue, entry.target)
        order.setdefault(key, n)
        found[key] = entry

    def issue_key(key: tuple[str, str]) -> tuple[tuple[int, ...], int]:
        return tuple(int(p) for p in key[0].split(".") if p.isdigit()), order[key]

    return [found[k] for k in sorted(found, key=issue_key)]


def _verdict(entry: TargetRecord) -> str:
    if entry.met is None:
        return "reported"
    if entry.met:
        return "met"
    return f"NOT met; limit: bench/README.md, {entry.limit}" if entry.limit else "NOT met"


def summary(records: list[TargetRecord]) -> str:
    """The records as a Markdown table: issue, target, figure, baseline, verdict, benchmark."""
    lines = [
        "| issue | target | figure | baseline, same run | verdict | benchmark |",
        "|---|---|---|---|---|---|",
    ]
    for e in records:
        cells = (
            e.issue,
            e.target,
            e.figure,
            e.baseline or "-",
            _verdict(e),
            f"{e.bench} ({e.commit or '?'})",
        )
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    met = sum(1 for e in records if e.met)
    judged = sum(1 for e in records if e.met is not None)
    lines.append("")
    lines.append(f"{met} of {judged} judged targets met; {len(records) - judged} reported ({targets_file()})")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    """``python bench/_targets.py``: print the table; ``--new``: start a new file (the old one
    kept beside it as ``targets.previous.jsonl``)."""
    path = targets_file()
    if argv[:1] == ["--new"]:
        if path.exists():
            path.replace(path.with_name(path.stem + ".previous" + path.suffix))
        return 0
    records = latest(path)
    if not records:
        print(f"No target was recorded in {path}: run ./workbook bench first.")
        return 0
    print("## The issues' targets, as this run measured them\n")
    print(summary(records))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
