"""statekit's own presigned URLs equal botocore's, byte for byte in every parameter, for the
configurations S3 users have — and where they would not, botocore keeps signing.

No network: presigning is computed locally (the clients are never used to send anything).
"""

from __future__ import annotations

import dataclasses
import random
import string
from urllib.parse import quote

import pytest

from statekit.checkpoint.s3_presign import Presigner, _q, _q_path, same_url, verified_presigner

SECRET = {"key": "AKIDEXAMPLE", "secret": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}

CONFIGS = {
    # custom endpoint, botocore's default for presigning there: SigV2, path style
    "v2-path": ({**SECRET, "endpoint_url": "http://127.0.0.1:9000"}, "v2"),
    "v2-token": ({**SECRET, "token": "FQoG/to+ken==", "endpoint_url": "http://store:9000"}, "v2"),
    "v2-aws-virtual": ({**SECRET, "client_kwargs": {"region_name": "eu-west-1"}}, "v2"),
    "v2-virtual-port": ({**SECRET, "endpoint_url": "https://minio.example:443",
                         "config_kwargs": {"s3": {"addressing_style": "virtual"}}}, "v2"),
    "v4-path": ({**SECRET, "endpoint_url": "http://127.0.0.1:9000",
                 "config_kwargs": {"signature_version": "s3v4"}}, "v4"),
    "v4-aws-token": ({**SECRET, "token": "to/k+en==", "client_kwargs": {"region_name": "us-west-2"},
                      "config_kwargs": {"signature_version": "s3v4"}}, "v4"),
    "v4-aws-virtual": ({**SECRET, "client_kwargs": {"region_name": "ap-south-1"},
                        "config_kwargs": {"signature_version": "s3v4",
                                          "s3": {"addressing_style": "virtual"}}}, "v4"),
    "v4-aws-path": ({**SECRET, "client_kwargs": {"region_name": "eu-central-1"},
                     "config_kwargs": {"s3": {"addressing_style": "path"}}}, "v4"),
    "v4-ipv6": ({**SECRET, "endpoint_url": "http://[::1]:9000",
                 "config_kwargs": {"signature_version": "s3v4"}}, "v4"),
    "anonymous": ({"anon": True}, "unsigned"),
    "anonymous-endpoint": ({"anon": True, "endpoint_url": "http://127.0.0.1:9000"}, "unsigned"),
}

KEYS = ["ck/state/0/17/100.zip", "ck/app=fraud x/state/0/1/.5.delta.crc",
        "weird/ü+%/~!*'();:@&$,[]#?.zip", "a//b/ c"]


def _run(fs, coro_fn):
    from fsspec.asyn import sync

    async def main():
        await fs.set_session()
        return await coro_fn(fs.s3)

    return sync(fs.loop, main)


def _filesystem(options):
    import s3fs

    return s3fs.S3FileSystem(skip_instance_cache=True, **options)


def _requests(bucket):
    yield from (("get_object", {"Bucket": bucket, "Key": key}) for key in KEYS)
    for key in KEYS:
        yield ("list_objects_v2", {"Bucket": bucket, "Prefix": key, "EncodingType": "url"})
        yield ("list_objects_v2", {"Bucket": bucket, "Prefix": key, "Delimiter": "/",
                                   "StartAfter": key + "/0", "EncodingType": "url"})
        yield ("list_objects_v2", {"Bucket": bucket, "Prefix": key, "MaxKeys": 1000,
                                   "ContinuationToken": "Y2s+/w==", "EncodingType": "url"})


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_own_urls_equal_botocores_for_every_request_statekit_sends(name):
    from statekit.checkpoint.s3_presign import _instant

    options, kind = CONFIGS[name]
    fs = _filesystem(options)

    async def check(client):
        presigner = await verified_presigner(client, "my-bucket", 900)
        assert presigner is not None and presigner.kind == kind
        for operation, params in _requests("my-bucket"):
            theirs = await client.generate_presigned_url(operation, Params=params,
                                                         ExpiresIn=900)
            ours = presigner.url(operation, params, _instant(theirs, 900))
            assert same_url(ours, theirs), (ours, theirs)
        return presigner

    presigner = _run(fs, check)
    assert presigner.url("get_object", {"Bucket": "my-bucket", "Key": "k"}).startswith(
        ("http://", "https://"))


def test_a_different_secret_makes_a_different_url():
    """The comparison has teeth: the signature is part of it."""
    from statekit.checkpoint.s3_presign import _instant

    options, _kind = CONFIGS["v4-path"]
    fs = _filesystem(options)

    async def check(client):
        presigner = await verified_presigner(client, "b", 900)
        params = {"Bucket": "b", "Key": "x/1.zip"}
        theirs = await client.generate_presigned_url("get_object", Params=params,
                                                     ExpiresIn=900)
        wrong = dataclasses.replace(presigner, secret_key="other", _keys={})
        return (same_url(presigner.url("get_object", params, _instant(theirs, 900)), theirs),
                same_url(wrong.url("get_object", params, _instant(theirs, 900)), theirs))

    assert _run(fs, check) == (True, False)


def test_botocore_keeps_signing_what_statekit_does_not_sign_the_same_way():
    """A handler that adds a signed header (as plugins and newer botocore features do):
    botocore's signature now covers it, statekit's would not — so it is not used."""
    options, _kind = CONFIGS["v4-path"]
    fs = _filesystem(options)

    def add_header(request, **_kwargs):
        request.headers["x-amz-statekit-test"] = "1"

    async def check(client):
        client.meta.events.register("before-sign.s3", add_header)
        return await verified_presigner(client, "b", 900)

    assert _run(fs, check) is None


def test_unsupported_parameters_are_refused_not_dropped():
    presigner = Presigner(scheme="https", netloc="s3.example", bucket_path="/b", bucket="b",
                          kind="unsigned", expires=900)
    with pytest.raises(ValueError):
        presigner.url("get_object", {"Bucket": "b", "Key": "k", "RequestPayer": "requester"})
    with pytest.raises(ValueError):
        presigner.url("list_objects_v2", {"Bucket": "b", "FetchOwner": True})
    with pytest.raises(ValueError):
        presigner.url("get_object", {"Bucket": "other", "Key": "k"})


def test_fast_percent_encoding_equals_urllib_quote():
    """The shortcuts (unreserved as is, ASCII by ``str.translate``) encode every string as
    ``urllib.parse.quote`` does, which the signatures were verified with."""
    generator = random.Random(7)
    alphabet = string.printable + "ü€/ \t%+="
    samples = [chr(c) for c in range(128)] + [
        "".join(generator.choice(alphabet) for _ in range(generator.randint(0, 24)))
        for _ in range(5000)]
    for value in samples:
        assert _q(value) == quote(value, safe="-_.~"), value
        assert _q_path(value) == quote(value, safe="/~"), value
