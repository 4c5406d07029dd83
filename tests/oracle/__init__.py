"""Spark as the oracle: real queries, their checkpoints, and one restart harness.

``kinds`` names the checkpoint kinds (operator × provider × format) and builds each from a
real query; ``restart`` starts the query that wrote a checkpoint again, with one new input
file, and reports what Spark did (ran, or failed with which error) and the state it ended
with; ``fault_space`` enumerates the faults of a checkpoint systematically; ``campaign``
judges ``statekit doctor`` on each fault by a real restart. The doctor campaign benchmark
and the Spark tests share all of it.
"""
