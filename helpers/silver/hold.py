"""Holding the continuous Silver job's rounds while another process needs the cores.

The conformance scenarios (:mod:`helpers.checks.conformance`) script changes on the sources and
ingest them into Silver variants of their own, in the notebook's Spark driver. On the local
machine's two cores the continuous job's rounds, ingesting the same changes into the workbook's
own tables, took a fifth to a quarter of a short set's time (``bench/README.md``, "The continuous
job held during a run"). A run therefore *holds* the job: the job skips its rounds while held and takes
everything that landed meanwhile in its next round once the hold ends. Nothing is lost or applied
twice: a held job only waits, and Bronze keeps every file until a commit takes it.

A hold is a claim file under ``<state_dir>/silver/holds/``, named after the holding process
(:func:`helpers.proc.process_identity`: its pid and start time) and holding its pid and reason. A
claim counts only while that very process runs, so a holder that is killed (``kill -9``, a kernel
restart) stalls nothing: the job ignores and removes its claim.

The PySpark engine's job honours holds. The streamer engine's job (``silver.engine: streamer``)
does not: HoodieStreamer's continuous mode has no pause, so it ingests beside the holder as before.

Example:
    >>> with hold_rounds(params, "conformance scenarios"):   # doctest: +SKIP
    ...     run_the_scenarios()
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers.params import WorkbookParams
from helpers.proc import identity_alive, process_identity, replace_text

__all__ = ["HOLDS_DIR", "hold_rounds", "holders"]

#: Under the job's directory (``<state_dir>/silver``): one claim file per hold.
HOLDS_DIR = "holds"


def _holds(directory: Path) -> Path:
    return directory / HOLDS_DIR


@contextlib.contextmanager
def hold_rounds(params: WorkbookParams, reason: str) -> Iterator[Path]:
    """Hold the continuous Silver job's rounds of ``params``'s state directory for the block.

    The claim is written (atomically) before the block starts and removed when it ends, however
    it ends. A job round that began before the claim finishes; the next ones wait.

    Args:
        params: the workbook parameters (the state directory holds the claim).
        reason: what holds the job, shown in its status (``./workbook status``).

    Yields:
        The claim file.
    """
    claim = _holds(params.state_path / "silver") / f"{process_identity()}-{uuid.uuid4().hex[:8]}.json"
    claim.parent.mkdir(parents=True, exist_ok=True)
    replace_text(claim, json.dumps({"pid": os.getpid(), "reason": reason, "since": time.time()}))
    try:
        yield claim
    finally:
        claim.unlink(missing_ok=True)


def holders(directory: Path) -> list[dict[str, Any]]:
    """The live holds on the job of ``directory`` (``<state_dir>/silver``), oldest first.

    A claim whose process no longer runs (or whose pid now names another process, told apart by
    its start time) is removed; so is one that cannot be read (a claim is written whole, so that
    is damage, and a hold nobody can end must not stall the job).
    """
    folder = _holds(directory)
    if not folder.is_dir():
        return []
    live = []
    for claim in sorted(folder.glob("*.json")):
        body = None
        if identity_alive(claim.stem.rsplit("-", 1)[0]):  # <pid>-<start>-<hold>.json
            try:
                body = json.loads(claim.read_text())
            except FileNotFoundError:  # ended while listed
                continue
            except ValueError:  # damaged: a claim is written whole
                pass
        if isinstance(body, dict):
            live.append(body)
        else:
            claim.unlink(missing_ok=True)
    return sorted(live, key=lambda b: float(b.get("since", 0.0)))
