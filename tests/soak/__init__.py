"""The soak: statekit's long-running services on a broken fleet (benchmarks/soak.py), briefly."""
