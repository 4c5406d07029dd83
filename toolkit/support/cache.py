"""Where statekit keeps what it computed once and reuses: the shipped package zips
(:mod:`statekit.jobs.shipping`), this machine's speed probe
(:mod:`statekit.recovery.machine_speed`) and what decoding state files found
(:mod:`statekit.state.decode_cache`, in ``decode/``: verdicts and growth replays, keyed by
the identity of every file read).

One folder for all of them, so that a user who wants it elsewhere (a read-only home, a
shared build machine) sets one variable.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "STATEKIT_CACHE_DIR"
"""Overrides the cache folder (default ``$XDG_CACHE_HOME/statekit`` or
``~/.cache/statekit``)."""


def cache_dir() -> Path:
    """The folder statekit caches in (not created here)."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "statekit"
