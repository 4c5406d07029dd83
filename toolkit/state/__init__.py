"""State files as Spark loads them: one store instance's files, per-version history, decoding
and verifying the restart path, the decode cache, and the worker processes that share a pass
over partitions.
"""
