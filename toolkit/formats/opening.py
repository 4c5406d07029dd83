"""Open a file on an fsspec filesystem for reading, with I/O errors as one-line BadInput.

Every reader opens its file the same way and must report a missing, unreadable or
wrong-kind path the same way, naming the file and what it expected.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, BinaryIO

from statekit.support.errors import BadInput

if TYPE_CHECKING:
    from fsspec.spec import AbstractFileSystem


def open_binary(fs: AbstractFileSystem, path: str, what: str, *,
                shown: str | None = None) -> BinaryIO:
    """``fs.open(path, "rb")``; ``what`` names the expected file (e.g. "state file"),
    ``shown`` is how messages name it (default: ``path``; callers pass the user's URL)."""
    shown = shown or path
    try:
        stream: BinaryIO = fs.open(path, "rb")
        return stream
    except FileNotFoundError:  # it was listed a moment ago
        raise BadInput(f"{what} not found: changed while reading (a running query or its "
                       "cleanup removed it?); run the command again", path=shown) from None
    except PermissionError:
        raise BadInput(f"{what} is not readable (permission denied)", path=shown) from None
    except IsADirectoryError:
        raise BadInput(f"expected a {what}, found a folder", path=shown) from None
