"""Key/value records of Spark state files: HDFS deltas and snapshots, RocksDB changelogs.

These are the files a broken query leaves behind, so they are parsed defensively: every length
is checked before anything is allocated (a bogus 2 GiB length in a corrupt file costs only the
bytes that are really there), and every failure is a :class:`CorruptFile` that names the file
and the position *in the decompressed stream* (the compression layer reports positions in the
compressed file itself).

Layouts (all integers big-endian, as ``java.io.DataOutputStream`` writes them):

* HDFS ``.delta`` / ``.snapshot`` and RocksDB changelog v1 (no header):
  ``int keyLen, key, int valueLen, value`` (put), ``int keyLen, key, int -1`` (delete),
  ``int -1`` (end).
* RocksDB changelog v2: ``writeUTF("v2")``, then ``byte type`` (``0x01`` put, ``0x10`` delete,
  ``0x11`` merge) + the same key/value fields, ending with a ``0x00`` byte.
* v3 = ``writeUTF("v3")`` + ``writeUTF(lineage JSON)`` + the v1 body; v4 = ``writeUTF("v4")`` +
  lineage + the v2 body. The lineage is a JSON list of ``{"version", "checkpointUniqueId"}``
  (checkpoint format version 2). A file whose first ``readUTF`` is not ``v<number>`` is v1,
  exactly as Spark decides.

RocksDB keys and values carry small prefixes before the UnsafeRow bytes; see
:mod:`statekit.formats.rocksdb_keys`.
"""

from __future__ import annotations

import hashlib
import io
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple

from statekit.formats.compression import open_decompressed
from statekit.formats.jsontext import loads_json
from statekit.formats.modified_utf8 import decode_modified_utf8
from statekit.formats.opening import open_binary
from statekit.support.errors import CorruptFile, UnsupportedFormat

if TYPE_CHECKING:
    from fsspec.spec import AbstractFileSystem

_INT = struct.Struct(">i")
_CHUNK = 1 << 20
MAX_FIELD_BYTES = (1 << 31) - 1
"""Largest key or value length accepted (a Java array cannot be longer)."""

_RECORD_TYPES = {0x01: "put", 0x10: "delete", 0x11: "merge"}
STATE_FILE_KINDS = ("delta", "snapshot", "changelog")


class StateRecord(NamedTuple):
    """One change (or, in a snapshot, one entry) of a state store.

    A named tuple rather than a frozen dataclass: millions are made per replay, and a tuple
    is built about 4x faster."""

    op: str
    """``"put"``, ``"delete"`` or ``"merge"`` (merge: RocksDB list-state append, v2/v4 only)."""
    key: bytes
    """The key bytes exactly as stored (RocksDB prefixes included)."""
    value: bytes | None
    """The value bytes as stored; ``None`` for a delete."""


@dataclass(frozen=True)
class ChangelogHeader:
    """What precedes the records of a RocksDB changelog file."""

    version: int
    """Changelog format version, 1-4 (1 has no header at all)."""
    lineage: Any | None = None
    """v3/v4: the parsed lineage JSON (a list of ``{"version", "checkpointUniqueId"}``)."""
    lineage_raw: str | None = None
    """v3/v4: the lineage string as written."""


class _Cursor:
    """Reads exact byte counts from a stream (after an optional replayed prefix)."""

    def __init__(self, stream: BinaryIO, path: str, prefix: bytes = b"") -> None:
        self._stream = stream
        self._path = path
        self._prefix = prefix
        self.pos = 0
        self.pending: CorruptFile | None = None
        """A codec error met after some bytes were read: those bytes are returned first,
        the error is raised by the next read (a reader that stops at the end marker never
        sees it)."""

    def corrupt(self, message: str, at: int | None = None) -> CorruptFile:
        where = self.pos if at is None else at
        return CorruptFile(f"{message} at decompressed byte {where}", path=self._path)

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes; fewer only at the end of the stream. Never allocates ahead."""
        if self.pending is not None:
            raise self.pending
        if self._prefix or n > _CHUNK:
            out = self._read_slow(n)
        else:
            out = self._stream_read(n, b"")
            if len(out) < n and self.pending is None:
                out = self._read_more(out, n)
        self.pos += len(out)
        return out

    def _stream_read(self, n: int, have: bytes) -> bytes:
        try:
            return self._stream.read(n) or b""
        except CorruptFile as error:
            if not have and not self.pos:
                raise
            self.pending = error
            return b""

    def _read_more(self, out: bytes, n: int) -> bytes:
        while len(out) < n:
            more = self._stream_read(n - len(out), out)
            if not more:
                break
            out += more
        return out

    def _read_slow(self, n: int) -> bytes:
        out = b""
        if self._prefix:
            out, self._prefix = self._prefix[:n], self._prefix[n:]
        parts = [out]
        got = len(out)
        while got < n:
            more = self._stream_read(min(_CHUNK, n - got), b"x" if got else b"")
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def exact(self, n: int, what: str, start: int) -> bytes:
        data = self.read(n)
        if len(data) < n:
            raise self.corrupt(
                f"truncated record ({what}: {len(data)} of {n} bytes) starting", start
            )
        return data

    def int32(self, what: str, start: int) -> int:
        value: int = _INT.unpack(self.exact(4, what, start))[0]
        return value

    def utf(self, what: str) -> str:
        start = self.pos
        raw = self.read(2)
        if len(raw) < 2:
            raise self.corrupt(f"truncated {what}", start)
        data = self.exact(int.from_bytes(raw, "big"), what, start)
        try:
            return decode_modified_utf8(data)
        except ValueError as exc:
            raise self.corrupt(f"{what} is not valid modified UTF-8 ({exc})", start) from None

    def expect_end(self) -> None:
        at = self.pos
        extra = self.read(1)
        if extra:
            raise self.corrupt("unexpected data after the end-of-file marker", at)


def iter_store_records(
    stream: BinaryIO, *, path: str, allow_deletes: bool = True, check_end: bool = True
) -> Iterator[StateRecord]:
    """Yield the records of a decompressed HDFS delta/snapshot (or changelog v1) stream.

    Parameters
    ----------
    stream
        The decompressed bytes (see :func:`~statekit.formats.compression.open_decompressed`).
    path
        The file, for error messages.
    allow_deletes
        ``False`` for snapshots, which hold only puts (Spark rejects a negative value length
        there).

    Raises
    ------
    CorruptFile
        A negative length other than the ``-1`` markers, a truncated key or value, a stream
        ending without the ``-1`` end marker, or bytes after it.
    """
    return _iter_v1(_Cursor(stream, path), allow_deletes=allow_deletes, check_end=check_end)


def _iter_v1(cur: _Cursor, *, allow_deletes: bool = True, spark_view: bool = False,
             check_end: bool = True) -> Iterator[StateRecord]:
    """The v1 body, parsed from large decompressed chunks with ``struct.unpack_from`` (four
    small stream reads per record cost ~3x more); memory stays bounded by the chunk size plus
    the largest record, and lengths are only trusted as far as the bytes really exist.

    ``spark_view``: read no byte more than the next record needs and stop at the end marker,
    as Spark's ``DataInputStream`` over the codec's stream does — damage after the marker
    (say, in the codec's closing block) is never seen."""
    unpack = _INT.unpack_from
    buf, i, base = b"", 0, cur.pos  # base: decompressed offset of buf[0]

    def more(need: int) -> None:
        nonlocal buf, i, base
        parts, have = [buf[i:]], len(buf) - i
        while have < need:
            chunk = cur.read(need - have if spark_view else max(_CHUNK, min(need - have,
                                                                              _CHUNK)))
            if not chunk:
                break
            parts.append(chunk)
            have += len(chunk)
        base += i
        buf, i = b"".join(parts), 0

    while True:
        if len(buf) - i < 4:
            more(4)
            if len(buf) - i < 4:
                what = "stream ends without the end-of-file marker (-1)" if len(buf) == i \
                    else "truncated record (key length)"
                raise cur.corrupt(what, base + i)
        start = base + i
        key_len = unpack(buf, i)[0]
        if key_len == -1:
            if spark_view or not check_end:
                return
            if len(buf) - i > 4 or cur.read(1):
                raise cur.corrupt("unexpected data after the end-of-file marker", start + 4)
            return
        if key_len < 0:
            raise cur.corrupt(f"bad key length {key_len} in record", start)
        head = 8 + key_len
        if len(buf) - i < head:
            more(head)
            if len(buf) - i < head:
                got = len(buf) - i - 4
                if got < key_len:
                    raise cur.corrupt(f"truncated record (key: {got} of {key_len} bytes) "
                                      "starting", start)
                raise cur.corrupt(f"truncated record (value length: {got - key_len} of 4 "
                                  "bytes) starting", start)
        value_len = unpack(buf, i + 4 + key_len)[0]
        if value_len == -1 and allow_deletes:
            yield StateRecord("delete", buf[i + 4:i + 4 + key_len], None)
            i += head
            continue
        if value_len < 0:
            raise cur.corrupt(f"bad value length {value_len} in record", start)
        total = head + value_len
        if len(buf) - i < total:
            more(total)
            if len(buf) - i < total:
                raise cur.corrupt(f"truncated record (value: {len(buf) - i - head} of "
                                  f"{value_len} bytes) starting", start)
        yield StateRecord("put", buf[i + 4:i + 4 + key_len], buf[i + head:i + total])
        i += total


def _iter_v2(cur: _Cursor, *, spark_view: bool = False, check_end: bool = True
             ) -> Iterator[StateRecord]:
    while True:
        start = cur.pos
        head = cur.read(1)
        if not head:
            raise cur.corrupt("stream ends without the end-of-file record (0x00)", start)
        if head[0] == 0:
            if check_end and not spark_view:
                cur.expect_end()
            return
        op = _RECORD_TYPES.get(head[0])
        if op is None:
            raise cur.corrupt(f"unknown record type 0x{head[0]:02x}", start)
        key_len = cur.int32("key length", start)
        if key_len < 0:
            raise cur.corrupt(f"bad key length {key_len} in {op} record", start)
        key = cur.exact(key_len, "key", start)
        value_len = cur.int32("value length", start)
        if op == "delete":
            if value_len != -1:
                raise cur.corrupt(f"delete record with value length {value_len}", start)
            yield StateRecord(op, key, None)
        elif value_len < 0:
            raise cur.corrupt(f"bad value length {value_len} in {op} record", start)
        else:
            yield StateRecord(op, key, cur.exact(value_len, "value", start))


def _sniff_changelog_version(stream: BinaryIO, path: str) -> tuple[int, bytes]:
    """Spark's rule: the first ``readUTF`` must be ``v<short>``; anything else means v1.

    Returns the version and the bytes consumed (to replay for v1).
    """
    head = stream.read(2) or b""
    if len(head) < 2:
        return 1, head
    body = b""
    want = int.from_bytes(head, "big")
    while len(body) < want:
        more = stream.read(want - len(body))
        if not more:
            return 1, head + body
        body += more
    consumed = head + body
    try:
        text = decode_modified_utf8(body)
    except ValueError:
        return 1, consumed
    if not text.startswith("v"):
        return 1, consumed
    number = text[1:]
    if not (number.isascii() and number.lstrip("+-").isdigit()):
        return 1, consumed
    version = int(number)
    if not -(1 << 15) <= version < (1 << 15):
        return 1, consumed
    return version, consumed


def read_changelog(
    stream: BinaryIO, *, path: str, spark_view: bool = False, check_end: bool = True
) -> tuple[ChangelogHeader, Iterator[StateRecord]]:
    """Read the header of a decompressed RocksDB changelog stream and return its records.

    Parameters
    ----------
    stream
        The decompressed bytes.
    path
        The file, for error messages.

    Returns
    -------
    tuple
        The header (read eagerly) and a lazy iterator of records.

    Raises
    ------
    UnsupportedFormat
        A version header other than v1-v4 (a newer Spark).
    CorruptFile
        A bad lineage or record (raised while iterating, for records).
    """
    version, consumed = _sniff_changelog_version(stream, path)
    if version == 1:
        return ChangelogHeader(1), _iter_v1(_Cursor(stream, path, prefix=consumed),
                                            spark_view=spark_view, check_end=check_end)
    if version not in (2, 3, 4):
        raise UnsupportedFormat(
            f"changelog format v{version} is not supported (statekit reads v1-v4)", path=path
        )
    cur = _Cursor(stream, path)
    cur.pos = len(consumed)
    if version == 2:
        return ChangelogHeader(2), _iter_v2(cur, spark_view=spark_view, check_end=check_end)
    start = cur.pos
    lineage_raw = cur.utf("changelog lineage")
    try:
        lineage = loads_json(lineage_raw)
    except ValueError as exc:
        raise cur.corrupt(f"changelog lineage is not JSON ({exc})", start) from None
    header = ChangelogHeader(version, lineage, lineage_raw)
    return header, (_iter_v1(cur, spark_view=spark_view, check_end=check_end) if version == 3
                    else _iter_v2(cur, spark_view=spark_view, check_end=check_end))


_KNOWN_FAILURES: OrderedDict[tuple[bytes, int, str, str, str], CorruptFile | None] = \
    OrderedDict()
_KNOWN_FAILURES_LOCK = threading.Lock()
_KNOWN_FAILURES_MAX = 4096


def spark_read_failure(data: bytes, codec: str, kind: str, *, shown: str
                       ) -> CorruptFile | None:
    """What Spark's own reader fails with on this state file's bytes, or ``None`` when it
    reads every record. Spark decodes lazily: a codec block is decompressed (and its checksum
    checked) only when the next record needs its bytes, and reading stops at the end
    marker — so damage past the marker does not stop a restart, and damage in the records
    does, exactly as :func:`records_from_bytes` (which checks every byte) cannot tell.

    The answer is a function of the bytes alone, and one process asks it of the same file
    again and again (every surface judges the restart: report, growth, recovery, the doctor,
    a TUI or fleet refresh): answers are remembered by a digest of the bytes (with the codec,
    kind and name), never by the file's name or time stamps, so changed bytes are decoded
    anew."""
    if kind not in STATE_FILE_KINDS:
        raise ValueError(f"kind must be one of {STATE_FILE_KINDS}, not {kind!r}")
    key = (hashlib.blake2b(data, digest_size=20).digest(), len(data), codec, kind, shown)
    with _KNOWN_FAILURES_LOCK:
        if key in _KNOWN_FAILURES:
            _KNOWN_FAILURES.move_to_end(key)
            known = _KNOWN_FAILURES[key]
            return None if known is None else known.with_traceback(None)
    failure = _spark_read_failure(data, codec, kind, shown=shown)
    with _KNOWN_FAILURES_LOCK:
        _KNOWN_FAILURES[key] = failure
        while len(_KNOWN_FAILURES) > _KNOWN_FAILURES_MAX:
            _KNOWN_FAILURES.popitem(last=False)
    return failure


def _spark_read_failure(data: bytes, codec: str, kind: str, *, shown: str
                        ) -> CorruptFile | None:
    from statekit.formats.compression import raw_decompressed

    stream = raw_decompressed(io.BytesIO(data), codec, path=shown)
    try:
        if kind == "changelog":
            _, records = read_changelog(stream, path=shown, spark_view=True)
        else:
            records = _iter_v1(_Cursor(stream, shown), allow_deletes=kind == "delta",
                               spark_view=True)
        for _ in records:
            pass
    except CorruptFile as error:
        return error
    return None


def read_state_file(fs: AbstractFileSystem, path: str, codec: str, kind: str, *,
                    shown: str | None = None, check_end: bool = True
                    ) -> Iterator[StateRecord]:
    """Open a state file on an fsspec filesystem and yield its records.

    Parameters
    ----------
    fs
        An fsspec filesystem.
    path
        The file's path on ``fs``.
    codec
        The state store compression codec (short or class name; see ``normalize_codec``).
    kind
        ``"delta"``, ``"snapshot"`` or ``"changelog"``.
    shown
        How error messages name the file (default: ``path``), e.g. the user's ``s3://`` URL.

    Raises
    ------
    BadInput
        The file is missing or unreadable (raised at call time, not at first iteration).
    UnsupportedFormat, CorruptFile
        See :func:`~statekit.formats.compression.open_decompressed` and the readers above.
    """
    if kind not in STATE_FILE_KINDS:
        raise ValueError(f"kind must be one of {STATE_FILE_KINDS}, not {kind!r}")
    shown = shown or path
    raw = open_binary(fs, path, "state file", shown=shown)
    try:
        stream = _decompressed(raw, codec, shown, check_end)
    except BaseException:
        raw.close()
        raise
    return _records_then_close(raw, stream, shown, kind, check_end)


def records_from_bytes(data: bytes, codec: str, kind: str, *, shown: str,
                       check_end: bool = True) -> Iterator[StateRecord]:
    """The records of a state file whose (compressed) content is already in memory.

    ``check_end=False``: the records up to the end marker, as Spark reads them — damage
    after it (in the codec's closing block) is not an error."""
    if kind not in STATE_FILE_KINDS:
        raise ValueError(f"kind must be one of {STATE_FILE_KINDS}, not {kind!r}")
    raw = io.BytesIO(data)
    return _records_then_close(raw, _decompressed(raw, codec, shown, check_end), shown, kind,
                               check_end)


def _decompressed(raw: BinaryIO, codec: str, shown: str, check_end: bool) -> BinaryIO:
    """Buffered when every byte is checked anyway; else unbuffered, so a damaged block after
    the end marker is never decoded."""
    from statekit.formats.compression import raw_decompressed

    return open_decompressed(raw, codec, path=shown) if check_end else \
        raw_decompressed(raw, codec, path=shown)


def records_from_decompressed(data: bytes, kind: str, *, shown: str) -> Iterator[StateRecord]:
    """The records of a state file's decompressed content (e.g. a decoded prefix: the
    iterator raises :class:`CorruptFile` where the content stops mid-record)."""
    if kind not in STATE_FILE_KINDS:
        raise ValueError(f"kind must be one of {STATE_FILE_KINDS}, not {kind!r}")
    stream = io.BytesIO(data)
    return _records_then_close(stream, stream, shown, kind)


def _records_then_close(raw: BinaryIO, stream: BinaryIO, path: str, kind: str,
                        check_end: bool = True) -> Iterator[StateRecord]:
    try:
        if kind == "changelog":
            _, records = read_changelog(stream, path=path, check_end=check_end)
        else:
            records = iter_store_records(stream, path=path, allow_deletes=kind == "delta",
                                         check_end=check_end)
        yield from records
    finally:
        raw.close()
