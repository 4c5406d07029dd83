"""How much of each oracle matrix a run judges: a fixed-seed covering sample in ``make test``,
every case in ``make test-oracle``.

The oracle families — the doctor campaign, the migrate matrix, the cluster writes, the
restarts of rewritten checkpoints — let a real Spark judge statekit's predictions, case by
case. Each case costs seconds of Spark; all of them together cost more than the suite's
budget (25 minutes on two cores). ``make test`` therefore judges a sample of each family that
is the same on every run (a fixed seed: a failure reproduces) and *covers* the matrix: every
value of every dimension (every operator, every provider, every command, …) is in it before
any value is repeated. ``STATEKIT_ORACLE=full`` (what ``make test-oracle`` sets) judges every
case; run it before a release and after a change to a rewrite, the doctor's rules or the
restart model.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

T = TypeVar("T")


def full_oracle() -> bool:
    """True when every case of every oracle matrix is judged (``make test-oracle``)."""
    return os.environ.get("STATEKIT_ORACLE", "").strip().lower() == "full"


def covering_sample(cases: Sequence[T], dimensions: Callable[[T], dict[str, Hashable]],
                    count: int, seed: int) -> list[T]:
    """``count`` cases (at least enough to cover every dimension's values), in the matrix's
    order: greedily the case that covers most (dimension, value) pairs not yet covered, ties
    broken by a fixed-seed shuffle; once every value is covered, the rest drawn at random
    (same seed). ``full_oracle()``: every case."""
    if full_oracle() or count >= len(cases):
        return list(cases)
    rng = random.Random(seed)
    order = list(range(len(cases)))
    rng.shuffle(order)
    pairs = {i: set(dimensions(cases[i]).items()) for i in order}
    uncovered = set().union(*pairs.values())
    chosen: list[int] = []
    while uncovered:
        best = max(order, key=lambda i: (i not in chosen and len(pairs[i] & uncovered)))
        chosen.append(best)
        uncovered -= pairs[best]
    rest = [i for i in order if i not in chosen]
    chosen += rest[:max(0, count - len(chosen))]
    return [cases[i] for i in sorted(chosen)]


def fixed_sample(cases: Sequence[T], count: int, seed: int) -> list[T]:
    """``count`` of ``cases`` drawn with a fixed seed, in their order; all under
    ``full_oracle()``."""
    if full_oracle() or count >= len(cases):
        return list(cases)
    picked = sorted(random.Random(seed).sample(range(len(cases)), count))
    return [cases[i] for i in picked]
