"""The embedded connectors' stored offsets: where each connector resumes in its source's log."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from helpers.errors import RetentionError
from helpers.params import WorkbookParams
from helpers.sources.positions import SourcePosition

__all__ = ["offset_position", "offsets_file", "read_offsets", "stored_offset", "stored_position"]


def read_offsets(path: str | Path) -> dict[str, dict[str, Any]]:
    """The entries of a Kafka ``FileOffsetBackingStore`` file (``offsets.dat``).

    The file is a Java-serialised ``HashMap<byte[], byte[]>`` whose keys and values are JSON
    (``["tickit-ecomm",{"server":"tickit"}]`` -> ``{"file":"mariadb-bin.000003","pos":1234}``).
    Every byte array is a 4-byte big-endian length followed by its bytes; this finds each JSON
    array or object so framed, and pairs them in order (key, value).

    Args:
        path: the file.

    Returns:
        Key JSON text -> value (parsed); empty when the file does not exist or holds no entries.

    Raises:
        RetentionError: when the file exists but holds an odd number of JSON entries (damaged).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    found: list[Any] = []
    i = 4
    while i < len(data):
        if data[i] in (0x7B, 0x5B):  # '{' or '['
            (length,) = struct.unpack(">i", data[i - 4 : i])
            if 0 < length <= len(data) - i:
                chunk = data[i : i + length]
                try:
                    found.append(json.loads(chunk.decode("utf-8")))
                except (UnicodeDecodeError, ValueError):
                    pass
                else:
                    i += length
                    continue
        i += 1
    if len(found) % 2:
        raise RetentionError(
            f"Failed to read offsets {path}: {len(found)} JSON entries, expected key/value pairs"
        )
    return {
        json.dumps(found[k], separators=(",", ":")): found[k + 1]
        for k in range(0, len(found), 2)
        if isinstance(found[k + 1], dict)
    }


def offsets_file(params: WorkbookParams, connector: str) -> Path:
    """The embedded connector's offset file (``<state_dir>/capture/<connector>/offsets.dat``)."""
    return params.state_path / "capture" / connector / "offsets.dat"


def stored_offset(params: WorkbookParams, connector: str) -> dict[str, Any] | None:
    """The embedded connector's stored source offset (the value for its own partition), if any."""
    offsets = read_offsets(offsets_file(params, connector))
    for key, value in offsets.items():
        try:
            name = json.loads(key)[0]
        except (ValueError, IndexError, KeyError, TypeError):
            continue
        if name == connector:
            return value
    return None


def stored_position(params: WorkbookParams, connector: str) -> SourcePosition | None:
    """The log position the embedded connector resumes from (``None`` before its first offset
    flush)."""
    return offset_position(stored_offset(params, connector))


def offset_position(value: dict[str, Any] | None) -> SourcePosition | None:
    """The log position of a Debezium source offset (PostgreSQL ``lsn``..., MySQL ``file`` and
    ``pos``), wherever it is stored; ``None`` for none or another kind."""
    if value is None:
        return None
    if "lsn" in value:
        lsn = max(int(value.get(k) or 0) for k in ("lsn", "lsn_commit", "lsn_proc") if k in value)
        return SourcePosition("postgres", lsn=lsn)
    if "file" in value and "pos" in value:
        return SourcePosition("mysql", file=str(value["file"]), pos=int(value["pos"]))
    return None
