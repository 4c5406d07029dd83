"""The ``statekit`` command line: thin click commands over the core (and jobs, for Spark)."""
