"""What this machine offers the process: how many CPUs it may use.

``os.sched_getaffinity`` is the honest answer on Linux (a container or ``taskset`` limits
it below ``os.cpu_count()``) but does not exist on macOS or Windows; every caller gets the
same answer, with the fallback, from here.
"""

from __future__ import annotations

import os


def usable_cpus() -> int:
    """CPUs this process may run on (at least 1)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        try:
            return max(1, len(affinity(0)))
        except OSError:  # pragma: no cover - a kernel without the call
            pass
    return max(1, os.cpu_count() or 1)
