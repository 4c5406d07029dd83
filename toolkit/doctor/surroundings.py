"""What lies around a checkpoint: a statekit write that never finished, a query that looks
live. Neither changes what Spark does on restart; both change what the person on call
should do first."""

from __future__ import annotations

import json
import posixpath
import shlex
import time

from statekit.checkpoint.checkpoint import Checkpoint
from statekit.doctor.problems import FATAL, INFO, WARNING, Problem
from statekit.writes.staging import MARKER


def staging_problems(ckpt: Checkpoint) -> list[Problem]:
    found: list[Problem] = []
    fs, root = ckpt.fs, ckpt.location.root.rstrip("/")
    parent, name = posixpath.split(root)
    staging = posixpath.join(parent, f".{name}.statekit-staging")
    for folder, inside in ((staging, False), (root, True)):
        marker = posixpath.join(folder, MARKER)
        try:
            if not fs.exists(marker):
                continue
            facts = json.loads(fs.cat_file(marker))
        except (OSError, ValueError):
            facts = {}
        argv = facts.get("argv") or []
        again = ("rerun `" + shlex.join(["statekit", *argv[1:]]) + "`"
                 if argv else "rerun the statekit command that wrote it")
        found.append(Problem(
            "unfinished-statekit-write", WARNING if not inside else FATAL,
            ckpt.display(folder),
            ("a statekit write into this folder never finished (its staging folder is still "
             "there)" if not inside else
             "this is a statekit staging folder, not a published checkpoint")
            + (f"; source {facts['source']}" if facts.get("source") else ""),
            "Spark would restart the checkpoint as it is, ignoring the staging folder"
            if not inside else "Spark would run on a checkpoint statekit never verified",
            None if not inside else "not predicted: do not restart on it",
            f"{again}: it removes its stale staging folder; or delete {folder}",
            rollback_fixes=not inside))
    return found


def live_problems(ckpt: Checkpoint) -> list[Problem]:
    from statekit.writes.repartition_plan import looks_live

    live = looks_live(ckpt, time.time() * 1000)
    if not live:
        return []
    return [Problem("looks-live", INFO, ckpt.location.url, live,
                    "a second run on the same checkpoint is refused by Spark while this one "
                    "runs", None, "stop the query before repairing (statekit's writes refuse "
                    "while it looks live)")]
