"""A read-only S3-protocol server for a local folder, behind a proxy that adds latency.

moto (``tests/s3_server.py``) is the S3 server the tests use, but it re-scans and re-sorts the
whole bucket for every ListObjectsV2 page: at 200k–800k objects one page costs seconds, so it
cannot stand in for S3 in a benchmark at production scale. This server keeps the keys sorted
once and answers a page with a binary search, which is what S3 itself does (its listing cost
does not grow with the bucket). It serves what statekit reads: ListObjectsV2 (prefix,
delimiter, start-after, continuation-token, max-keys), GET with ``Range``, HEAD, and the
bucket probes s3fs makes. It never writes.

Every request waits a fixed time before it is answered (S3's first-byte latency is typically
20–80 ms) and is counted by kind. Serving a folder, the server does both itself: in front of
it a proxy would double the work of a process that stands in for S3's unlimited capacity
on the benchmark's own cores. ``--upstream URL`` runs the same as a proxy in front of
another S3 server (moto).

Run: ``python -m tests.s3_lite --root DIR --bucket NAME --latency-ms 50`` — prints one JSON
line ``{"endpoint": …, "server": …}`` when ready; ``GET /_statekit/stats`` on the proxy
returns the request counts, ``POST /_statekit/reset`` clears them.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import bisect
import email.utils
import hashlib
import json
import os
import sys
from collections import Counter
from xml.sax.saxutils import escape

from aiohttp import ClientSession, TCPConnector, web

_NS = "http://s3.amazonaws.com/doc/2006-03-01/"
_MODIFIED = "2026-01-01T00:00:00.000Z"
_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding",
        "host", "proxy-connection", "upgrade"}


class Bucket:
    """The files below ``root`` as sorted S3 keys."""

    def __init__(self, root: str, name: str, hide_crc: bool = False) -> None:
        self.name = name
        self.files: dict[str, tuple[str, int]] = {}
        for folder, _dirs, names in os.walk(root):
            for file in names:
                if hide_crc and file.endswith(".crc"):
                    continue
                path = os.path.join(folder, file)
                key = os.path.relpath(path, root).replace(os.sep, "/")
                self.files[key] = (path, os.path.getsize(path))
        self.keys = sorted(self.files)
        self.contents = {  # a page is a join of these: the server stays cheap at 1000/page
            key: f"<Contents><Key>{escape(key)}</Key><LastModified>{_MODIFIED}</LastModified>"
                 f"<ETag>{escape(_etag(path, size))}</ETag><Size>{size}</Size>"
                 "<StorageClass>STANDARD</StorageClass></Contents>"
            for key, (path, size) in self.files.items()}

    def list_page(self, prefix: str, delimiter: str, after: str, max_keys: int
                  ) -> tuple[list[str], list[str], str | None]:
        """(keys, common prefixes, next marker) of one page."""
        index = bisect.bisect_right(self.keys, after) if after else 0
        if after and delimiter and after.endswith(delimiter):  # resume past a common prefix
            index = bisect.bisect_left(self.keys, after[:-1] + chr(ord(after[-1]) + 1))
        index = max(index, bisect.bisect_left(self.keys, prefix))
        keys: list[str] = []
        prefixes: list[str] = []
        last = None
        while index < len(self.keys) and len(keys) + len(prefixes) < max_keys:
            key = self.keys[index]
            if not key.startswith(prefix):
                break
            rest = key[len(prefix):]
            if delimiter and delimiter in rest:
                common = prefix + rest[:rest.index(delimiter) + len(delimiter)]
                prefixes.append(common)
                last = common
                # skip every key below this common prefix
                index = bisect.bisect_left(self.keys, common[:-1] + chr(ord(common[-1]) + 1))
                continue
            keys.append(key)
            last = key
            index += 1
        more = index < len(self.keys) and self.keys[index].startswith(prefix)
        return keys, prefixes, last if more else None


def _token(marker: str) -> str:
    return base64.urlsafe_b64encode(marker.encode()).decode()


def _marker(token: str) -> str:
    return base64.urlsafe_b64decode(token.encode()).decode()


def _error(status: int, code: str, message: str) -> web.Response:
    body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
            f"<Message>{escape(message)}</Message></Error>")
    return web.Response(status=status, body=body.encode(), content_type="application/xml")


def _etag(path: str, size: int) -> str:
    return '"' + hashlib.md5(f"{path}:{size}".encode()).hexdigest() + '"'


def make_server_app(bucket: Bucket, latency_s: float = 0.0) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        if latency_s:
            await asyncio.sleep(latency_s)
        parts = request.path.lstrip("/").split("/", 1)
        if parts[0] != bucket.name:
            return _error(404, "NoSuchBucket", "The specified bucket does not exist")
        key = parts[1] if len(parts) > 1 else ""
        if request.method not in ("GET", "HEAD"):
            return _error(403, "AccessDenied", "this test server is read-only")
        if not key:
            return _bucket_request(request, bucket)
        found = bucket.files.get(key)
        if found is None:
            return _error(404, "NoSuchKey", "The specified key does not exist.")
        path, size = found
        headers = {"ETag": _etag(path, size), "Accept-Ranges": "bytes",
                   "Last-Modified": email.utils.formatdate(1_767_225_600, usegmt=True)}
        if request.method == "HEAD":
            return web.Response(headers={**headers, "Content-Length": str(size)})
        start, end, status = 0, size - 1, 200
        if request.http_range.start is not None or request.http_range.stop is not None:
            rng = request.http_range
            start = rng.start if rng.start is not None and rng.start >= 0 else \
                max(size + (rng.start or 0), 0)
            end = min((rng.stop - 1) if rng.stop is not None else size - 1, size - 1)
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end}/{size}"
        with open(path, "rb") as handle_:
            handle_.seek(start)
            data = handle_.read(max(end - start + 1, 0))
        return web.Response(status=status, body=data, headers=headers,
                            content_type="binary/octet-stream")

    app = web.Application()
    _add_counting(app, handle)
    return app


def _add_counting(app: web.Application, handle) -> None:
    """Route everything to ``handle``, counting requests by kind; ``GET /_statekit/stats``
    returns the counts, ``POST /_statekit/reset`` clears them."""
    counts: Counter[str] = Counter()

    async def stats(_request: web.Request) -> web.Response:
        return web.json_response(dict(counts))

    async def reset(_request: web.Request) -> web.Response:
        counts.clear()
        return web.json_response({})

    async def counted(request: web.Request) -> web.StreamResponse:
        counts[request_kind(request.method, request.path, request.query_string)] += 1
        return await handle(request)

    app.router.add_get("/_statekit/stats", stats)
    app.router.add_post("/_statekit/reset", reset)
    app.router.add_route("*", "/{tail:.*}", counted)


def _bucket_request(request: web.Request, bucket: Bucket) -> web.Response:
    query = request.query
    if request.method == "HEAD":
        return web.Response()
    if "location" in query:
        return web.Response(body=f'<LocationConstraint xmlns="{_NS}"/>'.encode(),
                            content_type="application/xml")
    prefix = query.get("prefix", "")
    delimiter = query.get("delimiter", "")
    max_keys = min(int(query.get("max-keys", "1000")), 1000)
    token = query.get("continuation-token")
    after = _marker(token) if token else query.get("start-after", "")
    keys, prefixes, next_marker = bucket.list_page(prefix, delimiter, after, max_keys)
    items = "".join(bucket.contents[k] for k in keys)
    common = "".join(f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>"
                     for p in prefixes)
    more = (f"<IsTruncated>true</IsTruncated><NextContinuationToken>{_token(next_marker)}"
            "</NextContinuationToken>" if next_marker else "<IsTruncated>false</IsTruncated>")
    body = (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="{_NS}">'
            f"<Name>{bucket.name}</Name><Prefix>{escape(prefix)}</Prefix>"
            f"<KeyCount>{len(keys) + len(prefixes)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>"
            + (f"<Delimiter>{escape(delimiter)}</Delimiter>" if delimiter else "")
            + f"{more}{items}{common}</ListBucketResult>")
    return web.Response(body=body.encode(), content_type="application/xml")


def request_kind(method: str, path: str, query: str) -> str:
    """``LIST``, ``GET``, ``HEAD``, ``PUT`` …: a bucket-level GET with a listing query is a
    LIST (as in ``tests/s3_server.py``)."""
    if method == "GET" and ("list-type" in query or path.strip("/").count("/") == 0):
        return "LIST"
    return method


def make_proxy_app(upstream: str, latency_s: float) -> web.Application:
    session: dict[str, ClientSession] = {}

    async def forward(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(latency_s)
        if "client" not in session:
            session["client"] = ClientSession(connector=TCPConnector(limit=0),
                                              auto_decompress=False)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        headers["Host"] = request.host
        body = await request.read()
        async with session["client"].request(request.method, upstream + request.path_qs,
                                             headers=headers, data=body or None,
                                             allow_redirects=False) as answer:
            data = await answer.read()
            out = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
            if request.method == "HEAD" and "Content-Length" in answer.headers:
                out["Content-Length"] = answer.headers["Content-Length"]
                return web.Response(status=answer.status, headers=out)
            return web.Response(status=answer.status, body=data, headers=out)

    app = web.Application(client_max_size=1 << 30)
    _add_counting(app, forward)
    return app


async def serve(args: argparse.Namespace) -> None:
    latency_s = args.latency_ms / 1000
    if args.upstream is None:
        app = make_server_app(Bucket(args.root, args.bucket, args.hide_crc), latency_s)
    else:
        app = make_proxy_app(args.upstream, latency_s)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", args.port, backlog=1024).start()
    endpoint = f"http://127.0.0.1:{runner.addresses[0][1]}"
    print(json.dumps({"endpoint": endpoint}), flush=True)
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", help="the folder served as the bucket's content")
    parser.add_argument("--bucket", default="bench")
    parser.add_argument("--upstream", help="proxy this S3 endpoint instead of serving --root")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--hide-crc", action="store_true",
                        help="serve no .crc files (a checkpoint S3A wrote has none)")
    args = parser.parse_args()
    if args.upstream is None and args.root is None:
        sys.exit("give --root DIR or --upstream URL")
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
