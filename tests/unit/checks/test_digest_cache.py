"""The digest cache of the whole-table checks: a hit only under the same fingerprint, never a
failure of the check because of the cache."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from helpers.checks.digest_cache import DigestCache, fingerprint
from helpers.checks.digests import bucket_digests


def _digests() -> object:
    table = pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]})
    return bucket_digests(table, ["id", "name"], ["id"])


def test_a_side_is_found_under_its_fingerprint_only(tmp_path: Path) -> None:
    cache = DigestCache(tmp_path / "parity")
    digests = _digests()
    files = [("/lake/t/a.avro", 10, 1.0)]
    print_ = fingerprint(files, ["id"], "postgres")
    cache.put("bronze:t", print_, digests, {"events": 3, "redelivered": 0})  # type: ignore[arg-type]
    assert cache.get("bronze:t", print_) == (digests, {"events": 3, "redelivered": 0})
    grown = fingerprint([*files, ("/lake/t/b.avro", 12, 2.0)], ["id"], "postgres")
    assert cache.get("bronze:t", grown) is None  # a new file: computed again
    assert cache.get("bronze:u", print_) is None  # another side
    assert fingerprint(files, ["id"], "mysql") != print_


def test_the_newest_entry_replaces_the_one_before(tmp_path: Path) -> None:
    cache = DigestCache(tmp_path)
    cache.put("silver:x", "one", _digests())  # type: ignore[arg-type]
    cache.put("silver:x", "two", _digests())  # type: ignore[arg-type]
    assert cache.get("silver:x", "one") is None and cache.get("silver:x", "two") is not None
    assert len(list(tmp_path.iterdir())) == 1


def test_a_damaged_or_unwritable_cache_is_a_miss_not_an_error(tmp_path: Path) -> None:
    cache = DigestCache(tmp_path / "parity")
    cache.put("silver:x", "p", _digests())  # type: ignore[arg-type]
    (entry,) = (tmp_path / "parity").iterdir()
    entry.write_text('{"side": "silver:x", "fingerprint": "p", "buckets": [[1, 2]]}')
    assert cache.get("silver:x", "p") is None
    entry.write_text("not json")
    assert cache.get("silver:x", "p") is None
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # a folder cannot be made under a file, not even by root
    unwritable = DigestCache(blocked / "parity")
    unwritable.put("silver:x", "p", _digests())  # type: ignore[arg-type]
    assert unwritable.get("silver:x", "p") is None
