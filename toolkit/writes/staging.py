"""Build a new checkpoint beside its final place, and publish it only when complete.

The safety protocol for every write: a crash at any point must leave either no target or a
complete one, and rerunning must succeed. So everything is written into a staging folder
next to the target (``<parent>/.<name>.statekit-staging``), verified there, and then moved
into place in one rename — atomic on a local disk and HDFS. Object stores have no atomic
rename: there the move copies, so the commit of the repartition batch is written *last*
(a target without ``commits/N+1`` is not a finished checkpoint to Spark, and statekit
refuses a non-empty target, so a half-moved target is never mistaken for a good one).

A staging folder carries a marker file naming its source; a rerun removes a stale staging
folder only when that marker says statekit made it.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import sys
import time
from collections.abc import Callable, Iterable

from statekit.checkpoint.location import Location
from statekit.support.errors import UnsafeOperation

MARKER = "_STATEKIT_STAGING"

StepHook = Callable[[str], None]
"""Called before every write step with its name (``write <path>``, ``publish``): the tests'
fault injection raises from it to simulate a crash at that point."""


def _no_hook(_step: str) -> None:
    return None


class Staging:
    """The staging folder of one target."""

    def __init__(self, target: Location, source_url: str, on_step: StepHook | None = None):
        self.target = target
        self.fs = target.fs
        parent, name = posixpath.split(target.root.rstrip("/"))
        self.root = posixpath.join(parent, f".{name}.statekit-staging")
        self.source_url = source_url
        self.on_step = on_step or _no_hook

    @property
    def url(self) -> str:
        """The staging folder as a URL Spark and fsspec both accept."""
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        return self.root if protocol in ("file", "local") else f"{protocol}://{self.root}"

    def path(self, relative: str) -> str:
        return posixpath.join(self.root, relative)

    def prepare(self) -> None:
        """Create the staging folder; remove a stale one statekit left (a crashed run)."""
        if self.fs.exists(self.root):
            if not self.fs.exists(self.path(MARKER)):
                raise UnsafeOperation(f"{self.root} exists and was not made by statekit: "
                                      "remove it or choose another target",
                                      path=self.target.url)
            self.fs.rm(self.root, recursive=True)
        self.fs.makedirs(self.root, exist_ok=True)
        # the command line too: `statekit doctor` on the target tells how to finish it
        self.fs.pipe(self.path(MARKER), json.dumps(
            {"source": self.source_url, "target": self.target.url,
             "started": time.time(), "argv": list(sys.argv)}).encode())

    def write(self, relative: str, data: bytes) -> None:
        self.on_step(f"write {relative}")
        path = self.path(relative)
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        self.fs.pipe(path, data)

    def write_chunks(self, relative: str, chunks: Iterable[bytes]) -> None:
        """Write a file from pieces as they come (a copy of a large SST file never sits in
        memory whole)."""
        self.on_step(f"write {relative}")
        path = self.path(relative)
        self.fs.makedirs(posixpath.dirname(path), exist_ok=True)
        with self.fs.open(path, "wb") as out:
            for piece in chunks:
                out.write(piece)

    def publish(self, last: str) -> None:
        """Move the staging folder into place. ``last`` (relative) is moved after everything
        else where the move is not one atomic rename."""
        self.on_step("publish")
        if self.fs.exists(self.target.root):
            if self.fs.ls(self.target.root, detail=False):
                raise UnsafeOperation("appeared and is not empty while statekit was writing",
                                      path=self.target.url)
            self.fs.rmdir(self.target.root)
        self.fs.rm(self.path(MARKER))
        if "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple)
                      else (self.fs.protocol,)):
            import os

            os.rename(self.root, self.target.root)
            return
        held = self.path(last)
        kept = self.root + ".last"
        self.fs.mv(held, kept)
        self.fs.mv(self.root, self.target.root, recursive=True)
        self.fs.mv(kept, posixpath.join(self.target.root, last))

    def abort(self) -> None:
        if self.fs.exists(self.root):
            self.fs.rm(self.root, recursive=True)

    def abort_settled(self, quiet_s: float = 3.0, timeout_s: float = 60.0,
                      poll_s: float = 0.1) -> bool:
        """Remove the staging folder and keep removing it until it has stayed absent for
        ``quiet_s`` (at most ``timeout_s``); True when it settled.

        For a session that cannot see its executors' tasks (Spark Connect): a failed job's
        other writer tasks are killed asynchronously and one may still create its file, and
        the folders above it, after the first removal."""
        deadline = time.monotonic() + timeout_s
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            self.fs.invalidate_cache(self.root)  # an object store's listing may be cached
            if self.fs.exists(self.root):
                with contextlib.suppress(OSError):  # a writer added to it meanwhile: again
                    self.abort()
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_s:
                return True
            time.sleep(poll_s)
        return False
