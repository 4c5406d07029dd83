"""Spark failures become one line that names the real error (no JVM: plain exceptions)."""

from __future__ import annotations

from statekit.jobs.errors import first_line, job_failed


class SparkLike(Exception):
    pass


def test_python_worker_errors_name_the_raised_exception():
    error = SparkLike("An exception was thrown from the Python worker:\n"
                      "Traceback (most recent call last):\n  File \"w.py\", line 3, in run\n"
                      "statekit.support.errors.UnsupportedFormat: a state key holds a value\n")
    assert first_line(error) == ("An exception was thrown from the Python worker: "
                                 "statekit.support.errors.UnsupportedFormat: "
                                 "a state key holds a value")


def test_other_errors_keep_their_first_line():
    assert first_line(SparkLike("\n=== banner ===\n[STREAM_FAILED] boom\nat x")) == \
        "[STREAM_FAILED] boom"
    assert first_line(SparkLike("")) == "SparkLike"
    assert str(job_failed("repartition", SparkLike("[X] y"))).endswith("repartition failed: [X] y")
