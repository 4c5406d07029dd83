"""The input files beside a file source's log: the ones its entries name, and the others.

Which files a source read is in its log; which files were there, and when each came, is in
the input folders. Several witnesses hold the two against each other (a file taken out of
an entry, a path that rotted, what a lost entry held), each from one listing of the folders.
Local input only: elsewhere a listing per input folder is not what a doctor's run should
cost.
"""

from __future__ import annotations

import os
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

MAX_FOLDERS = 100
"""The most input folders listed."""


def local_path(path: str) -> str | None:
    """The local file a source log entry's path names (``None``: not a local path)."""
    if path.startswith("file:"):
        return unquote(urlparse(path).path)
    return path if path.startswith("/") else None


@dataclass(frozen=True)
class InputFolders:
    """One listing of the folders of the files a log names."""

    present: frozenset[str]
    """Every path in the folders."""
    unlisted: tuple[tuple[str, float], ...]
    """``(path, modified seconds)`` of each data file (not hidden, not ``_…``) the log does
    not name."""
    complete: bool
    """Every folder could be listed."""


def list_input(named: Collection[str]) -> InputFolders:
    """List the folders of ``named`` (local paths the log names)."""
    present: set[str] = set()
    unlisted: list[tuple[str, float]] = []
    complete = True
    for folder in sorted({os.path.dirname(p) for p in named})[:MAX_FOLDERS]:
        try:
            names = os.listdir(folder)
        except OSError:
            complete = False
            continue
        for name in names:
            path = os.path.join(folder, name)
            present.add(path)
            if name.startswith((".", "_")) or path in named or not os.path.isfile(path):
                continue
            unlisted.append((path, os.stat(path).st_mtime))
    return InputFolders(frozenset(present), tuple(unlisted), complete)
