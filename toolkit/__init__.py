"""statekit: see inside Spark Structured Streaming checkpoints and state stores.

This package is the headless core — checkpoint models and analyses in pure Python — and
its subpackages are the layers above it (the repository's folders in brackets):

- ``statekit.cli`` (``toolkit/cli``) and ``statekit.tui`` (``tui/``): the two front ends;
- ``statekit.reference_pipeline`` (``reference_pipeline/``): the reference streaming query;
- ``statekit.jobs`` (``jobs/``): everything that needs a SparkSession;
- everything else (``toolkit/``): the core, which never imports pyspark, textual or click, so
  it stays fast to import, runs without a JVM and serves notebooks, the CLI and the TUI alike.

The import-linter layers contract in ``pyproject.toml`` and ``tests/unit/test_layering.py``
enforce that order.
"""

__version__ = "0.1.0"
