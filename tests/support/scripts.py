"""Importing a script that is not a package module (a benchmark, the docs' sample maker).

The JVM-free tests check the pure logic of ``benchmarks/*.py`` and ``docs/make_samples.py``
(a synthetic checkpoint that restarts, a docs table re-estimated, every sample as printed);
those files are scripts, run by path, so each test imported them by hand the same way.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str) -> ModuleType:
    """The script at ``ROOT/relative`` as a module, registered under its stem (dataclasses
    look their module up in ``sys.modules``)."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
