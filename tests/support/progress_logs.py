"""StreamingQueryProgress events as Spark logs them, built from a few numbers.

Lives here rather than in a test module because the progress-log parser, growth CLI and
recovery tests all write progress logs from the same ``progress`` events.
"""

from __future__ import annotations


def progress(batch: int, total: int, *, idle: bool = False, removed: int = 0,
             ops: int = 1) -> dict:
    durations = {"triggerExecution": 5} if idle else {"addBatch": 40, "triggerExecution": 60}
    return {"id": "q", "runId": "r", "batchId": batch,
            "timestamp": f"2026-03-01T10:{batch:02d}:00.000Z", "numInputRows": 0 if idle else 9,
            "durationMs": durations,
            "stateOperators": [{"operatorName": f"op{i}", "numRowsTotal": total + i,
                                "numRowsUpdated": 5, "numRowsRemoved": removed,
                                "memoryUsedBytes": 100 * total} for i in range(ops)]}
