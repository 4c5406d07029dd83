"""The reference fraud/session pipeline and its event generator.

``state_machine`` (the per-user fraud/session logic), ``leaky`` (the deliberately unbounded
variant), ``generator`` (realistic, deterministic event batches) and ``truth`` (what a correct
run must output) are pure Python; ``pipeline`` adapts the logic to Spark's
``applyInPandasWithState``. Importing this package never imports pyspark.
"""
