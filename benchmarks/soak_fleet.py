"""The soak's fleet: dozens of checkpoints that real Spark queries wrote, a share of them broken.

An SRE's fleet is never all healthy. The services must keep every healthy checkpoint's
series flowing while, next to it, a checkpoint is damaged, one is being deleted under the
reader, one sits behind a folder nobody may read, a bucket's credentials are wrong, and two
endpoints are dead (one refuses, one accepts and never answers). So the fleet mixes, on
local disk and on the S3-protocol server:

* ``healthy``: copies of the repository's real checkpoints (the demo pipeline's two, the
  15 golden ones of Spark 3.5/4.0/4.1 with HDFS and RocksDB stores);
* ``growing``: a copy truncated to its first batches that gains the later ones during the
  soak (soak_churn.py), as a running query's does;
* ``damaged``: a fault of tests/faults.py applied to a copy of the frozen fault corpus (a
  truncated change file, a missing SST, garbage metadata…): the checkpoint still reads, and
  its verdict must be will-not-restart (``statekit_checkpoint_up`` is about reading, and
  the exporter reads these with missing metadata allowed);
* ``deleted``: deleted and written again in a loop while the services read it;
* ``denied``: a folder chmod 000 (the services run without root's override capabilities);
* ``credentials``: a bucket read with a wrong secret;
* ``silent`` / ``refused``: an S3 URL whose endpoint never answers / refuses connections.

Every entry says what a reader must show for it (``expect``), which the soak checks.
Each line of the ``--checkpoints-from`` file is ``URL key=value…  # name kind: source``
(per-line storage options: one file holds every endpoint and every credential).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from soak_storage import S3Store

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
GOLDEN = sorted((DATA / "golden").glob("spark-*/*/checkpoint"))
DEMO = DATA / "demo" / "checkpoint"
LEAKY = DATA / "demo" / "leaky-checkpoint"
CORPUS = DATA / "fault_corpus"

UP, DOWN, WILL_NOT_RESTART, ANY = "up", "down", "will-not-restart", "any"
"""What a reader must show: up 1; up 0 with a reason; up 1 with the verdict
will-not-restart; anything (a checkpoint deleted and recreated in a loop)."""
KINDS = ("healthy", "growing", "damaged", "deleted", "denied", "credentials", "silent",
         "refused")


@dataclass(frozen=True)
class Spec:
    """One checkpoint of the plan, before it exists."""

    kind: str
    where: str
    """``local`` or ``s3``."""
    source: Path
    fault: str = ""
    """A tests/faults.py fault name (damaged) or the folder made unreadable
    (denied, relative to the checkpoint; ``.`` for its root)."""


@dataclass
class Entry:
    """One checkpoint of the fleet, as the services get it."""

    name: str
    kind: str
    where: str
    url: str
    source: str
    expect: str
    fault: str = ""
    options: dict[str, str] = field(default_factory=dict)
    local: Path | None = None
    """The local copy: the checkpoint itself (local) or its staging copy (s3)."""
    origin: Path | None = None
    """The repository's checkpoint it is a copy of."""

    @property
    def healthy(self) -> bool:
        """A checkpoint whose series must never have a gap (healthy and growing)."""
        return self.kind in ("healthy", "growing")

    def public(self) -> dict[str, str]:
        """What the report shows of it (no credentials, no local paths)."""
        return {"name": self.name, "kind": self.kind, "where": self.where, "url": self.url,
                "source": self.source, "expect": self.expect, "fault": self.fault}

    def line(self) -> str:
        options = " ".join(f"{key}={value}" for key, value in self.options.items())
        what = f"{self.kind}: {self.source}" + (f" ({self.fault})" if self.fault else "")
        return f"{self.url} {options}".rstrip() + f"  # {self.name} {what}"


def _corpus(name: str) -> Path:
    return CORPUS / name


def full_plan() -> list[Spec]:
    """The default fleet (57 checkpoints, 20 on S3): every kind, both providers."""
    healthy = [*GOLDEN, DEMO, LEAKY]
    specs = [Spec("healthy", "local", s) for s in healthy]
    specs += [Spec("healthy", "local", s) for s in GOLDEN[::2]]  # a second copy of some
    specs += [Spec("healthy", "s3", s) for s in GOLDEN[1:13]]
    specs += [Spec("growing", "local", DEMO), Spec("growing", "local", _corpus("changelog")),
              Spec("growing", "s3", LEAKY)]
    specs += [Spec("damaged", "local", _corpus("hdfs"), "change-file-truncated"),
              Spec("damaged", "local", _corpus("changelog"), "changelog-truncated"),
              Spec("damaged", "local", _corpus("zips"), "zip-sst-missing"),
              Spec("damaged", "local", _corpus("hdfs"), "partition-folder-missing"),
              Spec("damaged", "local", _corpus("hdfs"), "metadata-garbage"),
              Spec("damaged", "local", _corpus("changelog"), "offsets-folder-missing"),
              Spec("damaged", "s3", _corpus("zips"), "zip-truncated"),
              Spec("damaged", "s3", _corpus("hdfs"), "change-file-missing"),
              Spec("damaged", "s3", _corpus("zips"), "metadata-empty")]
    specs += [Spec("deleted", "local", GOLDEN[0]), Spec("deleted", "s3", GOLDEN[3])]
    specs += [Spec("denied", "local", GOLDEN[5], "."),
              Spec("denied", "local", GOLDEN[7], "offsets"),
              Spec("denied", "local", GOLDEN[9], "state/0/1")]
    specs += [Spec("credentials", "s3", GOLDEN[2]), Spec("silent", "s3", GOLDEN[4]),
              Spec("refused", "s3", GOLDEN[6])]
    return specs


def small_plan() -> list[Spec]:
    """The test's fleet (12 checkpoints): still every kind, on both storages."""
    by_name = {p.parent.name + "@" + p.parents[1].name: p for p in GOLDEN}
    agg = by_name["aggregation_hdfs@spark-4.1.4"]
    dedup = by_name["dedup_rocksdb_changelog@spark-4.0.5"]
    join = by_name["stream_stream_join_hdfs@spark-3.5.9"]
    return [Spec("healthy", "local", agg), Spec("healthy", "local", dedup),
            Spec("healthy", "s3", join),
            Spec("growing", "local", _corpus("changelog")), Spec("growing", "s3", LEAKY),
            Spec("damaged", "local", _corpus("hdfs"), "change-file-truncated"),
            Spec("damaged", "s3", _corpus("zips"), "metadata-garbage"),
            Spec("deleted", "local", agg), Spec("denied", "local", dedup, "."),
            Spec("credentials", "s3", agg), Spec("silent", "s3", agg),
            Spec("refused", "s3", agg)]


def copy_checkpoint(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, symlinks=True)
    return target


def apply_fault(root: Path, fault_name: str) -> str:
    """Damage the copy at ``root`` the way tests/faults.py's fault of that name does;
    returns what it damaged (relative)."""
    from tests.faults import FAULTS, facts_of

    fault = next(f for f in FAULTS if f.name == fault_name)
    return fault.apply(root, facts_of(root))


def expectation(spec: Spec) -> str:
    if spec.kind in ("healthy", "growing"):
        return UP
    if spec.kind == "damaged":
        return WILL_NOT_RESTART
    if spec.kind == "deleted":
        return ANY
    return DOWN


def build(plan: list[Spec], work: Path, store: S3Store, guarded: S3Store, silent: str,
          refused: str, truncate: Callable[[Path, Path], Path]) -> list[Entry]:
    """Materialise ``plan`` under ``work`` (local copies) and on ``store`` (one bucket per
    S3 checkpoint: moto sorts a whole bucket per listing page; the ``credentials`` one on
    ``guarded``, which checks them); ``truncate(source, target)`` makes a growing
    checkpoint's first copy."""
    local_root, staging = work / "local", work / "staging"
    entries: list[Entry] = []
    for index, spec in enumerate(plan):
        name = f"{spec.kind}-{spec.where}-{index:02d}"
        folder = (local_root if spec.where == "local" else staging) / name
        folder.parent.mkdir(parents=True, exist_ok=True)
        if spec.kind == "growing":
            truncate(spec.source, folder)
        else:
            copy_checkpoint(spec.source, folder)
        if spec.kind == "damaged":
            apply_fault(folder, spec.fault)
        entry = Entry(name=name, kind=spec.kind, where=spec.where, url=str(folder),
                      source=str(spec.source.relative_to(DATA)), expect=expectation(spec),
                      fault=spec.fault, local=folder, origin=spec.source)
        if spec.where == "s3":
            bucket = f"soak-{index:02d}-{spec.kind}"
            entry.url = f"s3://{bucket}/checkpoint"
            host = guarded if spec.kind == "credentials" else store
            entry.options = host.options(
                secret="wrong-secret" if spec.kind == "credentials" else None)
            if spec.kind in ("silent", "refused"):  # nothing there ever answers
                entry.options["endpoint_url"] = silent if spec.kind == "silent" else refused
            else:
                host.make_bucket(bucket)
                host.upload(folder, bucket, "checkpoint")
        entries.append(entry)
    return entries


def deny(entries: list[Entry]) -> None:
    """chmod 000 the folder each ``denied`` entry names (last: copying needed it)."""
    for entry in entries:
        if entry.kind == "denied" and entry.local is not None:
            os.chmod(entry.local / entry.fault, 0)


def allow(entries: list[Entry]) -> None:
    """Undo :func:`deny` (so the work folder can be removed)."""
    for entry in entries:
        if entry.kind == "denied" and entry.local is not None:
            target = entry.local / entry.fault
            if target.exists():
                os.chmod(target, 0o755)


def write_list(entries: list[Entry], path: Path) -> Path:
    """The ``--checkpoints-from`` file: one line per checkpoint, its options on the line."""
    lines = ["# statekit soak fleet: URL [key=value …]  # name kind: source (fault)",
             *(entry.line() for entry in entries)]
    path.write_text("\n".join(lines) + "\n")
    return path
