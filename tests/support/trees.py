"""Fingerprints of folder trees, for the tests that prove a command left its source untouched.

Lives here rather than in a test module because the CLI, repartition, migrate, rollback, evict,
doctor, TUI and oracle tests all compare a checkpoint's ``tree_hash`` before and after.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path


def tree_hash(root: Path) -> dict[str, str]:
    """Content hash of every file (dotfiles included) plus the folder structure. Links,
    FIFOs and other special files count by what they are, never opened (a FIFO would block)."""
    digest = {}
    for folder, dirs, names in os.walk(root):
        for name in dirs:
            digest[os.path.relpath(os.path.join(folder, name), root) + "/"] = "dir"
        for name in names:
            path = os.path.join(folder, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                seen = f"link to {os.readlink(path)}"
            elif not stat.S_ISREG(mode):
                seen = f"special file {stat.S_IFMT(mode):o}"
            else:
                seen = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            digest[os.path.relpath(path, root)] = seen
    return digest
