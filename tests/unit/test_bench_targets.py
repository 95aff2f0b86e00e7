"""The benchmarks' record of the issues' targets (``bench/_targets.py``): what ``./workbook bench``
prints at its end, and the limits it points to staying true to ``bench/README.md``."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import ModuleType

import pytest
from support.bench_modules import load_bench_module

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def targets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.setenv("WORKBOOK_BENCH_TARGETS", str(tmp_path / "results" / "targets.jsonl"))
    return load_bench_module("_targets", monkeypatch)


def test_the_newest_record_of_each_target_wins_and_issues_sort_by_number(targets: ModuleType) -> None:
    targets.record("30.5", "idle <= 2 %", "3.1 %", "3.8 %", False, limit='"An idle pipeline"', bench="b1")
    targets.record(
        "25", "spread >= 1.6x", "1.46x", "56 s", False, limit='"The spread job by job"', bench="b2"
    )
    targets.record("30.10", "tenth", "1", "", None, bench="b3")
    targets.record("30.5", "idle <= 2 %", "1.9 %", "3.8 %", True, limit='"An idle pipeline"', bench="b4")
    found = targets.latest(targets.targets_file())
    assert [(r.issue, r.figure) for r in found] == [("25", "1.46x"), ("30.5", "1.9 %"), ("30.10", "1")]
    assert found[1].limit == ""  # a met target names no limit
    table = targets.summary(found)
    assert (
        '| 25 | spread >= 1.6x | 1.46x | 56 s | NOT met; limit: bench/README.md, "The spread job by job" |'
        in table
    )
    assert "| 30.5 | idle <= 2 % | 1.9 % | 3.8 % | met | b4 (" in table
    assert "| 30.10 | tenth | 1 | - | reported |" in table
    assert "1 of 2 judged targets met; 1 reported" in table


def test_a_new_run_keeps_the_previous_record_aside_and_a_bad_line_is_skipped(
    targets: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    path = targets.targets_file()
    targets.record("25", "t", "1", "0", True, bench="b")
    with path.open("a") as out:
        out.write("not json\n" + json.dumps({"issue": "25"}) + "\n")
    assert [r.figure for r in targets.latest(path)] == ["1"]
    assert capsys.readouterr().err.count("not a target record") == 2
    assert targets.main(["--new"]) == 0
    assert not path.exists() and path.with_name("targets.previous.jsonl").exists()
    assert targets.main([]) == 0
    assert "No target was recorded" in capsys.readouterr().out


def test_a_record_names_the_commit_its_benchmark_started_at(
    targets: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit landing while a benchmark runs does not take its figures: the record names the
    commit at the start, and the later ``HEAD`` beside it."""
    monkeypatch.setattr(targets, "_STARTED_AT", "aaaaaaa")
    monkeypatch.setattr(targets, "_commit", lambda: "aaaaaaa")
    assert targets.record("25", "t", "1", "0", True, bench="b").commit == "aaaaaaa"
    monkeypatch.setattr(targets, "_commit", lambda: "bbbbbbb")
    assert targets.record("25", "t", "2", "0", True, bench="b").commit == "aaaaaaa; HEAD bbbbbbb at the end"


def test_every_limit_a_benchmark_names_is_a_section_of_bench_readme() -> None:
    """A target not met points to where bench/README.md takes its limit apart: that section must
    exist under the name given."""
    headings = [
        line.lstrip("#").strip()
        for line in (ROOT / "bench" / "README.md").read_text().splitlines()
        if line.startswith("#")
    ]
    named = []
    for script in sorted((ROOT / "bench").glob("bench_*.py")):
        for limit in re.findall(r"limit=(['\"])(.*?)\1,?\n", script.read_text()):
            sections = re.findall(r'"((?:[^"\\]|\\.)+)"', limit[1])
            named += [(script.name, s.replace("\\'", "'")) for s in sections[:1]]
    assert len(named) >= 8, named
    missing = [(script, s) for script, s in named if not any(h.startswith(s) for h in headings)]
    assert not missing


def test_every_benchmark_is_run_by_workbook_bench() -> None:
    """``./workbook bench`` (``bench/run_all.sh``) runs every ``bench/bench_*.py``, as bench/README.md
    says; a benchmark left out of its list would go unmeasured on a fresh clone."""
    listed = set(re.findall(r'^\s+"(bench_\w+)\|', (ROOT / "bench" / "run_all.sh").read_text(), flags=re.M))
    scripts = {p.stem for p in (ROOT / "bench").glob("bench_*.py")}
    missing = {"not run": sorted(scripts - listed), "no such script": sorted(listed - scripts)}
    assert scripts == listed, missing
