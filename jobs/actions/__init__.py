"""Every write as two steps, prepare (plan, no writes) and run (stage, verify, publish), shared
by the CLI and the TUI's Fix and Repartition tabs.
"""
