"""A real S3-protocol server on 127.0.0.1 (moto's) that counts the requests it serves.

Object-storage support is tested end to end through s3fs against this server, and the
request log lets tests and the benchmark prove that a report lists with a handful of LIST
calls instead of one request per file.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import parse_qs

ACCESS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
          "AWS_DEFAULT_REGION": "us-east-1"}


@dataclass
class S3Server:
    endpoint: str
    requests: list[tuple[str, str, str]] = field(default_factory=list)
    """(method, path, query) of every request served, in order."""

    def storage_options(self) -> dict:
        """s3fs options for a fresh, uncached client against this server."""
        return {"key": ACCESS["AWS_ACCESS_KEY_ID"], "secret": ACCESS["AWS_SECRET_ACCESS_KEY"],
                "endpoint_url": self.endpoint,
                "skip_instance_cache": True, "use_listings_cache": False}

    def filesystem(self):
        import s3fs

        options = self.storage_options()
        options.pop("skip_instance_cache")
        return s3fs.S3FileSystem(skip_instance_cache=True, **options)

    def upload(self, local_folder: str, bucket: str, prefix: str) -> str:
        """Copy a local folder (dotfiles included) to ``s3://bucket/prefix``; return the URL."""
        fs = self.filesystem()
        if not fs.exists(bucket):
            fs.mkdir(bucket)
        for folder, _dirs, names in os.walk(local_folder):
            for name in names:
                local = os.path.join(folder, name)
                rel = os.path.relpath(local, local_folder)
                with open(local, "rb") as source:
                    fs.pipe(f"{bucket}/{prefix}/{rel}", source.read())
        return f"s3://{bucket}/{prefix}"

    def reset(self) -> None:
        self.requests.clear()

    def summary(self) -> Counter:
        """Requests by kind: ``LIST``, ``GET``, ``HEAD``, ``PUT`` …"""
        kinds = Counter()
        for method, path, query in self.requests:
            args = parse_qs(query)
            if method == "GET" and ("list-type" in args or path.count("/") <= 1):
                kinds["LIST"] += 1
            else:
                kinds[method] += 1
        return kinds


def start_server() -> tuple[S3Server, object]:
    """Start the server in a daemon thread; returns it and the werkzeug server (to stop)."""
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    os.environ.update(ACCESS)
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app = DomainDispatcherApplication(create_backend_app)
    log: list[tuple[str, str, str]] = []

    def counting_app(environ, start_response):
        log.append((environ["REQUEST_METHOD"], environ.get("PATH_INFO", ""),
                    environ.get("QUERY_STRING", "")))
        return app(environ, start_response)

    server = make_server("127.0.0.1", 0, counting_app, threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return S3Server(endpoint=f"http://127.0.0.1:{server.port}", requests=log), server
