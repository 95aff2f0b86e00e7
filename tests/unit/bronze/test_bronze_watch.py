"""Wake-ups for the continuous Silver job: a Bronze file landing in a local Bronze folder (the
Bronze writer's own rename, into a new day folder) ends the wait at once; temporary names and
other files do not; on S3, before the folder exists, or switched off, the wait is the plain pause."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from helpers.bronze.events import BronzeEvent, marker_event
from helpers.bronze.watch import BronzeWatch
from helpers.bronze.writer import BronzeWriter


def _one_event(topic: str, position: int) -> list[BronzeEvent]:
    """One event as capture writes it (a marker is the smallest such event)."""
    return [marker_event(topic, "resnapshot", "t", {"__lsn": position}, 1_767_225_600_000)]


def _timed_wait(watch: BronzeWatch, timeout_s: float) -> tuple[bool, float]:
    started = time.monotonic()
    landed = watch.wait(timeout_s)
    return landed, time.monotonic() - started


def test_a_file_the_bronze_writer_lands_ends_the_wait(tmp_path: Path) -> None:
    writer = BronzeWriter(tmp_path, "avro")
    with BronzeWatch(tmp_path) as watch:
        assert watch.active
        landed, seconds = _timed_wait(watch, 0.3)
        assert not landed and seconds >= 0.25  # nothing landed: the whole pause
        writer.write_batch(_one_event("tickit.ems.t", 1))  # a new topic and day folder, then the file
        landed, seconds = _timed_wait(watch, 30.0)
        assert landed and seconds < 10.0
        time.sleep(0.3)  # the rest of that write's notices
        watch.take()  # those notices taken, as a round does before its listing
        writer.write_batch(_one_event("tickit.ems.t", 2))  # the day folder exists now: the rename alone
        landed, seconds = _timed_wait(watch, 30.0)
        assert landed and seconds < 10.0
    assert not watch.active


def test_temporary_names_and_other_files_do_not_wake(tmp_path: Path) -> None:
    folder = tmp_path / "tickit.ems.t" / "year=2026" / "month=01" / "day=01"
    folder.mkdir(parents=True)
    with BronzeWatch(tmp_path) as watch:
        (folder / ".tickit.ems.t+1+1+abc.avro.tmp-123").write_bytes(b"partial")
        (folder / "notes.txt").write_text("not Bronze")
        landed, seconds = _timed_wait(watch, 0.5)
        assert not landed and seconds >= 0.45
        (folder / ".tickit.ems.t+1+1+abc.avro.tmp-123").rename(folder / "tickit.ems.t+1+1+abc.avro")
        landed, _ = _timed_wait(watch, 30.0)
        assert landed


def test_without_a_local_folder_the_wait_is_the_pause(tmp_path: Path) -> None:
    for root in ("s3://bucket/bronze", str(tmp_path / "not-yet")):
        watch = BronzeWatch(root)
        assert not watch.start() and not watch.active
        landed, seconds = _timed_wait(watch, 0.3)
        assert not landed and seconds >= 0.25
        watch.stop()
    off = BronzeWatch(tmp_path, enabled=False)  # silver.watch_bronze: false
    assert not off.start()
    stopping = threading.Event()
    stopping.set()  # the job's SIGTERM: the wait ends at its next half-second look, watched or not
    for watch in (off, BronzeWatch(tmp_path)):
        watch.start()
        started = time.monotonic()
        assert not watch.wait(60.0, stop=stopping)
        assert time.monotonic() - started < 10.0  # not the minute's pause (bound loose: shared cores)
        watch.stop()
    later = BronzeWatch(tmp_path / "not-yet")
    (tmp_path / "not-yet").mkdir()
    assert later.start() and later.active  # the folder appeared: the next start watches it
    later.stop()


def test_a_notice_lasts_until_it_is_taken(tmp_path: Path) -> None:
    """A landing stays noticed through waits that time out before it (the job's pause waits in
    short slices) and until :meth:`BronzeWatch.take`, which a round calls before its listing."""
    with BronzeWatch(tmp_path) as watch:
        assert not watch.take()
        BronzeWriter(tmp_path, "avro").write_batch(_one_event("tickit.ems.t", 1))
        landed, _ = _timed_wait(watch, 30.0)
        assert landed
        time.sleep(0.3)  # the rest of that write's notices (the wait took the first)
        watch.take()
        BronzeWriter(tmp_path, "avro").write_batch(_one_event("tickit.ems.t", 2))
        time.sleep(0.5)  # noticed while no one waits
        assert watch.take() and not watch.take()
        assert not watch.wait(0.1)  # taken: nothing left to end a wait
