"""statekit's Textual TUI over the headless core (built in issue 8).

The TUI imports ``toolkit`` freely and calls ``jobs`` (anything that starts a JVM) only from
thread workers, so the first screen never waits for Spark.
"""
