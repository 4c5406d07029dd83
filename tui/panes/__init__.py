"""One module per tab of the TUI; each pane renders the snapshot's objects and computes nothing
of its own.
"""
