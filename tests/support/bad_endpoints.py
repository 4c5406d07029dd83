"""Object-store endpoints that misbehave the ways a real one does, on 127.0.0.1.

* :func:`silent_endpoint`: accepts TCP connections and never answers a byte (a load
  balancer in front of a dead store, a firewall that swallows packets after the handshake);
* :func:`refusing_endpoint`: a port nothing listens on (connection refused);
* :func:`refusing_credentials`: a real HTTP server answering every request as S3 answers an
  unknown access key (403 ``InvalidAccessKeyId``), so s3fs and botocore run for real.

Every server here stops, and closes every connection it holds, on the way out.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.support.ports import free_port

INVALID_KEY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InvalidAccessKeyId</Code>'
               b"<Message>The AWS Access Key Id you provided does not exist in our records."
               b"</Message></Error>")


@contextmanager
def silent_endpoint() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of a server that accepts and holds every connection."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(128)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        for connection in held:
            connection.close()
        server.close()


def refusing_endpoint() -> str:
    """``http://127.0.0.1:PORT`` where nothing listens."""
    return f"http://127.0.0.1:{free_port()}"


class _Refuse(BaseHTTPRequestHandler):
    def _refuse(self) -> None:
        self.send_response(403)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(INVALID_KEY)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(INVALID_KEY)

    do_GET = do_HEAD = do_PUT = do_POST = _refuse

    def log_message(self, *_args: object) -> None:
        pass


@contextmanager
def refusing_credentials() -> Iterator[str]:
    """``http://127.0.0.1:PORT`` of an S3 endpoint that knows no access key."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
