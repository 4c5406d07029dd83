"""A file source's newest log entry lost: what the restart logs in its place.

On restart the file source rebuilds the files it has seen from its log and numbers its next
entry after the newest one left. When the newest entry ``E`` — which the query already ran —
is lost, the restart's first planning takes the files no entry lists, oldest first, up to
``maxFilesPerTrigger``, and logs them as entry ``E`` again; the query's offsets are already
at ``E``, so no batch reads them (measured with pyspark 4.3). The lost entry's own files are
therefore read once, as before — but any file the new entry takes beyond them is taken for
read and never read.

Which files the lost entry held is recorded nowhere, but the input folder says which files
were there when its batch was planned (modified before the commit of the batch before it),
and the log says whether the query reads a limited number of files per batch: a file logged
in a later entry that was already there when an earlier entry was planned was held back by
``maxFilesPerTrigger``, the earlier entry's size. The lost entry took ``min(limit, files
there)``; the new one takes ``min(limit, files unlisted now)``; more means input lost.

Local input only (:mod:`.input_files`): otherwise the outcome is unknown, and said so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.checkpoint.modified import modified_seconds
from statekit.checkpoint.spark_reads import SourceFileEntry
from statekit.doctor.input_files import list_input
from statekit.doctor.problems import LOSES
from statekit.doctor.rereads import file_source_positions


def relogged_outcome(ckpt: Checkpoint, source: int, parsed: Mapping[int, list[SourceFileEntry]],
                     lost: int, local: Mapping[str, str | None]
                     ) -> tuple[str | None, str, bool]:
    """``(outcome, affects, known)`` of entry ``lost`` (the newest) gone from source
    ``source``'s log: ``LOSES`` when the entry logged in its place takes files the lost one
    did not have. ``local``: each listed path's local file (``None``: not local)."""
    if not parsed or any(p is None for p in local.values()):
        return None, "", False
    planned = _planning_times(ckpt, source)
    listing = list_input({p for p in local.values() if p is not None})
    if not listing.complete:
        return None, "", False
    unlisted = [stamp for _path, stamp in listing.unlisted]
    when = planned.get(lost)
    if when is None:
        return None, "", False
    there = sum(1 for stamp in unlisted if stamp <= when)
    limit = _limit(parsed, planned)
    took, takes = min(limit, there), min(limit, len(unlisted))
    if takes > took:
        return LOSES, (f"{takes - took} input file(s) logged with the lost entry's "
                       f"{took} and never read"), True
    return None, "", True


def _planning_times(ckpt: Checkpoint, source: int) -> dict[int, float]:
    """``{source entry: when the batch that logged it was planned}``: the commit of the
    query batch before the one that first read up to the entry."""
    times: dict[int, float] = {}
    previous = -1
    for batch, reached in file_source_positions(ckpt, source):
        if reached > previous:
            stamp = modified_seconds(ckpt.fs, ckpt.location.path("commits", str(batch - 1))) \
                if batch > 0 else None
            if stamp is not None:
                for entry in range(previous + 1, reached + 1):
                    times[entry] = stamp
            previous = reached
    return times


def _limit(parsed: Mapping[int, list[SourceFileEntry]], planned: Mapping[int, float]
           ) -> float:
    """Files per batch, when the log shows files held back (``inf``: no sign of a limit)."""
    entries: dict[int, list[SourceFileEntry]] = {}
    for listed in parsed.values():
        for entry in listed:
            entries.setdefault(entry.batch_id, []).append(entry)
    earliest_later: dict[int, float] = {}  # the oldest file logged after each batch
    oldest = math.inf
    for batch in sorted(entries, reverse=True):
        earliest_later[batch] = oldest
        oldest = min(oldest, *(e.timestamp for e in entries[batch]))
    limit = math.inf
    for batch, files in sorted(entries.items()):
        when = planned.get(batch)
        if when is not None and earliest_later[batch] <= when * 1000:  # one was held back
            limit = min(limit, len(files))
    return limit
