"""The checkpoint model: a lazy, cached, read-only view of one checkpoint folder.

:func:`open_checkpoint` checks that the folder looks like a Structured Streaming checkpoint
and returns a :class:`Checkpoint`. Nothing else is read until asked for, and everything read is
cached, so a report costs a handful of listings and small reads however often the same fact
is used: ``offsets/``, ``commits/`` and ``state/`` are each listed exactly once, log entries are
read only for the batches a caller asks about (in one concurrent ``fs.cat`` on object stores),
and no method ever writes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar, cast

from statekit.checkpoint.inventory import (
    InventoryBuilder,
    StateInventory,
    newest_zip,
    operator_metadata_to_read,
    schemas_to_read,
)
from statekit.checkpoint.ledger import Ledger, audit_ledger
from statekit.checkpoint.listers import FastPathRefused
from statekit.checkpoint.listing import ListingStats, list_checkpoint
from statekit.checkpoint.location import Location, resolve
from statekit.checkpoint.logs import (
    CONF_SHUFFLE_PARTITIONS,
    CommitEntry,
    OffsetEntry,
    batch_id_of,
    parse_commit_entry,
    parse_offset_entry,
    parse_query_id,
)
from statekit.checkpoint.operators import (
    OperatorMetadata,
    derive_operator,
    parse_operator_metadata,
)
from statekit.checkpoint.s3_fast import S3Fast, s3_fast_for
from statekit.checkpoint.storage_errors import user_error
from statekit.formats.schema import StructType
from statekit.formats.schema_file import parse_schema_bytes
from statekit.support.errors import BadInput, CorruptFile, NotACheckpoint, StatekitError
from statekit.support.gc_pause import gc_paused

if TYPE_CHECKING:
    from fsspec.spec import AbstractFileSystem

_MARKERS = ("metadata", "offsets", "commits")
CHANGED_WHILE_READING = "changed while reading"
"""The words of every error caused by a running query changing the checkpoint mid-read."""
_Entry = TypeVar("_Entry", OffsetEntry, CommitEntry)


def forget_listings(fs: AbstractFileSystem, root: str) -> None:
    """Drop what ``fs`` remembers of listings at and below ``root``.

    fsspec hands out one filesystem object per set of options for the life of the process,
    and an object store's keeps every folder listing it made (s3fs's ``dircache``). A
    long-running process — the exporter, ``--watch`` — opening the same checkpoint again
    would see the folders as they were at its first reading: a running query's new batches
    never. Each opening starts from what the store holds now."""
    cache = getattr(fs, "dircache", None)
    if not cache:
        return
    prefix = root.rstrip("/") + "/"
    with contextlib.suppress(Exception):  # a cache being filled by another thread: retry
        for key in [key for key in list(cache) if key == root or key.startswith(prefix)]:
            cache.pop(key, None)
    with contextlib.suppress(Exception):
        fs.invalidate_cache(root)  # and the parents' listings that name it


def _io_error(error: OSError, shown: str) -> StatekitError:
    if not isinstance(error, (FileNotFoundError, IsADirectoryError)):
        known = user_error(error, shown)  # an endpoint down, a timeout, credentials refused
        if known is not None and known.reason in ("timeout", "unreachable", "credentials"):
            return known
    if isinstance(error, FileNotFoundError):
        return BadInput(f"{CHANGED_WHILE_READING}: it disappeared (a running query or its "
                        "cleanup removed it); run the command again", path=shown,
                        reason="missing")
    if isinstance(error, PermissionError):
        return BadInput("permission denied", path=shown, reason="denied")
    if isinstance(error, IsADirectoryError):
        return BadInput("is a directory, expected a file", path=shown)
    return BadInput(f"cannot read: {error.strerror or error}", path=shown)


class Checkpoint:
    """One checkpoint folder. Create it with :func:`open_checkpoint`."""

    def __init__(self, location: Location, root_entries: Mapping[str, dict[str, Any]], *,
                 conf: Mapping[str, str] | None = None) -> None:
        """``conf``: the pinned confs as a caller already read them (a worker process or a
        Spark task re-opening the checkpoint: no log is read again)."""
        self.location = location
        self._root_entries = root_entries
        self._given_conf = conf
        self._offsets: dict[int, OffsetEntry] = {}
        self._commits: dict[int, CommitEntry] = {}
        self._listings: dict[str, dict[str, dict[str, Any]]] = {}
        self._prefetched: dict[str, Future[bytes | OSError]] = {}
        self._log_bytes: dict[str, bytes] = {}
        """The small files read so far that every reader parses its own way (the query id,
        offsets, commits, schema and operator metadata): the model, the report and the
        doctor share one read of each."""
        self._log_prefixes = tuple(self.fs._strip_protocol(location.path(name)) + suffix
                                   for name, suffix in (("metadata", ""), ("offsets", "/"),
                                                        ("commits", "/")))
        self._s3_fast: S3Fast | None = None
        self._s3_fast_known = False
        self.listing_method = "auto"
        """``auto``, or ``sequential``: one recursive ``fs.find`` and s3fs's own reads, the
        reference the fast paths are tested and benchmarked against
        (:func:`statekit.checkpoint.listing.list_checkpoint`)."""
        self.listing_stats = ListingStats("local" if location.is_local else "none",
                                          requests=0 if location.is_local else 1)
        """What listing the checkpoint cost so far (requests, objects, seconds); the root
        folder's listing by :func:`open_checkpoint` is the first request."""

    # ----------------------------------------------------------------- raw access
    @property
    def fs(self) -> AbstractFileSystem:
        return self.location.fs

    def display(self, path: str) -> str:
        return self.location.display(path)

    def read_bytes(self, path: str, *, fast: bool = True) -> bytes:
        """Read one file; I/O problems become one-line ``BadInput`` errors naming the file.

        ``fast=False`` reads through the filesystem's own open-and-read, as Spark does (on
        S3 a HEAD, then a GET): what the recovery calibration must time, not statekit's
        single presigned GET."""
        if fast and path in self._log_bytes:
            return self._log_bytes[path]
        if fast and self._fast() is not None:  # one GET (s3fs's cat_file sends a HEAD first)
            return self.read_many([path])[path]
        try:
            data: bytes = self.fs.cat_file(path)
        except OSError as error:
            raise _io_error(error, self.display(path)) from error
        self._remember(path, data)
        return data

    def _remember(self, path: str, data: bytes) -> None:
        plain = self.fs._strip_protocol(path)
        if len(data) <= 1 << 20 and (plain.startswith(self._log_prefixes)
                                     or "/_metadata/" in plain):
            self._log_bytes[path] = data

    def read_chunks(self, path: str, chunk: int = 8 << 20) -> Iterator[bytes]:
        """A file's bytes in pieces of ``chunk`` bytes, for copies: memory stays at one
        piece whatever the file's size. I/O problems as in :meth:`read_bytes`."""
        try:
            with self.fs.open(path, "rb") as handle:
                while piece := handle.read(chunk):
                    yield piece
        except OSError as error:
            raise _io_error(error, self.display(path)) from error

    def _fast(self) -> S3Fast | None:
        """The presigned-request fast path on S3 (not with the ``sequential`` reference)."""
        if self.location.is_local or self.listing_method == "sequential":
            return None
        if not self._s3_fast_known:  # looked up once: asked for every listed chunk
            self._s3_fast, self._s3_fast_known = s3_fast_for(self.fs), True
        return self._s3_fast

    def read_many(self, paths: Iterable[str]) -> dict[str, bytes]:
        """Read many small files; concurrently on object stores (one ``cat_ranges`` call).
        The first unreadable one is raised, as a one-line error naming it."""
        results = self._fetch(list(paths))
        for value in results.values():
            if isinstance(value, StatekitError):
                raise value
        return cast("dict[str, bytes]", results)  # every error among them was raised above

    def read_many_lenient(self, paths: Iterable[str]
                          ) -> tuple[dict[str, bytes], dict[str, StatekitError]]:
        """Like :meth:`read_many`, but each unreadable file becomes an error in the second
        mapping instead of stopping the others."""
        results = self._fetch(list(paths))
        return ({p: v for p, v in results.items() if isinstance(v, bytes)},
                {p: v for p, v in results.items() if isinstance(v, StatekitError)})

    def prefetch(self, paths: Iterable[str]) -> None:
        """Start reading ``paths`` in the background on object stores (a no-op elsewhere);
        a later read of one of them takes its bytes from there, once."""
        fast = self._fast()
        if fast is not None:
            self._prefetched.update(fast.fetch_later(
                [p for p in paths if p not in self._prefetched]))

    def _fetch(self, paths: list[str]) -> dict[str, bytes | StatekitError]:
        """Each path's bytes, or the one-line error reading it failed with."""
        results: dict[str, bytes | StatekitError] = {
            p: self._log_bytes[p] for p in paths if p in self._log_bytes}
        paths = [p for p in paths if p not in results]
        if not paths:
            return results
        if self._prefetched:
            for path in paths:
                future = self._prefetched.pop(path, None)
                with contextlib.suppress(FastPathRefused):  # read again the generic way
                    if future is not None:
                        value = future.result()
                        results[path] = (_io_error(value, self.display(path))
                                         if isinstance(value, OSError) else value)
                        if isinstance(value, bytes):
                            self._remember(path, value)
            paths = [p for p in paths if p not in results]
            if not paths:
                return results
        fast = self._fast()
        if fast is None and (self.location.is_local or len(paths) <= 1):
            for path in paths:
                try:
                    results[path] = self.read_bytes(path)
                except StatekitError as error:
                    results[path] = error
            return results
        fetched: list[Any] | None = None
        if fast is not None:  # one presigned GET per file, many at once
            with contextlib.suppress(FastPathRefused):
                fetched = fast.fetch_many(paths)
        if fetched is None:  # cat_ranges: one concurrent GET per file (fs.cat HEADs each)
            fetched = self.fs.cat_ranges(paths, None, None, on_error="return")
        for path, value in zip(paths, fetched, strict=True):
            if isinstance(value, OSError):
                results[path] = _io_error(value, self.display(path))
            elif isinstance(value, Exception):
                results[path] = BadInput(f"cannot read: {value}", path=self.display(path))
            else:
                results[path] = value
                self._remember(path, value)
        return results

    @property
    def root_entries(self) -> Mapping[str, dict[str, Any]]:
        """The checkpoint root's listing entries, by name."""
        return self._root_entries

    def has_folder(self, name: str) -> bool:
        """Whether the checkpoint root holds a folder ``name`` (``offsets``, ``state``, …)."""
        entry = self._root_entries.get(name)
        return entry is not None and entry.get("type") == "directory"

    def _list_entries(self, folder: str) -> dict[str, dict[str, Any]]:
        """``{name: listing entry}`` of everything directly in ``folder`` (one listing,
        cached)."""
        if folder in self._listings:
            return self._listings[folder]
        found: dict[str, dict[str, Any]] = {}
        if self.has_folder(folder):
            try:
                self.listing_stats.requests += 1
                entries = self.fs.ls(self.location.path(folder), detail=True)
            except OSError as error:
                raise _io_error(error, self.location.display(self.location.path(folder))
                                ) from error
            found = {e["name"].rstrip("/").rsplit("/", 1)[-1]: e for e in entries}
        self._listings[folder] = found
        return found

    def entries(self, folder: str) -> dict[str, dict[str, Any]]:
        """``{name: listing entry}`` of everything directly in the root folder ``folder``
        (checksum files included), listed once."""
        return dict(self._list_entries(folder))

    def log_paths(self, folder: str) -> dict[int, str]:
        """``{batch id: path}`` of the regular files of a log folder named by a batch id."""
        found: dict[int, str] = {}
        for name, entry in self._list_entries(folder).items():
            batch = batch_id_of(name)
            if batch is not None and entry.get("type") == "file":
                found[batch] = entry["name"]
        return dict(sorted(found.items()))

    def odd_log_entries(self, folder: str) -> dict[str, dict[str, Any]]:
        """Entries of a log folder named like a batch but not a regular file: folders,
        dangling symlinks, FIFOs. Spark fails on them; statekit never opens them."""
        return {name: entry for name, entry in self._list_entries(folder).items()
                if batch_id_of(name) is not None and entry.get("type") != "file"}

    def unparsable_log_names(self, folder: str) -> list[str]:
        """All-digit names beyond a 64-bit batch id (Spark's listing skips them too)."""
        return sorted(name for name in self._list_entries(folder)
                      if name.removesuffix(".compact").isdigit() and batch_id_of(name) is None)

    # ----------------------------------------------------------------- query and logs
    @property
    def has_metadata(self) -> bool:
        """Whether the query-id file ``metadata`` exists (Spark refuses to restart without
        it once the logs hold batches)."""
        return "metadata" in self._root_entries

    @cached_property
    def query_id(self) -> str:
        path = self.location.path("metadata")
        return parse_query_id(self.read_bytes(path), self.display(path))

    @cached_property
    def _offset_paths(self) -> dict[int, str]:
        return self.log_paths("offsets")

    @cached_property
    def _commit_paths(self) -> dict[int, str]:
        return self.log_paths("commits")

    @cached_property
    def ledger(self) -> Ledger:
        """Every retained offsets and commit entry, read once and audited
        (:mod:`statekit.checkpoint.ledger`); parsed entries fill the caches."""
        ledger = audit_ledger(self)
        self._offsets.update({b: e for b, e in ledger.offsets.items() if b not in self._offsets})
        self._commits.update({b: e for b, e in ledger.commits.items() if b not in self._commits})
        return ledger

    def require_sound_ledger(self) -> None:
        """Raise the first restart-breaking ledger problem (commands that compute from the
        ledger call this first, so they never answer from a damaged one)."""
        self.ledger.raise_first_error()

    @property
    def planned_batches(self) -> list[int]:
        """Batch ids with an ``offsets`` entry (retained ones only; old ones are purged)."""
        return list(self._offset_paths)

    @property
    def committed_batches(self) -> list[int]:
        return list(self._commit_paths)

    @property
    def last_planned_batch(self) -> int | None:
        return self.planned_batches[-1] if self._offset_paths else None

    @property
    def last_committed_batch(self) -> int | None:
        return self.committed_batches[-1] if self._commit_paths else None

    @property
    def uncommitted_batches(self) -> list[int]:
        """Planned batches after the last commit: started and not finished (crash or running)."""
        last = self.last_committed_batch
        return [b for b in self.planned_batches if last is None or b > last]

    def offset(self, batch_id: int) -> OffsetEntry:
        if batch_id not in self._offsets:
            self.load_offsets([batch_id])
        return self._offsets[batch_id]

    def commit(self, batch_id: int) -> CommitEntry:
        if batch_id not in self._commits:
            self.load_commits([batch_id])
        return self._commits[batch_id]

    def load_offsets(self, batch_ids: Iterable[int]) -> dict[int, OffsetEntry]:
        """Read (and cache) the offsets entries of ``batch_ids`` in one go."""
        return self._load(batch_ids, self._offset_paths, self._offsets, parse_offset_entry,
                          "offsets")

    def load_commits(self, batch_ids: Iterable[int]) -> dict[int, CommitEntry]:
        return self._load(batch_ids, self._commit_paths, self._commits, parse_commit_entry,
                          "commits")

    def _load(self, batch_ids: Iterable[int], paths: dict[int, str], cache: dict[int, _Entry],
              parse: Callable[[int, bytes, str], _Entry], folder: str) -> dict[int, _Entry]:
        wanted = [b for b in batch_ids if b not in cache]
        missing = [b for b in wanted if b not in paths]
        if missing:
            raise BadInput(f"no batch {missing[0]} in {folder}/ (retained: "
                           f"{_span(list(paths))})", path=self.location.url)
        data = self.read_many(paths[b] for b in wanted)
        for batch in wanted:
            cache[batch] = parse(batch, data[paths[batch]], self.display(paths[batch]))
        return {b: cache[b] for b in batch_ids}

    @property
    def latest_offset(self) -> OffsetEntry | None:
        """The newest offsets entry: the confs the query runs (or will restart) with."""
        last = self.last_planned_batch
        return self.offset(last) if last is not None else None

    @property
    def conf(self) -> Mapping[str, str]:
        """The confs the query pinned, from the newest offsets entry that can be read (a
        damaged newest entry is the ledger audit's business, not every reader's)."""
        if self._given_conf is not None:
            return self._given_conf
        try:
            latest = self.latest_offset
        except StatekitError:
            latest = self.ledger.newest_readable_offset
        return latest.conf if latest is not None else {}

    # ----------------------------------------------------------------- state
    @cached_property
    def has_state(self) -> bool:
        return "state" in self._root_entries

    @cached_property
    def inventory(self) -> StateInventory:
        """Every state file, from one listing of ``state/`` (level by level and concurrent
        on object stores: :mod:`statekit.checkpoint.listing`). The log folders not listed
        yet are listed alongside, so a report's listings all run at once."""
        return self._list_state(ledger=False, newest_zips=False)

    def warm(self, *, newest_zips: bool = False) -> None:
        """List everything and read the small files as early as possible: on object
        stores the offsets/commits entries, the operator metadata and schema files Spark
        goes by (and with ``newest_zips`` each partition's newest RocksDB zip at or below
        the committed version, as :func:`newest_zip` picks it) are read while ``state/``
        is still being listed. What a report reads anyway, only sooner."""
        if "inventory" not in self.__dict__:
            self.__dict__["inventory"] = self._list_state(ledger=True, newest_zips=newest_zips)

    def _list_state(self, *, ledger: bool, newest_zips: bool) -> StateInventory:
        state_root = self.location.path("state")
        logs = [name for name in ("offsets", "commits")
                if self.has_folder(name) and name not in self._listings]
        builder = InventoryBuilder(self.fs._strip_protocol(state_root).rstrip("/") + "/")
        fast = self._fast() is not None
        committed: list[int | None] = [None]  # the committed version, once the logs are in

        def take_log_folders(folders: dict[str, list[dict[str, Any]]]) -> None:
            for name, entries in folders.items():
                self._listings[name] = {e["name"].rstrip("/").rsplit("/", 1)[-1]: e
                                        for e in entries}
            if ledger and fast:
                query_file = ([self.location.path("metadata")]
                              if "query_id" not in self.__dict__ else [])
                self.prefetch([*query_file, *self.log_paths("offsets").values(),
                               *self.log_paths("commits").values()])
                last = self.last_committed_batch
                committed[0] = last + 1 if newest_zips and last is not None else None

        def take_files(files: list[tuple[str, int]]) -> None:
            # on object stores this runs on the filesystem's event loop: nothing here may
            # list or read synchronously (prefetch only schedules)
            touched, metas = builder.add(files)
            if not (ledger and fast):
                return
            if metas:  # each folder arrives whole: its choice is the final one
                self.prefetch([*(path for path, _ in operator_metadata_to_read(metas).values()),
                               *schemas_to_read(metas).values()])
            version = committed[0]
            if version is not None:
                chosen = (newest_zip(builder.files_of(key), version) for key in touched)
                self.prefetch(f.path for f in chosen if f is not None)

        with gc_paused():  # ~450k long-lived records: nothing for the collector to find
            try:
                listed = list_checkpoint(self.location, state=self.has_state,
                                         log_folders=logs, method=self.listing_method,
                                         on_files=take_files, on_log_folders=take_log_folders)
            except OSError as error:
                raise _io_error(error, self.display(getattr(error, "filename", None)
                                                    or state_root)) from error
            self.listing_stats.merge(listed.stats)
            self._odd_state_entries = tuple(sorted(listed.odd))
            return builder.build()

    _odd_state_entries: tuple[str, ...] = ()

    @property
    def odd_state_entries(self) -> tuple[str, ...]:
        """Paths under ``state/`` that are neither files nor folders (FIFOs, sockets, dangling
        or looping symlinks): never opened — reading a FIFO would block forever — and
        reported. Known once ``state/`` is listed, which asking lists."""
        self.inventory  # noqa: B018 - the listing finds them
        return self._odd_state_entries

    @cached_property
    def operators(self) -> dict[int, OperatorMetadata]:
        """Operator metadata per operator id: the newest v2 file if any, else v1.

        Read from the files the state listing found (no extra listing).
        """
        chosen = operator_metadata_to_read(self.inventory.meta_files)
        data = self.read_many(path for path, _batch in chosen.values())
        found = {op: parse_operator_metadata(data[path], self.display(path), batch)
                 for op, (path, batch) in chosen.items()}
        for op in self.inventory.operator_ids:
            if op not in found and self.inventory.stores(op):
                found[op] = self._derived_operator(op)
        return dict(sorted(found.items()))

    @cached_property
    def readable_operators(self) -> dict[int, OperatorMetadata]:
        """:attr:`operators`, where a damaged metadata file stands aside for what the folders
        and schema files show (as for Spark 3.5's checkpoints without one): analyses that
        only need an operator's name and stores go on; :attr:`operators` still raises."""
        try:
            return self.operators
        except StatekitError:
            ops = {op: self._derived_operator(op) for op in self.inventory.operator_ids
                   if self.inventory.stores(op)}
            return dict(sorted(ops.items()))

    def _derived_operator(self, op: int) -> OperatorMetadata:
        """Metadata for an operator Spark wrote none for (Spark 3.5): stores from its
        folders, partitions from the pinned conf (else the folders), a name from its
        schema (:func:`statekit.checkpoint.operators.derive_operator`)."""
        stores = self.inventory.stores(op)
        try:
            pinned = self.conf.get(CONF_SHUFFLE_PARTITIONS)
        except StatekitError:
            pinned = None
        partitions = int(pinned) if pinned and str(pinned).isdigit() else max(
            (p + 1 for s in stores for p in self.inventory.partitions(op, s)), default=0)
        value_fields: list[str] = []
        key_fields: list[str] = []
        window = False
        schemas = sorted((m for m in self.inventory.meta("schema", op)
                          if m.store == "default"), key=lambda m: m.partition or 0)
        if schemas:
            try:
                parsed = parse_schema_bytes(self.read_bytes(schemas[0].path),
                                            path=self.display(schemas[0].path))
                if parsed.value_schema is not None:
                    value_fields = [f.name for f in parsed.value_schema.fields]
                    window = any(isinstance(f.data_type, StructType)
                                 and f.data_type.names == ("start", "end")
                                 for f in parsed.value_schema.fields)
                if parsed.key_schema is not None:
                    key_fields = [f.name for f in parsed.key_schema.fields]
            except StatekitError:
                value_fields, key_fields = [], []
        return derive_operator(op, stores, partitions, value_fields, key_fields, window)


def check_selection(ckpt: Checkpoint, operator: int | None = None,
                    partition: int | None = None) -> None:
    """Refuse an ``--operator``/``--partition`` the checkpoint does not have (an empty table
    with exit 0 would read as "nothing wrong there")."""
    try:
        declared_ops = ckpt.operators
    except StatekitError:  # damaged operator metadata: the report says so; go by folders
        declared_ops = {}
    operators = sorted(set(ckpt.inventory.operator_ids) | set(declared_ops))
    if operator is not None and operator not in operators:
        raise BadInput(f"no operator {operator} (operators: "
                       f"{', '.join(map(str, operators)) or 'none'})", path=ckpt.location.url)
    if partition is not None:
        chosen = [operator] if operator is not None else operators
        parts = {key[2] for key in ckpt.inventory.instances if key[0] in chosen}
        declared = [s.num_partitions for op in chosen if op in declared_ops
                    for s in declared_ops[op].stores if s.num_partitions]
        count = max([*declared, *(p + 1 for p in parts)], default=0)
        if partition >= count:
            have = f"the state has partitions 0..{count - 1}" if count else "no state at all"
            raise BadInput(f"no partition {partition}: {have}", path=ckpt.location.url)


def _span(batches: list[int]) -> str:
    return f"{batches[0]}..{batches[-1]}" if batches else "none"


def open_checkpoint(where: str | Location,
                    storage_options: Mapping[str, Any] | None = None, *,
                    allow_missing_metadata: bool = False) -> Checkpoint:
    """Open the checkpoint at ``where``, read-only: a URL or local path (resolved here with
    ``storage_options``), or a :class:`Location` a front end has already resolved.

    Raises
    ------
    BadInput
        The location does not exist or is not a folder.
    NotACheckpoint
        The folder has none of ``metadata``, ``offsets/``, ``commits/``; or has logs but no
        ``metadata`` file (every query writes it before its first batch) — unless
        ``allow_missing_metadata`` (``statekit doctor`` and ``rollback --new-query-id``
        work on such a checkpoint; :attr:`Checkpoint.has_metadata` is then false).
    """
    location = where if isinstance(where, Location) else resolve(where, storage_options)
    url = location.url
    fs = location.fs
    forget_listings(fs, location.root)
    try:
        entries = fs.ls(location.root, detail=True)
    except FileNotFoundError as missing:
        raise BadInput("no such file or folder", path=url, reason="missing") from missing
    except NotADirectoryError as not_dir:
        raise NotACheckpoint("is a file; a checkpoint is a folder", path=url) from not_dir
    except OSError as error:
        raise _io_error(error, url) from error
    except Exception as error:  # no credentials, an endpoint down: the client's own errors
        known = user_error(error, url)
        if known is None:
            raise
        raise known from error
    if len(entries) == 1 and entries[0].get("type") == "file" and \
            fs._strip_protocol(entries[0]["name"]).rstrip("/") == location.root:
        raise NotACheckpoint("is a file; a checkpoint is a folder", path=url)
    root_entries = {e["name"].rstrip("/").rsplit("/", 1)[-1]: e for e in entries}
    present = [m for m in _MARKERS if m in root_entries]
    if not present:
        if not entries and not fs.exists(location.root):
            raise BadInput("no such file or folder", path=url, reason="missing")
        raise NotACheckpoint("not a Structured Streaming checkpoint (no metadata, offsets/ or "
                             "commits/)", path=url)
    if "metadata" not in root_entries and not allow_missing_metadata:
        raise NotACheckpoint("missing: every checkpoint has this file with the query id "
                             "(copied incompletely?)", path=location.display(
                                 location.path("metadata")))
    if "metadata" in root_entries and root_entries["metadata"].get("type") != "file":
        kind = "a folder" if root_entries["metadata"].get("type") == "directory" else \
            "not a regular file"
        raise CorruptFile(f"is {kind}, expected the query-id file",
                          path=location.display(location.path("metadata")))
    return Checkpoint(location, root_entries)
