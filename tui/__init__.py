"""statekit's Textual TUI over the headless core.

The TUI imports the core freely and calls ``statekit.jobs`` (anything that starts a JVM) only
from thread workers, so the first screen never waits for Spark.
"""
