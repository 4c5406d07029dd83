"""The zip statekit ships to a cluster's executors, without a JVM: complete, importable on a
Python that lacks statekit, cached by content, and the probe's one-line verdicts."""

from __future__ import annotations

import subprocess
import sys
import zipfile

import pytest

from statekit.jobs.shipping import (
    PACKAGES,
    ExecutorPython,
    is_local,
    package_zip,
    require_modules,
)
from statekit.support.errors import EXIT_ENVIRONMENT, EnvironmentProblem
from tests.static_checks import read_pyproject


def test_every_package_of_the_distribution_is_shipped():
    assert sorted(PACKAGES) == sorted(read_pyproject()["tool"]["setuptools"]["packages"])


def test_the_zip_holds_every_module_and_is_built_once(tmp_path):
    first = package_zip(tmp_path)
    assert package_zip(tmp_path) == first and len(list(tmp_path.iterdir())) == 1
    names = set(zipfile.ZipFile(first).namelist())
    for package in PACKAGES:
        assert f"{package.replace('.', '/')}/__init__.py" in names
    assert {"statekit/formats/records.py", "statekit/jobs/log4j2.properties",
            "statekit/state/workers.py"} <= names
    assert not any(name.endswith(".pyc") for name in names)


def test_the_zip_imports_where_statekit_is_not_installed(tmp_path):
    """``python -I`` (no site-packages of this venv, no PYTHONPATH) with only the zip on
    the path imports statekit's pure readers from it."""
    archive = package_zip(tmp_path)
    done = subprocess.run([sys.executable, "-I", "-S", "-c",
                           "import sys; sys.path.insert(0, sys.argv[1]); "
                           "import statekit.support.errors, statekit.formats.modified_utf8; "
                           "print(statekit.support.errors.__file__)", str(archive)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(archive))


@pytest.mark.parametrize(("master", "local"), [
    ("local", True), ("local[*]", True), ("local[2]", True), ("local-cluster[2,1,1024]", False),
    ("spark://127.0.0.1:7077", False), ("yarn", False), ("k8s://https://host:443", False)])
def test_which_masters_run_executors_elsewhere(master, local):
    assert is_local(master) is local


def test_a_missing_module_is_one_line_naming_it_and_the_fix():
    fine = ExecutorPython("worker-1", "/opt/py/bin/python3", "3.11.7", ())
    require_modules([fine], shipped=True)
    lacking = ExecutorPython("worker-2", "/opt/py/bin/python3", "3.11.7",
                             (("zstandard", "ModuleNotFoundError: No module named 'zstandard'"),))
    with pytest.raises(EnvironmentProblem) as caught:
        require_modules([fine, lacking], shipped=True)
    message = str(caught.value)
    assert "\n" not in message and caught.value.exit_code == EXIT_ENVIRONMENT
    assert "/opt/py/bin/python3" in message and "cannot import zstandard" in message
    assert "install zstandard in that Python" in message
    assert "statekit pack, then --env-archive FILE" in message  # a fix that exists
    unshipped = ExecutorPython("worker-2", "/opt/py/bin/python3", "3.11.7",
                               (("statekit", "ModuleNotFoundError: No module named 'statekit'"),))
    with pytest.raises(EnvironmentProblem, match="unset STATEKIT_SHIP"):
        require_modules([unshipped], shipped=False)
