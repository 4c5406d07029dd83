"""One module per ``statekit`` command: parse, call the core, render. Registered lazily in
:mod:`statekit.cli.main`.
"""
