"""HTTP to the soak's own servers on 127.0.0.1: one proxy-less opener, one readiness wait.

The soak starts several HTTP servers of its own (moto's S3 servers in soak_storage.py,
Prometheus in soak_services.py), and each is of use only once it answers. They share the
wait here: poll the process (an early exit is reported at once, with what the caller knows
of it), GET its readiness URL until a request succeeds, give up after a bound. A server
that answers an HTTP error is not ready yet (Prometheus' ``/-/ready`` answers 503 until it
is), so such an answer is retried like a refused connection.
"""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Callable
from typing import Any

OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""urllib without any proxy from the environment: every address here is 127.0.0.1."""


def wait_ready(process: subprocess.Popen[Any], url: str, *, exited: Callable[[], str],
               never: str, poll_s: float, timeout_s: float = 60) -> None:
    """GET ``url`` until a request succeeds. RuntimeError(``exited()``) as soon as
    ``process`` has ended; RuntimeError(``never``) when ``timeout_s`` passed first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(exited())
        try:
            OPENER.open(url, timeout=5).read()
            return
        except OSError:  # refused, reset, timed out, or an HTTP error status: not yet
            time.sleep(poll_s)
    raise RuntimeError(never)
