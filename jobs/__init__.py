"""Everything that needs a SparkSession: state data source reads, exports, distributed jobs.

``statekit.jobs`` may import the core; it never imports a front end (``statekit.cli``,
``statekit.tui``). Both front ends call the same job functions, so an action behaves the
same from the terminal and from the TUI.
"""
