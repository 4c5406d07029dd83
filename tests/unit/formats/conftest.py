"""Fixtures for the format readers: the golden files and an fsspec filesystem for them."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pytest

DATA = Path(__file__).resolve().parents[2] / "data" / "formats"


@pytest.fixture(scope="session")
def data() -> Path:
    return DATA


@pytest.fixture(scope="session")
def fs():
    return fsspec.filesystem("file")
