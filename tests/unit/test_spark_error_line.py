"""The one line statekit shows for a Spark failure (no JVM: the texts Py4J produces)."""

from __future__ import annotations

from statekit.jobs.state_reader import _spark_error_line, translate
from statekit.support.errors import JobFailed


def test_error_class_line_with_its_root_cause():
    text = ("An error occurred while calling o9.count.\n: org.apache.spark.SparkException: "
            "[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading state.\n"
            "\tat x\nCaused by: java.io.FileNotFoundException: /c/state/0/1/3.delta\n\tat y")
    assert _spark_error_line(Exception(text)) == (
        "[CANNOT_LOAD_STATE_STORE.UNCATEGORIZED] An error occurred during loading state. "
        "(cause: java.io.FileNotFoundException: /c/state/0/1/3.delta)")


def test_without_an_error_class_the_jvm_exception_not_py4j_s_header():
    text = ("An error occurred while calling o164.load.\n: java.lang.IllegalStateException: "
            "Schema file not found: /t/state/0/_stateSchema/default/0_x\n\tat z")
    error = translate("rollback", Exception(text))
    assert isinstance(error, JobFailed)
    assert str(error) == ("rollback failed: java.lang.IllegalStateException: Schema file not "
                          "found: /t/state/0/_stateSchema/default/0_x")
    assert _spark_error_line(Exception("no JVM in here")) == "no JVM in here"


def test_a_python_workers_exception_is_named_not_its_traceback_header():
    connect = ("[PYTHON_EXCEPTION] An exception was thrown from the Python worker: Traceback "
               "(most recent call last):\n  File \"/w/x.py\", line 3, in run\n    raise "
               "RuntimeError('boom')\nRuntimeError: injected failure before writing "
               "state/0/1/38.snapshot\n\nJVM stacktrace:\norg.apache.spark.SparkException: x")
    assert _spark_error_line(Exception(connect)) == (
        "[PYTHON_EXCEPTION] An exception was thrown from the Python worker: RuntimeError: "
        "injected failure before writing state/0/1/38.snapshot")
    jvm = ("An error occurred while calling o9.collect.\n: org.apache.spark.SparkException: "
           "[TASK_FAILED] Job aborted.\nCaused by: org.apache.spark.api.python."
           "PythonException: Traceback (most recent call last):\n  File \"w.py\", line 1\n"
           "statekit.support.errors.BadInput: partition 3: a key Python cannot represent\n"
           "\tat org.apache.spark.api.python.BasePythonRunner")
    assert _spark_error_line(Exception(jvm)) == (
        "[TASK_FAILED] Job aborted. statekit.support.errors.BadInput: partition 3: a key "
        "Python cannot represent")
