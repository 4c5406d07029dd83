"""Where ``statekit tui --web`` listens: the ``[HOST:]PORT`` it is given, checked and bound.

The socket is bound *before* the server says where it serves, so that "serving http://…" is
never printed for a port it then cannot have: a port in use, a host that does not resolve or
an address this machine does not own is one line and exit 3 (``BadInput``), not a traceback
from deep inside the web framework after the promise was made. Whether the address is
loopback decides whether a browser needs the token (:mod:`statekit.cli.web_token`): only
this machine can reach 127.0.0.0/8 and ::1.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

from statekit.support.errors import BadInput

DEFAULT_HOST = "127.0.0.1"
BACKLOG = 128
"""Connections the kernel queues before the server accepts them (aiohttp's default)."""


def web_address(text: str) -> tuple[str, int]:
    """``PORT``, ``:PORT``, ``HOST:PORT`` or ``[IPV6]:PORT`` → (host, port), the port within
    1–65535; the host defaults to 127.0.0.1. A bad value raises ``BadInput``."""
    host, _, port = text.strip().rpartition(":")
    example = "expected [HOST:]PORT with a port from 1 to 65535, e.g. 8000 or 0.0.0.0:8000"
    if not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise BadInput(f"--web {text!r}: {example}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise BadInput(f"--web {text!r}: an IPv6 host goes in brackets, e.g. [::1]:8000")
    if any(ch.isspace() or ch in "/?#@" for ch in host):
        raise BadInput(f"--web {text!r}: {host!r} is not a host name or address")
    return host or DEFAULT_HOST, int(port)


def is_loopback(host: str) -> bool:
    """Whether only this machine can reach ``host``: 127.0.0.0/8, ::1 or ``localhost``."""
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: whatever it resolves to, others may resolve it too
        return False


def is_wildcard(host: str) -> bool:
    """Whether ``host`` means every address of this machine (0.0.0.0, ::)."""
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


def shown(host: str, port: int) -> str:
    """``HOST:PORT`` as a URL writes it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening; ``BadInput`` when it cannot be.

    ``SO_REUSEADDR`` lets a restarted server take its port back while connections of the
    previous one linger in TIME_WAIT; it does not let two servers share a listening port."""
    where = shown(host, port)
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise BadInput(f"cannot listen on {where}: {reason}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as error:
        sock.close()
        reason = ("address already in use" if error.errno == errno.EADDRINUSE
                  else (error.strerror or str(error)).lower())
        raise BadInput(f"cannot listen on {where}: {reason}") from None
    sock.setblocking(False)
    return sock
