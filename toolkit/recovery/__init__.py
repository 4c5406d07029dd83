"""How long a restart takes and what it holds: the estimate, its cost model and machine speed,
memory per executor, re-run batches, calibration.
"""
