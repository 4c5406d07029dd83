"""Everything that needs a SparkSession: state data source reads, exports, distributed jobs.

``jobs`` may import ``toolkit`` models; it never imports ``tui``. Each job is also runnable
with ``spark-submit`` so the same code works on a cluster.
"""
