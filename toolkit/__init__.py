"""statekit's headless core: checkpoint models and analyses in pure Python.

Nothing under ``toolkit`` (except ``toolkit.cli``) may import pyspark, textual or click: the
core must stay fast to import, runnable without a JVM, and usable from notebooks, the CLI and
the TUI alike. ``tests/unit/test_layering.py`` enforces it.
"""

__version__ = "0.1.0"
