"""Presigned S3 GET URLs at ~15 µs each instead of botocore's ~135 µs — used only once they
have proved identical to botocore's own.

A report of a 2,000-partition RocksDB checkpoint sends ~2,900 requests (listing pages and
each partition's newest zip). botocore spends ~135 µs presigning each: endpoint-ruleset
resolution, parameter validation, serialisation and an event chain, all before the few
hashes the signature is made of. On a 2-core machine that was a quarter of the client's CPU.

:class:`Presigner` builds the two URLs statekit needs — ``GetObject`` and
``ListObjectsV2`` — from the algorithm's specification (SigV4 query auth, the legacy SigV2
query auth some S3-compatible endpoints get, or no signature for anonymous access). It is
never trusted on its own: :func:`verified_presigner` asks botocore for URLs of a few probe
requests (a key with spaces, ``=``, ``+``, ``%`` and non-ASCII characters; listings with and
without ``StartAfter``/``ContinuationToken``/``MaxKeys``), builds the same requests itself
at the same instant, and keeps it only when every URL equals botocore's — scheme, host,
path and every query parameter, the signature included. Any difference (a newer algorithm,
S3 Express, a requester-pays header, an endpoint rule statekit does not know) and the
caller keeps asking botocore for every URL, as before. The check is repeated every minute
so that rotated temporary credentials are picked up.
"""

from __future__ import annotations

import base64
import calendar
import hashlib
import hmac
import re
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import parse_qsl, quote, urlsplit

#: Seconds a verified presigner is used before it is checked against botocore again.
REVERIFY_AFTER_S = 60.0

#: ``ListObjectsV2`` parameters statekit sends, by their query-string names.
_LIST_QUERY = {"Prefix": "prefix", "Delimiter": "delimiter", "StartAfter": "start-after",
               "ContinuationToken": "continuation-token", "MaxKeys": "max-keys",
               "EncodingType": "encoding-type"}
_PROBE_KEY = "statekit-probe/a b=c+d%e~f!g*(h)'i,j;ü€/0.zip"


#: Strings percent-encoding leaves as they are (most keys and values): not re-encoded.
_UNRESERVED = re.compile(r"[A-Za-z0-9_.~-]*").fullmatch
_UNRESERVED_PATH = re.compile(r"[A-Za-z0-9_.~/-]*").fullmatch
#: ``str.translate`` tables percent-encoding ASCII as ``quote`` does (keeping ``/`` or not).
_ASCII_QUOTED = {c: f"%{c:02X}" for c in range(128) if not _UNRESERVED(chr(c))}
_ASCII_QUOTED_PATH = {c: q for c, q in _ASCII_QUOTED.items() if c != ord("/")}


def _q(value: str) -> str:
    """Percent-encoding as SigV4 (and botocore) define it: everything but ``A-Za-z0-9-_.~``.
    (``urllib.parse.quote`` costs ~4 µs per value in pure Python, and this runs for every
    parameter of every request: ASCII is encoded by one ``str.translate``.)"""
    if _UNRESERVED(value):
        return value
    return value.translate(_ASCII_QUOTED) if value.isascii() else quote(value, safe="-_.~")


def _q_path(key: str) -> str:
    """An object key's percent-encoding in a URL path (``/`` kept), as botocore does."""
    if _UNRESERVED_PATH(key):
        return key
    return key.translate(_ASCII_QUOTED_PATH) if key.isascii() else quote(key, safe="/~")


@dataclass
class Presigner:
    """Presigned GETs for one bucket, as one botocore client would sign them."""

    scheme: str
    netloc: str
    """As in the URL (with a non-default port, and the bucket for virtual-hosted style)."""
    bucket_path: str
    """``/bucket`` (path style) or ``""`` (virtual-hosted style)."""
    bucket: str
    kind: str
    """``"v4"``, ``"v2"`` or ``"unsigned"``."""
    expires: int
    access_key: str = ""
    secret_key: str = ""
    token: str | None = None
    region: str = ""
    _keys: dict[str, bytes] = field(default_factory=dict, repr=False)

    def url(self, operation: str, params: dict[str, Any], at: float | None = None) -> str:
        """The presigned URL of ``get_object`` (``Bucket``, ``Key``) or ``list_objects_v2``
        (``Bucket`` and :data:`_LIST_QUERY`'s parameters); ``at``: the signing instant."""
        if params.get("Bucket") != self.bucket:
            raise ValueError(f"presigner of bucket {self.bucket!r}, not {params.get('Bucket')!r}")
        if operation == "get_object":
            if set(params) != {"Bucket", "Key"}:
                raise ValueError(f"unsupported GetObject parameters {sorted(params)}")
            path = f"{self.bucket_path}/{_q_path(params['Key'])}"
            query: list[tuple[str, str]] = []
        elif operation == "list_objects_v2":
            unknown = set(params) - {"Bucket", *_LIST_QUERY}
            if unknown:
                raise ValueError(f"unsupported ListObjectsV2 parameters {sorted(unknown)}")
            path = self.bucket_path or "/"
            query = [("list-type", "2")]
            query += [(_LIST_QUERY[name], str(value)) for name, value in params.items()
                      if name != "Bucket"]
        else:
            raise ValueError(f"unsupported operation {operation}")
        now = time.time() if at is None else at
        if self.kind == "v4":
            return self._v4(path, query, now)
        if self.kind == "v2":
            return self._v2(path, query, now)
        encoded = "&".join(f"{_q(k)}={_q(v)}" for k, v in query)
        return f"{self.scheme}://{self.netloc}{path}" + (f"?{encoded}" if encoded else "")

    def _v4(self, path: str, query: list[tuple[str, str]], now: float) -> str:
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))
        day = stamp[:8]
        scope = f"{day}/{self.region}/s3/aws4_request"
        auth = [("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
                ("X-Amz-Credential", f"{self.access_key}/{scope}"),
                ("X-Amz-Date", stamp), ("X-Amz-Expires", str(self.expires)),
                ("X-Amz-SignedHeaders", "host")]
        if self.token is not None:
            auth.append(("X-Amz-Security-Token", self.token))
        canonical_query = "&".join(sorted(f"{_q(k)}={_q(v)}" for k, v in query + auth))
        request = f"GET\n{path}\n{canonical_query}\nhost:{self.host}\n\nhost\nUNSIGNED-PAYLOAD"
        to_sign = (f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n"
                   f"{hashlib.sha256(request.encode()).hexdigest()}")
        signature = hmac.new(self._signing_key(day), to_sign.encode(),
                             hashlib.sha256).hexdigest()
        return (f"{self.scheme}://{self.netloc}{path}?{canonical_query}"
                f"&X-Amz-Signature={signature}")

    def _signing_key(self, day: str) -> bytes:
        key = self._keys.get(day)
        if key is None:
            key = f"AWS4{self.secret_key}".encode()
            for part in (day, self.region, "s3", "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            self._keys[day] = key
        return key

    def _v2(self, path: str, query: list[tuple[str, str]], now: float) -> str:
        expires = str(int(now + self.expires))
        headers = f"x-amz-security-token:{self.token}\n" if self.token else ""
        # SigV2 signs the path-style resource whatever the addressing: /bucket/key, /bucket/
        resource = f"/{self.bucket}{path[len(self.bucket_path):] or '/'}"
        to_sign = f"GET\n\n\n{expires}\n{headers}{resource}"
        signature = base64.b64encode(hmac.new(self.secret_key.encode(), to_sign.encode(),
                                              hashlib.sha1).digest()).decode()
        auth = [("AWSAccessKeyId", self.access_key), ("Signature", signature),
                ("Expires", expires)]
        if self.token:
            auth.append(("x-amz-security-token", self.token))
        encoded = "&".join(f"{_q(k)}={_q(v)}" for k, v in query + auth)
        return f"{self.scheme}://{self.netloc}{path}?{encoded}"

    @cached_property
    def host(self) -> str:
        """The ``Host`` header SigV4 signs (computed once: this runs per request)."""
        parts = urlsplit(f"{self.scheme}://{self.netloc}")
        host = parts.hostname or ""
        if ":" in host:  # an IPv6 literal
            host = f"[{host}]"
        if parts.port is not None and parts.port != {"http": 80, "https": 443}.get(self.scheme):
            host = f"{host}:{parts.port}"
        return host


def probe_requests(bucket: str) -> list[tuple[str, dict[str, Any]]]:
    """The requests a presigner must sign exactly as botocore does before it is used."""
    prefix = "statekit-probe/a b=c/"
    return [
        ("get_object", {"Bucket": bucket, "Key": _PROBE_KEY}),
        ("list_objects_v2", {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/",
                             "EncodingType": "url"}),
        ("list_objects_v2", {"Bucket": bucket, "Prefix": prefix, "StartAfter": f"{prefix}x y+",
                             "EncodingType": "url"}),
        ("list_objects_v2", {"Bucket": bucket, "Prefix": prefix, "MaxKeys": 7,
                             "ContinuationToken": "1/a+b=c==", "EncodingType": "url"}),
    ]


def presigner_from(botocore_url: str, bucket: str, credentials: Any,
                   expires: int) -> Presigner | None:
    """A presigner shaped after one of botocore's ``get_object`` URLs for the probe key (its
    host, addressing style, algorithm and region), or ``None`` if its shape is unknown."""
    parts = urlsplit(botocore_url)
    quoted_key = "/" + quote(_PROBE_KEY, safe="/~")
    if not parts.path.endswith(quoted_key):
        return None
    bucket_path = parts.path[: -len(quoted_key)]
    if bucket_path not in ("", f"/{bucket}"):
        return None
    query = dict(parse_qsl(parts.query, keep_blank_values=True))

    def made(kind: str, region: str = "", keys: bool = True) -> Presigner:
        return Presigner(
            scheme=parts.scheme, netloc=parts.netloc, bucket_path=bucket_path, bucket=bucket,
            kind=kind, expires=expires, region=region,
            access_key=credentials.access_key if keys else "",
            secret_key=credentials.secret_key if keys else "",
            token=getattr(credentials, "token", None) if keys else None)

    if not query:
        return made("unsigned", keys=False)
    if credentials is None:
        return None
    if "X-Amz-Signature" in query:
        scope = query.get("X-Amz-Credential", "").split("/")
        if len(scope) != 5 or scope[3] != "s3" or scope[0] != credentials.access_key:
            return None
        return made("v4", region=scope[2])
    if "Signature" in query and query.get("AWSAccessKeyId") == credentials.access_key:
        return made("v2")
    return None


def same_url(ours: str, theirs: str) -> bool:
    """Whether two URLs name the same request: scheme, host, path and query parameters
    (in any order — servers read them as a set), values compared after decoding."""
    a, b = urlsplit(ours), urlsplit(theirs)
    return ((a.scheme, a.netloc, a.path) == (b.scheme, b.netloc, b.path)
            and sorted(parse_qsl(a.query, keep_blank_values=True))
            == sorted(parse_qsl(b.query, keep_blank_values=True)))


async def verified_presigner(client: Any, bucket: str, expires: int) -> Presigner | None:
    """A :class:`Presigner` for ``bucket`` that signed every probe request exactly as
    ``client`` (an aiobotocore S3 client) does, or ``None`` — then use botocore."""
    try:
        credentials = await _frozen_credentials(client)
        probes = probe_requests(bucket)
        theirs = [await client.generate_presigned_url(op, Params=params, ExpiresIn=expires)
                  for op, params in probes]
        presigner = presigner_from(theirs[0], bucket, credentials, expires)
        if presigner is None:
            return None
        for (op, params), url in zip(probes, theirs, strict=True):
            at = _instant(url, expires)
            if at is None and presigner.kind != "unsigned":
                return None
            if not same_url(presigner.url(op, params, at), url):
                return None
        return presigner
    except Exception:  # anything unexpected (private API moved…): botocore signs, as before
        return None


def _instant(botocore_url: str, expires: int) -> float | None:
    """The instant botocore signed ``botocore_url`` at (to sign the same request at the same
    instant), or ``None`` for an unsigned URL."""
    query = dict(parse_qsl(urlsplit(botocore_url).query))
    if "X-Amz-Date" in query:
        return float(calendar.timegm(time.strptime(query["X-Amz-Date"], "%Y%m%dT%H%M%SZ")))
    if "Expires" in query:
        return float(int(query["Expires"]) - expires)
    return None


async def _frozen_credentials(client: Any) -> Any:
    """The credentials ``client`` signs with now (refreshed if due), or ``None``."""
    credentials = getattr(getattr(client, "_request_signer", None), "_credentials", None)
    if credentials is None:
        return None
    frozen = credentials.get_frozen_credentials()
    if hasattr(frozen, "__await__"):
        frozen = await frozen
    return frozen
