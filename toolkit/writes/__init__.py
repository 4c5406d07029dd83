"""The no-JVM half of every write into a NEW checkpoint: the repartition plan, the target
layout, staging, file sinks, rollback, evict and source offsets.
"""
