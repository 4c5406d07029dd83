"""The fleet changing under the services: checkpoints that grow, and one deleted in a loop.

A growing checkpoint gains its source's later batches one at a time, each file written the
way Spark writes it (a temporary name renamed into place on local disk, one PUT on S3) and
in Spark's order: the source's log entry and ``offsets/N`` when the batch is planned, then
the state files of version N+1, then ``commits/N``. A reader that lists in between sees an
uncommitted batch — a normal state of a running query, not a fault.

A deleted checkpoint is removed file by file and written again file by file, over and over:
a reader sees it complete, half gone, missing, half back. Whatever it shows, the service
must answer and keep the other checkpoints' series.

Every loop here is bounded by a stop event and records its errors instead of raising: the
soak reports them (a harness error is not a service failure, and must not look like one).
"""

from __future__ import annotations

import os
import re
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOG_ENTRY = re.compile(r"^\.?(\d+)(\.compact)?(\.crc)?$")
"""``offsets/N``, ``commits/N``, ``sources/0/N[.compact]`` and their ``.crc`` files."""
STATE_FILE = re.compile(r"^\.?(\d+)\.(delta|snapshot|changelog|zip)(\.crc)*$")
"""A state file of version N (and its checksum files)."""


@dataclass(frozen=True)
class Layout:
    """A checkpoint's files: those every batch shares, and each batch's own, in order."""

    base: list[str]
    batches: dict[int, list[str]]
    """Batch N → its files relative to the root, in the order Spark writes them."""


def layout(source: Path) -> Layout:
    sources: dict[int, list[str]] = {}
    offsets: dict[int, list[str]] = {}
    state: dict[int, list[str]] = {}
    commits: dict[int, list[str]] = {}
    base: list[str] = []
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        rel = path.relative_to(source)
        top = rel.parts[0]
        log = LOG_ENTRY.match(path.name)
        kept = STATE_FILE.match(path.name)
        if top == "offsets" and log:
            offsets.setdefault(int(log.group(1)), []).append(str(rel))
        elif top == "commits" and log:
            commits.setdefault(int(log.group(1)), []).append(str(rel))
        elif top == "sources" and log:
            sources.setdefault(int(log.group(1)), []).append(str(rel))
        elif top == "state" and kept:
            state.setdefault(int(kept.group(1)) - 1, []).append(str(rel))  # version N+1
        else:
            base.append(str(rel))
    batches = {n: [*sources.get(n, []), *offsets[n], *state.get(n, []), *commits.get(n, [])]
               for n in sorted(offsets)}
    return Layout(base, batches)


def truncate(source: Path, target: Path, keep: int = 4) -> Path:
    """A copy of ``source`` as it was after its first ``keep`` batches."""
    files = layout(source)
    for rel in files.base + [r for n, rels in files.batches.items() if n < keep for r in rels]:
        (target / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source / rel, target / rel)
    return target


class Sink:
    """Where a churn thread writes: a local folder or an S3 prefix."""

    def put(self, rel: str, data: bytes) -> None:
        raise NotImplementedError

    def remove_all(self) -> None:
        raise NotImplementedError


class LocalSink(Sink):
    def __init__(self, root: Path) -> None:
        self.root = root

    def put(self, rel: str, data: bytes) -> None:
        target = self.root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.parent / f".{target.name}.{uuid.uuid4().hex}.tmp"
        temporary.write_bytes(data)
        os.replace(temporary, target)

    def remove_all(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class S3Sink(Sink):
    def __init__(self, filesystem: Any, url: str) -> None:
        self.fs = filesystem
        self.prefix = url.removeprefix("s3://")

    def put(self, rel: str, data: bytes) -> None:
        self.fs.pipe_file(f"{self.prefix}/{rel}", data)

    def remove_all(self) -> None:
        if self.fs.exists(self.prefix):
            self.fs.rm(self.prefix, recursive=True)


@dataclass
class Churn:
    """A thread that changes one checkpoint until stopped; what it did."""

    name: str
    errors: list[str] = field(default_factory=list)
    steps: int = 0
    """Batches added (growing) or delete-and-write cycles completed (deleted)."""
    last_batch: int | None = None
    """Growing: the last batch whose commit was written."""
    thread: threading.Thread | None = None

    def run(self, body: Callable[[threading.Event], None], stop: threading.Event) -> None:
        def guarded() -> None:
            try:
                body(stop)
            except Exception as failure:  # a harness error: reported, never raised
                self.errors.append(f"{type(failure).__name__}: {failure}")

        self.thread = threading.Thread(target=guarded, name=f"churn-{self.name}", daemon=True)
        self.thread.start()


def grow(name: str, source: Path, sink: Sink, first: int, interval_s: float,
         stop: threading.Event) -> Churn:
    """Add ``source``'s batches from ``first`` on, one every ``interval_s``."""
    files = layout(source)
    churn = Churn(name, last_batch=first - 1)

    def body(stop: threading.Event) -> None:
        for batch in (n for n in files.batches if n >= first):
            if stop.wait(interval_s):
                return
            for rel in files.batches[batch]:
                sink.put(rel, (source / rel).read_bytes())
            churn.steps += 1
            churn.last_batch = batch

    churn.run(body, stop)
    return churn


def delete_and_rewrite(name: str, source: Path, sink: Sink, stop: threading.Event,
                       absent_s: float = 1.0, present_s: float = 2.0) -> Churn:
    """Remove the checkpoint, wait, write it again (file by file), wait; until stopped."""
    files = sorted(str(p.relative_to(source)) for p in source.rglob("*") if p.is_file())
    churn = Churn(name)

    def body(stop: threading.Event) -> None:
        while not stop.is_set():
            sink.remove_all()
            if stop.wait(absent_s):
                break
            for rel in files:
                if stop.is_set():
                    break
                sink.put(rel, (source / rel).read_bytes())
            churn.steps += 1
            stop.wait(present_s)
        # leave it whole, as the last thing a reader might see
        for rel in files:
            sink.put(rel, (source / rel).read_bytes())

    churn.run(body, stop)
    return churn


def join(churns: list[Churn], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    for churn in churns:
        if churn.thread is not None:
            churn.thread.join(max(0.1, deadline - time.monotonic()))
