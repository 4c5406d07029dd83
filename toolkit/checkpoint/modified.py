"""When a file was last modified, as every filesystem statekit reads says it.

fsspec's ``info`` names the time differently per store (``mtime`` locally, ``LastModified``
on S3, ``updated`` on GCS, ``modificationTime`` on WebHDFS, in milliseconds) and in
different types (a float, a ``datetime``). The decode cache keys objects by it, and the
doctor orders files by it (a copy is written after the files Spark wrote around it): both
read it here.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

STAMP_KEYS = ("mtime", "LastModified", "last_modified", "updated", "modificationTime")


def seconds_of(stamp: Any) -> float | None:
    """A listing's modification time in seconds since the epoch (``None``: not one)."""
    if isinstance(stamp, datetime):
        return stamp.timestamp()
    if isinstance(stamp, (int, float)) and not isinstance(stamp, bool) and stamp > 0:
        return stamp / 1000 if stamp > 1e11 else float(stamp)  # WebHDFS gives milliseconds
    return None


def info_seconds(info: Mapping[str, Any]) -> float | None:
    """The modification time an fsspec ``info`` (or listing entry) gives, in seconds."""
    return next((s for s in map(seconds_of, (info.get(k) for k in STAMP_KEYS))
                 if s is not None), None)


def modified_seconds(fs: Any, path: str) -> float | None:
    """When ``path`` was last modified (``None``: it is gone, or the store does not say)."""
    try:
        return info_seconds(fs.info(path))
    except OSError:
        return None
