"""A free TCP port on the loopback interface, for servers the tests start (Prometheus, the
Spark standalone cluster, the TUI served to browsers)."""

from __future__ import annotations

import socket


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
