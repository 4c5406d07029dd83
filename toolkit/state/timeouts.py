"""Whether a state value has its ``flatMapGroupsWithState`` timeout set, read from its bytes.

Keys without a timeout never expire, which makes them a usual cause of state that grows: the
growth replay counts them at every version (:mod:`statekit.state.history`), and eviction's
plan asks whether a store has the column at all (:mod:`statekit.writes.evict`). Decoding
every value for the count would cost the replay several times over, but the
``timeoutTimestamp`` column is a fixed-width long at a fixed place of the value's UnsafeRow,
so a null bit and eight bytes tell. Where it sits is plain data (:class:`TimeoutField`), not
a closure, so that a worker process can be handed it.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from statekit.checkpoint.state_data import StoreSchema

#: Operators whose value row may end in a ``timeoutTimestamp`` column.
TIMEOUT_OPERATORS = ("flatMapGroupsWithState", "applyInPandasWithState",
                     "flatMapGroupsInPandasWithState")
NO_TIMESTAMP = -1
"""What Spark stores in ``timeoutTimestamp`` when no timeout is set."""

_LONG = struct.Struct("<q")


@dataclass(frozen=True)
class TimeoutField:
    """Where a value's ``timeoutTimestamp`` long sits in its UnsafeRow. Plain data rather than
    a closure, so that a worker process can be handed it and build the check itself."""

    byte: int
    """The byte of the null bitset holding the field's null bit …"""
    bit: int
    """… and the bit in it."""
    offset: int
    """Where the fixed-width long starts."""

    def check(self) -> Callable[[bytes], bool]:
        """Whether a value's timeout is unset (``NO_TIMESTAMP`` or null), read in place."""
        byte, bit, offset, unpack = self.byte, self.bit, self.offset, _LONG.unpack_from

        def no_timeout(value: bytes) -> bool:
            if len(value) < offset + 8 or value[byte] >> bit & 1:
                return True
            stamp: int = unpack(value, offset)[0]
            return stamp == NO_TIMESTAMP

        return no_timeout


def timeout_reader(schema: StoreSchema | None, operator_name: str | None
                    ) -> tuple[str, TimeoutField | None]:
    """How to tell from a value's bytes that its timeout is unset (``NO_TIMESTAMP`` or null):
    ``("per-key", where)``, or ``("disabled", None)`` when the value has no timeout column
    (a NoTimeout query), ``("n/a", None)`` for an operator without timeouts.

    The timestamp is a fixed-width long in the UnsafeRow: read in place, no decoding.
    """
    if operator_name not in TIMEOUT_OPERATORS or schema is None or schema.value is None:
        return "n/a", None
    fields = schema.value.fields
    index = next((i for i, f in enumerate(fields)
                  if f.name == "timeoutTimestamp" and f.data_type.name == "long"), None)
    if index is None:
        return "disabled", None
    bitset = ((len(fields) + 63) // 64) * 8
    byte, bit = divmod(index, 8)
    return "per-key", TimeoutField(byte, bit, bitset + 8 * index)


def timeout_check(timeout: TimeoutField | None) -> Callable[[bytes], bool] | None:
    """:meth:`TimeoutField.check`, or ``None`` where there is no timeout to read."""
    return timeout.check() if timeout is not None else None
