"""What a Silver round needs to know of its table, read once from the timeline: the Bronze
checkpoint, the stored column types, the tombstone state and whether the table exists yet.

Every piece lives in the ``extraMetadata`` of the newest data commit that carries it
(``docs/architecture.md``, "Silver ingestion"); :func:`read_table_state` reads the commits
newest first and stops as soon as it has all of them.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from helpers.bronze.read import arrow_type
from helpers.hudi.timeline import Instant, completed_instants, read_commit_metadata
from helpers.lake_store import LakeStore, open_store
from helpers.silver.checkpoint import CHECKPOINT_KEY, FILES_KEY, BronzeCheckpoint

__all__ = [
    "BRONZE_OWNER_KEY",
    "POSITION_KEY",
    "STREAMER_CHECKPOINT_KEY",
    "STREAMER_RESET_KEY",
    "TOMBSTONES_KEY",
    "TOMBSTONES_OLDEST_KEY",
    "TableState",
    "read_table_state",
    "state_from_metadata",
]

TOMBSTONES_KEY = "workbook.tombstones.file"
TOMBSTONES_OLDEST_KEY = "workbook.tombstones.oldest"  # epoch s of the oldest tombstone in that state
#: The newest source log position among the events taken so far (``_cdc_position``'s text): how far
#: the table's data goes, for a check at a known position (:mod:`helpers.checks.divergence`).
POSITION_KEY = "workbook.source.position"
#: The id of the capture state whose Bronze zone the events taken so far came from (the zone's
#: owner record, :class:`helpers.bronze.store.BronzeOwner`): a zone of another id holds another
#: history (:func:`helpers.silver.tables.bronze_lineage`).
BRONZE_OWNER_KEY = "workbook.bronze.owner"
#: HoodieStreamer's own checkpoint (``silver.engine: streamer``): for Bronze files, the newest
#: modification time taken, in epoch milliseconds (Hudi's ``DFSPathSelector``).
STREAMER_CHECKPOINT_KEY = "deltastreamer.checkpoint.key"
#: The ``--checkpoint`` a HoodieStreamer run was given, recorded with its commit (it is used once).
STREAMER_RESET_KEY = "deltastreamer.checkpoint.reset_key"


@dataclass(frozen=True)
class TableState:
    """A Silver table as its newest commits leave it.

    Attributes:
        instants: the completed data commits, oldest first (none: the table is not written yet).
        checkpoint: the Bronze files taken (:mod:`helpers.silver.checkpoint`).
        stored_types: column name to type (as Arrow types) of the newest commit's writer schema.
        tombstones: the tombstone state's name ("" for none, :mod:`helpers.silver.tombstones`).
        tombstones_oldest: when the oldest tombstone of that state was made (epoch s; None unknown).
        position: the newest source log position taken (``_cdc_position``'s text; None: not
            recorded, as by commits before it was, or a table ordered by a field of its own).
        streamer_checkpoint: HoodieStreamer's checkpoint of the newest commit that has one (the
            streamer engine's commits; None: no such commit).
        streamer_reset: the ``--checkpoint`` that commit was given (None: none).
        bronze_owner: the owner id of the Bronze zone the checkpoint's files came from (None: not
            recorded, as by commits before it was, or a zone with no owner record).
    """

    instants: tuple[Instant, ...] = ()
    checkpoint: BronzeCheckpoint = field(default_factory=BronzeCheckpoint)
    stored_types: dict[str, pa.DataType] = field(default_factory=dict)
    tombstones: str = ""
    tombstones_oldest: float | None = None
    position: str | None = None
    streamer_checkpoint: str | None = None
    streamer_reset: str | None = None
    bronze_owner: str | None = None

    @property
    def is_new(self) -> bool:
        """Whether the table has no completed data commit yet."""
        return not self.instants


def _types(schema_text: str) -> dict[str, pa.DataType]:
    out = {}
    for f in json.loads(schema_text).get("fields", []):
        try:
            out[f["name"]] = arrow_type(f["type"])
        except (KeyError, StopIteration, TypeError):
            continue  # a type the events never carry (fixed without a logical type, ...)
    return out


def state_from_metadata(
    instants: tuple[Instant, ...], metadata_newest_first: Iterable[dict[str, Any]]
) -> TableState:
    """The :class:`TableState` of a timeline: ``metadata_newest_first`` is read only until the
    checkpoint (with the position taken), the writer schema and the tombstone state are found (it
    may be lazy).

    Commits written before the checkpoint existed carry only their own files: those are united
    (watermark 0), which is exact while the timeline is complete.
    """
    checkpoint: BronzeCheckpoint | None = None
    legacy: set[str] = set()
    types: dict[str, pa.DataType] | None = None
    stones: tuple[str, float | None] | None = None
    position: str | None = None
    owner: str | None = None
    streamer: str | None = None
    reset: str | None = None
    for meta in metadata_newest_first:
        extra: dict[str, Any] = meta.get("extraMetadata") or {}
        if streamer is None and checkpoint is None and extra.get(STREAMER_CHECKPOINT_KEY):
            # the streamer engine wrote after the newest workbook checkpoint (silver.engine was
            # switched): its files are those modified up to its checkpoint's millisecond
            streamer = str(extra[STREAMER_CHECKPOINT_KEY])
            reset = extra.get(STREAMER_RESET_KEY) or None
            if streamer.isdigit():
                checkpoint = BronzeCheckpoint((int(streamer) + 1) / 1000, frozenset())
        if checkpoint is None:
            if extra.get(CHECKPOINT_KEY):
                state = BronzeCheckpoint.from_json(extra[CHECKPOINT_KEY])
                checkpoint = BronzeCheckpoint(state.watermark, state.files | frozenset(legacy))
                position = extra.get(POSITION_KEY) or None  # written with every checkpoint
                owner = extra.get(BRONZE_OWNER_KEY) or None  # so is the zone's owner
            elif extra.get(FILES_KEY):
                legacy.update(json.loads(extra[FILES_KEY]))
        if types is None and extra.get("schema"):
            types = _types(extra["schema"])
        if stones is None and TOMBSTONES_KEY in extra:
            oldest = extra.get(TOMBSTONES_OLDEST_KEY)
            stones = (str(extra[TOMBSTONES_KEY]), float(oldest) if oldest else None)
        if checkpoint is not None and types is not None and stones is not None:
            break
    return TableState(
        instants=instants,
        checkpoint=checkpoint or BronzeCheckpoint(0.0, frozenset(legacy)),
        stored_types=types or {},
        tombstones=stones[0] if stones else "",
        tombstones_oldest=stones[1] if stones else None,
        position=position,
        streamer_checkpoint=streamer,
        streamer_reset=reset,
        bronze_owner=owner,
    )


#: The states read last, per table location, with the timeline they were read from: a completed
#: instant's file never changes (a rollback or archival removes it, which changes the listing), so
#: the same listing means the same state. An idle round then lists the timeline and parses nothing.
_STATES: OrderedDict[str, TableState] = OrderedDict()
_STATES_LOCK = threading.Lock()
_STATES_KEPT = 64


def read_table_state(base_path: str, store: LakeStore | None = None) -> TableState:
    """The table's :class:`TableState`: one listing of the timeline, then the commits' metadata
    newest first, only as far as :func:`state_from_metadata` needs (not at all when the listing is
    the one the state was last read from)."""
    store = store or open_store(str(base_path))
    instants = tuple(completed_instants(base_path, store=store))
    key = str(base_path)
    with _STATES_LOCK:
        known = _STATES.get(key)
    if known is not None and known.instants == instants:
        return known
    lazy = (read_commit_metadata(base_path, i, store) for i in reversed(instants))
    state = state_from_metadata(instants, lazy)
    with _STATES_LOCK:
        _STATES[key] = state
        _STATES.move_to_end(key)
        while len(_STATES) > _STATES_KEPT:
            _STATES.popitem(last=False)
    return state
