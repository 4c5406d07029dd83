"""The storage endpoints of the soak's fleet, all on 127.0.0.1.

* An S3-protocol server (moto's, as the object-store tests use — see tests/s3_server.py) in
  its own process, so that its request handling does not share the harness's interpreter
  lock with the threads that measure.
* A second one that checks credentials, for the bucket read with a wrong secret: it answers
  the 403 a real S3 answers (moto accepts any key until authentication is switched on).
* A silent endpoint: accepts TCP connections and never answers a byte, as a wedged proxy
  or a black-holed load balancer does. A reader without its own deadline hangs on it.
* A refused endpoint: a port with nothing listening.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

import soak_probe
from soak_http import OPENER, wait_ready

from tests.support.ports import free_port

BOOTSTRAP = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing",
             "region_name": "us-east-1"}
"""Moto's placeholder credentials: any key is good until authentication is switched on."""


class S3Store:
    """moto's server in a child process. ``guarded``: it checks credentials (an IAM user's
    key, created here, is the only good one) once :meth:`require_credentials` is called.

    Only the bucket read with wrong credentials lives on a guarded server: moto's
    authentication does not understand presigned (query-string) requests — it answers them
    500 — and statekit's S3 reader presigns its GETs, as real S3 allows.
    """

    def __init__(self, log: Path, guarded: bool = False) -> None:
        port = free_port()
        moto = Path(sys.executable).parent / "moto_server"
        command = [str(moto)] if moto.exists() else [sys.executable, "-m", "moto.server"]
        self._log = log.open("w")
        self.process = subprocess.Popen([*command, "-H", "127.0.0.1", "-p", str(port)],
                                        stdout=self._log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        self.endpoint = f"http://127.0.0.1:{port}"
        self._files: Any = None
        self.key = self.secret = ""
        try:
            wait_ready(self.process, f"{self.endpoint}/moto-api/", poll_s=0.1,
                       exited=lambda: f"moto_server exited with {self.process.returncode}",
                       never=f"moto_server did not answer on {self.endpoint}")
            if guarded:
                self.key, self.secret = self._create_user()
            else:
                self.key, self.secret = BOOTSTRAP["aws_access_key_id"], \
                    BOOTSTRAP["aws_secret_access_key"]
        except BaseException:  # not yet anyone's to close
            self.close()
            raise

    def _client(self, service: str) -> Any:
        import boto3

        signed = ({"aws_access_key_id": self.key, "aws_secret_access_key": self.secret,
                   "region_name": "us-east-1"} if self.key else BOOTSTRAP)
        return boto3.client(service, endpoint_url=self.endpoint, **signed)

    def _create_user(self) -> tuple[str, str]:
        iam = self._client("iam")
        iam.create_user(UserName="statekit-soak")
        iam.put_user_policy(UserName="statekit-soak", PolicyName="everything",
                            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
                                {"Effect": "Allow", "Action": "*", "Resource": "*"}]}))
        made = iam.create_access_key(UserName="statekit-soak")["AccessKey"]
        return made["AccessKeyId"], made["SecretAccessKey"]

    def require_credentials(self) -> None:
        """From now on every request must be signed with a known key (moto's switch)."""
        OPENER.open(urllib.request.Request(
            f"{self.endpoint}/moto-api/reset-auth", data=b"0", method="POST",
            headers={"Content-Type": "text/plain"}), timeout=10).read()

    def options(self, secret: str | None = None) -> dict[str, str]:
        """Storage options (as ``--storage-option`` takes them) for a reader of this store;
        ``secret``: a wrong one."""
        return {"endpoint_url": self.endpoint, "key": self.key,
                "secret": self.secret if secret is None else secret}

    def filesystem(self) -> Any:
        """An s3fs filesystem with the good key (the harness's writer; never cached)."""
        import s3fs

        if self._files is None:
            self._files = s3fs.S3FileSystem(
                key=self.key, secret=self.secret, skip_instance_cache=True,
                use_listings_cache=False, client_kwargs={"endpoint_url": self.endpoint,
                                                         "region_name": "us-east-1"})
        return self._files

    def make_bucket(self, bucket: str) -> None:
        self._client("s3").create_bucket(Bucket=bucket)

    def upload(self, folder: Path, bucket: str, prefix: str) -> str:
        """Copy a local folder (dotfiles included) under ``s3://bucket/prefix``; its URL."""
        client = self._client("s3")
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            client.put_object(Bucket=bucket, Key=f"{prefix}/{path.relative_to(folder)}",
                              Body=path.read_bytes())
        return f"s3://{bucket}/{prefix}"

    def close(self) -> None:
        soak_probe.stop_process(self.process, 10)
        self._log.close()


class SilentEndpoint:
    """Accepts connections and holds them without a byte in answer (bounded: the oldest
    held connection is dropped past ``limit``)."""

    def __init__(self, limit: int = 500) -> None:
        self._server = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.port = self._server.getsockname()[1]
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._held: list[socket.socket] = []
        self._lock = threading.Lock()
        self._limit = limit
        self.accepted = 0
        self._thread = threading.Thread(target=self._serve, name="silent-endpoint",
                                        daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return  # closed
            with self._lock:
                self.accepted += 1
                self._held.append(connection)
                if len(self._held) > self._limit:
                    self._held.pop(0).close()

    def close(self) -> None:
        with contextlib.suppress(OSError):  # shutdown wakes the blocked accept()
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(timeout=5)
        with self._lock:
            for connection in self._held:
                connection.close()
            self._held.clear()


def refused_endpoint() -> str:
    """An address where nothing listens (a free port, left unbound)."""
    return f"http://127.0.0.1:{free_port()}"


def without_proxies(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for the services: no proxy variables (every address is local)."""
    env = dict(os.environ if environ is None else environ)
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy",
                 "ALL_PROXY"):
        env.pop(name, None)
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    return env
