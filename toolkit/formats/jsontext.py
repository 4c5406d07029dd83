"""JSON from files statekit did not write, parsed so that every failure is a ``ValueError``.

``json.loads`` raises ``RecursionError`` (not ``JSONDecodeError``) on deeply nested input such
as ``[[[[…]]]]`` in a damaged or hostile offsets file; every reader catches decode errors, so
one helper turns that case into a decode error too instead of an internal error.
"""

from __future__ import annotations

import json
from typing import Any


def loads_json(text: str | bytes) -> Any:
    """``json.loads``, with too-deep nesting reported as a ``json.JSONDecodeError``."""
    try:
        return json.loads(text)
    except RecursionError:
        shown = text if isinstance(text, str) else text.decode("utf-8", "replace")
        raise json.JSONDecodeError("nested too deeply", shown, 0) from None
