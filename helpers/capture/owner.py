"""Which state directory's capture writes a Bronze zone: a local state directory holds the source
servers whose log positions order Bronze's events, so two of them must never write one zone.

A state directory deleted while its lake is kept (a reset that forgot the lake), or a second
overlay pointed at another's zones, would otherwise add a new server's snapshot to the old server's
events. Their log positions start again from the new server's, so replay and Silver order the two
histories as one: old events can win over new ones, and the first sign is notebook 02 or 03
finding a table that differs, without the reason.

So the first capture that a state directory starts on a Bronze zone (an embedded worker, or the
local-kafka profile's Bronze sink) writes the zone's owner file (:data:`~helpers.bronze.store.OWNER_FILE`,
at the zone's root, beside the topic folders: no reader lists it; :meth:`BronzeStore.owner
<helpers.bronze.store.BronzeStore.owner>` reads it), naming the state directory's own random id
(:data:`STATE_ID_FILE`, made once). Every later start on that zone, from any state directory,
compares: the same id goes on; another one stops with :class:`~helpers.errors.CaptureError` naming
both state directories and the ways out. A zone that holds no owner file (made before this check)
is claimed by the first state directory that starts capture on it. ``docs/operations.md``, "A
state directory and its lake". A Silver table records the owner of the zone it was built from
with each commit and refuses a zone of another history (:func:`helpers.silver.tables.bronze_lineage`).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from helpers.bronze.store import OWNER_FILE, BronzeStore
from helpers.errors import BronzeError, CaptureError
from helpers.lake_store import is_s3, join
from helpers.local.credentials import write_private
from helpers.local.s3 import S3Connection, boto3_s3_client

__all__ = ["OWNER_FILE", "STATE_ID_FILE", "claim_bronze", "state_id"]

#: A state directory's own id, under its ``capture/`` folder.
STATE_ID_FILE = "state-id"


def state_id(state_dir: Path) -> str:
    """The state directory's random id, made on first use (:func:`write_private`: of two racing
    callers, the first one's stays)."""
    path = Path(state_dir) / "capture" / STATE_ID_FILE
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_private(path, uuid.uuid4().hex)
    return path.read_text(encoding="utf-8").strip()


def claim_bronze(bronze_root: Path | str, state_dir: Path, s3: S3Connection | None = None) -> None:
    """Claim the Bronze zone ``bronze_root`` (a folder or an ``s3://`` URI, on the local S3 server
    ``s3`` or, None, AWS) for ``state_dir``'s capture, or check that it already is its own (module
    docstring).

    Raises:
        CaptureError: when another state directory's capture wrote the zone, naming both and the
            ways out; or when the owner file cannot be read.
    """
    root = str(bronze_root)
    store = BronzeStore(root, boto3_s3_client(s3) if is_s3(root) else None)
    me, mine = state_id(state_dir), str(Path(state_dir).resolve())
    try:
        owner = store.owner()
    except BronzeError as exc:
        raise CaptureError(str(exc)) from None
    if owner is None:
        store.lake.write(OWNER_FILE, json.dumps({"state_id": me, "state_dir": mine}, indent=1).encode())
        return
    if owner.state_id == me:
        return
    their_dir = owner.state_dir
    whose = (
        f"an earlier state directory at this same path ({mine}), deleted or made again since, wrote it"
        if their_dir == mine
        else f"the capture of another state directory ({their_dir}) wrote it, not this one ({mine})"
    )
    raise CaptureError(
        f"Failed to start capture into Bronze zone {root}: {whose}. Its events come from other "
        "source servers, whose log positions would be ordered with this state's as one history. "
        "Give this state lake zones of its own (--set lake.bronze=... --set lake.silver=...), or "
        "start over by deleting this Bronze zone and its Silver zone (lake.silver), or go back to "
        f"the state directory that {join(root, OWNER_FILE)} names"
    )
