"""Where a checkpoint lives: an fsspec filesystem plus a root path, resolved once.

Users hand statekit a string (a local path, ``file://``, ``s3://``, ``gs://``, ``abfs://``,
``hdfs://``, ``memory://`` …). It is turned into ``(filesystem, path)`` exactly once, here, at
the edge; everything below works on a :class:`Location` and never re-parses URLs. That keeps
object-store credentials (``storage_options``) in one place and makes every module testable on
``fsspec.filesystem("memory")``.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fsspec
from fsspec.spec import AbstractFileSystem

from statekit.support.errors import BadInput, EnvironmentProblem

#: fsspec implementations for the object stores users ask about most, and the pip package
#: that provides each (fsspec raises ImportError naming the package, but not helpfully).
_STORE_PACKAGES = {"s3": "s3fs", "s3a": "s3fs", "gs": "gcsfs", "gcs": "gcsfs",
                   "abfs": "adlfs", "abfss": "adlfs", "az": "adlfs", "hdfs": "pyarrow"}


@dataclass(frozen=True)
class Location:
    """A folder on some filesystem.

    Attributes
    ----------
    fs:
        The fsspec filesystem, already configured with credentials.
    root:
        The folder's path in ``fs``'s own notation (no protocol, no trailing slash).
    url:
        What the user typed; used in messages so they recognise their own input.
    """

    fs: AbstractFileSystem
    root: str
    url: str

    def path(self, *parts: str) -> str:
        """The fs path of ``parts`` below the root."""
        return posixpath.join(self.root, *parts) if parts else self.root

    def relative(self, path: str) -> str:
        """``path`` relative to the root (for display and for parsing layouts)."""
        path = self.fs._strip_protocol(path)
        if path == self.root:
            return ""
        prefix = self.root.rstrip("/") + "/"
        return path[len(prefix):] if path.startswith(prefix) else path

    def display(self, path: str) -> str:
        """A path as the user would write it: the URL they gave plus the relative part."""
        rel = self.relative(path)
        return f"{self.url.rstrip('/')}/{rel}" if rel else self.url

    @property
    def is_local(self) -> bool:
        return "file" in _protocols(self.fs)

    @property
    def portable_url(self) -> str:
        """The location as every process resolves it alike — a relative local path made
        absolute (a Spark executor's working folder is not the driver's), other URLs as
        given. What jobs hand to other processes; ``url`` is for messages."""
        return self.root if self.is_local else self.url


def _protocols(fs: AbstractFileSystem) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)


SOCKET_TIMEOUTS = {"connect_timeout": 10, "read_timeout": 30}
"""Seconds an S3 client waits to connect and for each answer, unless the user's
``config_kwargs`` say otherwise. botocore's own (60 s each, retried) let an endpoint that
accepts connections and never answers hold a reading for many minutes; a service reading a
fleet gives up on it at its ``--timeout``, and these let the abandoned reading end soon
after (:mod:`statekit.support.deadlines`)."""


def with_socket_timeouts(url: str, storage_options: Mapping[str, Any] | None
                         ) -> dict[str, Any]:
    """``storage_options`` with :data:`SOCKET_TIMEOUTS` added for an S3 URL (the user's own
    ``config_kwargs`` win)."""
    options = dict(storage_options or {})
    if url.split("://", 1)[0] in ("s3", "s3a"):
        config = dict(options.get("config_kwargs") or {})
        for name, seconds in SOCKET_TIMEOUTS.items():
            config.setdefault(name, seconds)
        options["config_kwargs"] = config
    return options


def resolve(url: str, storage_options: Mapping[str, Any] | None = None) -> Location:
    """Turn a user's path or URL into a :class:`Location` (no I/O beyond client creation).

    Raises
    ------
    BadInput
        The URL's protocol is unknown to fsspec or the options are invalid.
    EnvironmentProblem
        The protocol needs a package that is not installed (for example ``s3fs``).
    """
    text = str(url).strip()
    if not text:
        raise BadInput("empty checkpoint location")
    try:
        fs, root = fsspec.core.url_to_fs(text, **with_socket_timeouts(text, storage_options))
    except ImportError as missing:
        protocol = text.split("://", 1)[0]
        package = _STORE_PACKAGES.get(protocol, "the fsspec implementation for it")
        raise EnvironmentProblem(
            f"reading {protocol}:// locations needs {package} (pip install {package}): {missing}",
            path=text,
        ) from missing
    except (ValueError, TypeError) as bad:
        raise BadInput(f"cannot open this location: {bad}", path=text) from bad
    except OSError as failed:  # e.g. pyarrow's hdfs:// without libhdfs/JVM: a huge message
        protocol = text.split("://", 1)[0]
        hint = (" — or use webhdfs://<namenode>:9870/<path> (HTTP, no JVM)"
                if protocol == "hdfs" else "")
        first = str(failed).split(" dlopen(")[0].split("\n")[0][:200]
        raise EnvironmentProblem(f"cannot open {protocol}:// locations here: {first}{hint}",
                                 path=text) from failed
    root = root.rstrip("/") or root
    return Location(fs=fs, root=root, url=text)


SINK_FOLDER = "the file sink's output folder (the one holding _spark_metadata)"


def resolve_folder(url: str, storage_options: Mapping[str, Any] | None, *,
                   what: str) -> Location:
    """:func:`resolve` a folder a command reads beside the checkpoint (a file sink's
    output): a *file* there is a one-line error naming it, before any of its contents is
    looked for. ``what`` says what the folder should be."""
    location = resolve(url, storage_options)
    try:
        is_file = location.fs.isfile(location.root)
    except Exception:  # unreachable or not allowed: the first real read says so, naming it
        is_file = False
    if is_file:
        raise BadInput(f"is a file, expected {what}", path=location.url, reason="invalid")
    return location
