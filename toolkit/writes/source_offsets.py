"""Set or shift the source offsets a new checkpoint restarts from, as Kafka Streams' reset
tool does (``--to-offset``, ``--shift-by``, ``--dry-run``) for its applications.

Spark restarts a query whose last batch B is committed by planning batch B + 1 from the end
offsets in ``offsets/B``: every source resumes where that entry says. Rewriting those
offsets in a *new* checkpoint (the rolled-back or repartitioned one) moves where each
source resumes: back to replay records (after a bad deploy dropped them), forward to skip
them (a poison message, a backlog nobody needs). State is not touched: replayed records are
counted again by an aggregation and dropped by a deduplication; skipped ones never reach
the state.

An offset is whatever JSON the source writes; statekit addresses its integers by a *key*:

- Kafka ``{"orders":{"0":123,"1":456}}``: ``orders:0`` (one partition) or ``orders`` (every
  partition of the topic);
- the file source ``{"logOffset":7}``: ``logOffset`` — an index into its own log
  ``sources/<i>/``; batch B + 1 reads the files of the log entries after it;
- ``rate-micro-batch`` ``{"offset":30,"timestamp":4000}``: ``offset`` (rows), ``timestamp``;
- a source whose offset is a bare number (``rate``, ``LongOffset``): ``*``, which also means
  "every integer" of any other source.

A key may be prefixed by the source's id (``1/orders:0``: the second source in a v1 offsets
entry; the ``sourceId`` in a v2 one); without it the key must match in exactly one source.
Only the lines of the edited sources are rewritten; everything else stays byte for byte.

On restart Spark also calls ``getBatch(offsets B-1, offsets B)`` on every V1 source (the
file source, among others) "because certain sources assume the last batch will be executed
before getOffset is called again", and the file source asserts start ≤ end: moving
``offsets/B`` below ``offsets/B-1`` fails the restart with "assertion failed" (measured).
:func:`rewrite_offsets` therefore lowers the same integers in ``offsets/B-1`` to the new
value; that entry is read for nothing else once ``commits/B`` exists.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from statekit.checkpoint.logs import OffsetEntry, parse_offset_entry
from statekit.formats.jsontext import loads_json
from statekit.support.errors import BadInput, CorruptFile

Leaf = tuple[str, ...]
"""The path of one integer inside a source's offset JSON (``()`` for a bare number)."""


@dataclass(frozen=True)
class OffsetEdit:
    """One ``--set-offset`` / ``--shift-by`` argument, parsed."""

    text: str
    source: str | None
    key: Leaf
    """``("*",)`` matches every integer; otherwise a prefix of a leaf's path."""
    value: int
    shift: bool

    def matches(self, leaf: Leaf) -> bool:
        return self.key == ("*",) or leaf[:len(self.key)] == self.key


@dataclass(frozen=True)
class OffsetChange:
    """One integer of one source's offset, before and after; ``effect`` in words."""

    source: str
    kind: str
    key: str
    before: int
    after: int
    effect: str

    @property
    def delta(self) -> int:
        return self.after - self.before

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "kind": self.kind, "key": self.key,
                "before": self.before, "after": self.after, "delta": self.delta,
                "effect": self.effect}


def parse_edit(text: str, *, shift: bool) -> OffsetEdit:
    """``[SOURCE/]KEY=INTEGER`` → :class:`OffsetEdit`; :class:`BadInput` when malformed."""
    option = "--shift-by" if shift else "--set-offset"
    where, equals, number = text.rpartition("=")
    if not equals or not where:
        raise BadInput(f"{option} {text!r}: expected [SOURCE/]KEY=INTEGER, e.g. orders:0=1200 "
                       "or logOffset=-2")
    try:
        value = int(number.strip())
    except ValueError:
        raise BadInput(f"{option} {text!r}: {number.strip()!r} is not an integer") from None
    source, slash, key = where.strip().rpartition("/")
    parts = tuple(p for p in key.split(":"))
    if not key or any(not p for p in parts):
        raise BadInput(f"{option} {text!r}: empty key (KEY is TOPIC, TOPIC:PARTITION, a field "
                       "such as logOffset or offset, or *)")
    return OffsetEdit(text, source if slash else None, parts, value, shift)


def source_kind(offset: Any) -> str:
    """What wrote an offset, from its JSON shape: ``kafka``, ``file``, ``rate-micro-batch``,
    ``number`` (a bare integer) or ``other``."""
    if isinstance(offset, dict):
        if offset and all(isinstance(v, dict) and all(_is_int(n) for n in v.values())
                          for v in offset.values()):
            return "kafka"
        if set(offset) == {"logOffset"}:
            return "file"
        if set(offset) == {"offset", "timestamp"}:
            return "rate-micro-batch"
    if _is_int(offset):
        return "number"
    return "other"


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _leaves(value: Any, path: Leaf = ()) -> Iterator[tuple[Leaf, int]]:
    if _is_int(value):
        yield path, value
    elif isinstance(value, dict):
        for name, child in value.items():
            yield from _leaves(child, (*path, str(name)))


def _set_leaf(value: Any, path: Leaf, new: int) -> Any:
    if not path:
        return new
    value[path[0]] = _set_leaf(value[path[0]], path[1:], new)
    return value


@dataclass(frozen=True)
class _SourceLine:
    index: int
    """The line's position in the entry."""
    source: str
    prefix: str
    """``""`` (v1) or ``"<sourceId>:"`` (v2)."""
    offset: Any


def _source_lines(entry: OffsetEntry) -> list[_SourceLine]:
    """The parsed entry's sources with an offset, each with the line it was read from
    (source ``i`` is line ``i + 2``: the version and the batch metadata come first)."""
    return [_SourceLine(position + 2, s.source, f"{s.source}:" if entry.version == 2 else "",
                        loads_json(s.offset))
            for position, s in enumerate(entry.sources) if s.offset is not None]


def edit_offsets(data: bytes, shown: str, edits: Sequence[OffsetEdit], *,
                 file_log_ends: Mapping[str, int] | None = None,
                 describe: Callable[[OffsetChange], str] | None = None
                 ) -> tuple[bytes, list[OffsetChange]]:
    """``offsets/B`` with ``edits`` applied, and every changed integer.

    ``file_log_ends`` maps a file source's id to the newest entry of its log in the new
    checkpoint: its ``logOffset`` must stay within ``-1 … end`` (Spark numbers new log
    entries after the newest, so an offset past it would skip files that arrive later).
    ``describe(change_without_effect) -> str`` may say more about an effect (how many
    files a file source re-reads).

    Raises
    ------
    BadInput
        A key matches no offset, or offsets of more than one source without a SOURCE/
        prefix; a result is negative (or past a file source's log).
    """
    entry = parse_offset_entry(-1, data, shown)  # strict: refuses what Spark would refuse
    lines = data.decode("utf-8").split("\n")
    sources = _source_lines(entry)
    known = {s.source for s in sources}
    edited: dict[int, Any] = {}
    after_of: dict[tuple[str, Leaf], int] = {}
    for edit in edits:
        if edit.source is not None and edit.source not in known:
            raise BadInput(f"{_option(edit)} {edit.text!r}: no source {edit.source!r} with an "
                           f"offset in {shown} (sources: {', '.join(sorted(known)) or 'none'})")
        hits = [(s, leaf, value) for s in sources
                if edit.source in (None, s.source)
                for leaf, value in _leaves(edited.get(s.index, s.offset)) if edit.matches(leaf)]
        if not hits:
            raise BadInput(f"{_option(edit)} {edit.text!r}: matches no offset in {shown} "
                           f"(keys: {_keys_of(sources)})")
        if edit.source is None and len({s.source for s, _, _ in hits}) > 1:
            raise BadInput(f"{_option(edit)} {edit.text!r}: matches sources "
                           f"{', '.join(sorted({s.source for s, _, _ in hits}))}: prefix the "
                           "key with SOURCE/ (e.g. 0/" + ":".join(edit.key) + ")")
        for line, leaf, before in hits:
            after = before + edit.value if edit.shift else edit.value
            _check_value(edit, line.source, source_kind(line.offset), leaf, after,
                         file_log_ends or {})
            value = edited.get(line.index, json.loads(json.dumps(line.offset)))
            edited[line.index] = _set_leaf(value, leaf, after)
            after_of[(line.source, leaf)] = after
    changes = []
    for line in sources:
        for leaf, before in _leaves(line.offset):
            after = after_of.get((line.source, leaf), before)
            if after != before:
                change = OffsetChange(line.source, source_kind(line.offset), _key(leaf),
                                      before, after, "")
                more = describe(change) if describe is not None else ""
                changes.append(OffsetChange(change.source, change.kind, change.key, before,
                                            after, _effect(change) + (f" ({more})" if more
                                                                      else "")))
        if line.index in edited:
            lines[line.index] = line.prefix + json.dumps(edited[line.index],
                                                         separators=(",", ":"))
    out = "\n".join(lines).encode()
    parse_offset_entry(-1, out, shown)  # what the target gets must parse as Spark's does
    return out, changes


def _option(edit: OffsetEdit) -> str:
    return "--shift-by" if edit.shift else "--set-offset"


def _key(leaf: Leaf) -> str:
    return ":".join(leaf) if leaf else "*"


def _keys_of(sources: list[_SourceLine]) -> str:
    keys = [f"{s.source}/{_key(leaf)}" for s in sources for leaf, _ in _leaves(s.offset)]
    return ", ".join(keys[:8]) + (", …" if len(keys) > 8 else "") if keys else "none"


def _check_value(edit: OffsetEdit, source: str, kind: str, leaf: Leaf, after: int,
                 file_log_ends: Mapping[str, int]) -> None:
    where = f"{_option(edit)} {edit.text!r}: source {source} {_key(leaf)}"
    if kind == "file":
        end = file_log_ends.get(source)
        if after < -1:
            raise BadInput(f"{where} would be {after}; a file source's logOffset is -1 (read "
                           "its whole log again) or more")
        if end is not None and after > end:
            raise BadInput(f"{where} would be {after}, past the newest entry of its log "
                           f"(sources/{source}/{end}): Spark would number the next files "
                           "below it and skip them")
    elif after < 0 and leaf != ("timestamp",):
        what = "a Kafka offset" if kind == "kafka" else "an offset"
        raise BadInput(f"{where} would be {after}; {what} cannot be negative (statekit cannot "
                       "ask the broker for its earliest offset: set it explicitly)")


def _effect(change: OffsetChange) -> str:
    n = abs(change.delta)
    verb = "replays" if change.delta < 0 else "skips"
    if change.kind == "kafka":
        return f"{verb} {n} record{'s' * (n != 1)} of partition {change.key}"
    if change.kind == "file":
        return (f"re-reads the files of log entries {change.after + 1}…{change.before}"
                if change.delta < 0 else
                f"skips the files of log entries {change.before + 1}…{change.after}")
    if change.kind == "rate-micro-batch" and change.key == "offset":
        return f"{verb} {n} row{'s' * (n != 1)}"
    return f"moves by {change.delta:+d}"


def integers_of(data: bytes, shown: str) -> dict[tuple[str, str], int]:
    """``{(source id, key): integer}`` of every source offset in an offsets entry."""
    entry = parse_offset_entry(-1, data, shown)
    return {(s.source, _key(leaf)): value for s in entry.sources if s.offset
            for leaf, value in _leaves(loads_json(s.offset))}


def check_edits_applied(data: bytes, shown: str, changes: Sequence[OffsetChange]) -> None:
    """Raise :class:`CorruptFile` unless ``data`` (the staged ``offsets/B``) holds every
    changed integer's new value: the check before publishing."""
    values = integers_of(data, shown)
    for change in changes:
        if values.get((change.source, change.key)) != change.after:
            raise CorruptFile(f"source {change.source} {change.key} is "
                              f"{values.get((change.source, change.key))}, expected "
                              f"{change.after}", path=shown)


@dataclass(frozen=True)
class OffsetsRewrite:
    """The offsets entries a new checkpoint gets instead of copies of the source's."""

    entries: Mapping[str, bytes]
    """``{"offsets/B": …, "offsets/B-1": …}`` (the latter only when lowered)."""
    changes: tuple[OffsetChange, ...]
    """What moved in ``offsets/B``: where the restart resumes."""
    lowered: tuple[OffsetChange, ...]
    """What :func:`rewrite_offsets` lowered in ``offsets/B-1`` to keep start ≤ end."""


def rewrite_offsets(read: Callable[[str], bytes], shown: Callable[[str], str], batch: int,
                    edits: Sequence[OffsetEdit], *,
                    file_log_ends: Mapping[str, int] | None = None,
                    describe: Callable[[OffsetChange], str] | None = None) -> OffsetsRewrite:
    """``offsets/batch`` with ``edits`` applied and, where an integer of it is below its
    value in ``offsets/batch-1`` (moved there, or so already: a hand-edited entry), that
    entry lowered to match. ``read`` and ``shown`` take a path relative to the
    checkpoint."""
    last = f"offsets/{batch}"
    data, changes = edit_offsets(read(last), shown(last), edits,
                                 file_log_ends=file_log_ends, describe=describe)
    entries = {last: data}
    lowered: list[OffsetChange] = []
    if batch > 0:
        previous = f"offsets/{batch - 1}"
        before = read(previous)
        values = integers_of(before, shown(previous))
        lower = [OffsetEdit(f"{source}/{key}={after}", source, tuple(key.split(":")), after,
                            shift=False)
                 for (source, key), after in integers_of(data, shown(last)).items()
                 if values.get((source, key), after) > after]
        if lower:
            entries[previous], moved = edit_offsets(before, shown(previous), lower,
                                                    file_log_ends=file_log_ends)
            lowered = [OffsetChange(c.source, c.kind, c.key, c.before, c.after,
                                    f"lowered to offsets/{batch}'s: Spark calls getBatch("
                                    f"offsets/{batch - 1}, offsets/{batch}) on restart")
                       for c in moved]
    return OffsetsRewrite(entries, tuple(changes), tuple(lowered))
