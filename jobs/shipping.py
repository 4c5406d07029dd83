"""statekit on a cluster's executors: ship the package, then probe the executors' Python.

On ``local[*]`` the executors are the driver's own JVM and Python. On a cluster they run the
Python the cluster has, which usually lacks statekit (installed on the edge node only). Every
task a statekit job sends pickles functions of statekit's modules *by reference*, so the
executor must be able to import ``statekit``; and the readers need lz4, zstandard, xxhash,
pyarrow, pandas there too. So before any job runs on a non-local master:

1. :func:`package_zip` builds a zip of the installed package (pure Python, every
   subpackage and its data files), once per version and content, in a cache folder, and the
   session adds it with ``addPyFile`` — the executors import the driver's statekit;
2. :func:`probe` runs one small task per task slot, pickled *by value* (it must run where
   statekit is missing), that imports each module the jobs need and reports its Python;
   a missing module is one line naming it, the executor's Python and the fix, before any
   real job starts.

``STATEKIT_SHIP=0`` turns the shipping off (executors with their own statekit); the probe
still runs.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import platform
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from statekit.jobs.errors import first_line, is_spark_error
from statekit.support.cache import cache_dir
from statekit.support.errors import EnvironmentProblem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SHIP_ENV = "STATEKIT_SHIP"
"""``0``: do not add statekit's zip to a cluster session (its executors have statekit)."""

PACKAGES = (
    "statekit",
    "statekit.support",
    "statekit.formats",
    "statekit.checkpoint",
    "statekit.state",
    "statekit.report",
    "statekit.growth",
    "statekit.recovery",
    "statekit.writes",
    "statekit.doctor",
    "statekit.assess",
    "statekit.fleet",
    "statekit.cli",
    "statekit.cli.commands",
    "statekit.jobs",
    "statekit.jobs.actions",
    "statekit.tui",
    "statekit.tui.panes",
    "statekit.reference_pipeline",
)
"""Every package of the distribution (pyproject's ``packages``; a test keeps them equal)."""

EXECUTOR_MODULES = (
    "statekit",
    "statekit.formats.records",
    "statekit.state.workers",
    "lz4.block",
    "zstandard",
    "xxhash",
    "pyarrow",
    "pandas",
    "numpy",
)
"""What statekit's tasks import on an executor: the package, the state-file readers and
their codecs and checksums, and what Spark's Arrow and pandas functions need."""

_SKIPPED_SUFFIXES = (".pyc", ".pyo")


def is_local(master: str) -> bool:
    """Whether executors are the driver's own process (``local``, ``local[*]``, …)."""
    return master == "local" or master.startswith("local[")


def _package_files() -> list[tuple[str, Path]]:
    """``(name in the zip, file)`` for every file of every package, sorted by name."""
    files: dict[str, Path] = {}
    for package in PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise EnvironmentProblem(f"cannot find the installed package {package} to ship")
        prefix = package.replace(".", "/")
        for folder in spec.submodule_search_locations:
            for path in sorted(Path(folder).iterdir()):
                if path.is_file() and not path.name.endswith(_SKIPPED_SUFFIXES):
                    files[f"{prefix}/{path.name}"] = path
    return sorted(files.items())


def package_zip(folder: Path | None = None) -> Path:
    """The installed statekit as one zip for ``addPyFile``: named by version and a hash of
    its files, built on first use and reused after (written beside, then renamed into
    place, so a concurrent command never sees half a zip)."""
    from statekit import __version__

    files = _package_files()
    digest = hashlib.sha256()
    contents: list[tuple[str, bytes]] = []
    for name, path in files:
        data = path.read_bytes()
        digest.update(name.encode() + b"\0" + data + b"\0")
        contents.append((name, data))
    folder = folder or cache_dir()
    target = folder / f"statekit-{__version__}-{digest.hexdigest()[:16]}.zip"
    if target.exists():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".statekit-", suffix=".zip")
    os.close(handle)
    try:
        with zipfile.ZipFile(temporary, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in contents:
                info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                archive.writestr(info, data)
        os.replace(temporary, target)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)
    return target


@dataclass(frozen=True)
class ExecutorPython:
    """What one probe task saw on its executor."""

    host: str
    executable: str
    version: str
    missing: tuple[tuple[str, str], ...]
    """``(module, why)`` for every module that did not import."""


_PROBE_SOURCE = '''
def probe_task(_index, modules=()):
    import importlib, platform, socket, sys
    missing = []
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as error:
            missing.append((name, type(error).__name__ + ": " + str(error).splitlines()[0]
                            if str(error) else type(error).__name__))
    return (socket.gethostname(), sys.executable, platform.python_version(), tuple(missing))
'''


def _probe_function(modules: tuple[str, ...]) -> Any:
    """The probe task as a function of a module that does not exist anywhere, so that
    cloudpickle sends its code (by value) instead of a reference into statekit — which the
    executor may be unable to import, the very thing the probe finds out."""
    namespace: dict[str, Any] = {"__name__": "statekit_executor_probe"}
    exec(compile(_PROBE_SOURCE, "<statekit executor probe>", "exec"), namespace)
    task = namespace["probe_task"]
    task.__defaults__ = (modules,)
    return task


def probe(spark: SparkSession, modules: tuple[str, ...] = EXECUTOR_MODULES
          ) -> list[ExecutorPython]:
    """Run one probe task per default task slot; each executor Python it reached."""
    context = spark.sparkContext
    slots = max(1, context.defaultParallelism)
    try:
        found = context.parallelize(range(slots), slots).map(_probe_function(modules)).collect()
    except Exception as error:
        if is_spark_error(error):
            raise EnvironmentProblem(
                f"the executors' Python cannot run statekit's probe task: {first_line(error)} "
                f"(the driver runs Python {platform.python_version()}; executors need the "
                "same major.minor version: point --conf spark.pyspark.python at one, or "
                "ship one with statekit pack and --env-archive)"
            ) from None
        raise
    seen: dict[tuple[str, str], ExecutorPython] = {}
    for host, executable, version, missing in found:
        seen.setdefault((host, executable), ExecutorPython(host, executable, version,
                                                           tuple(map(tuple, missing))))
    return list(seen.values())


def require_modules(executors: list[ExecutorPython], shipped: bool) -> None:
    """One line for the first module an executor lacks (statekit first)."""
    for executor in executors:
        if not executor.missing:
            continue
        module, why = executor.missing[0]
        fix = ("let statekit ship itself (unset STATEKIT_SHIP) or install statekit there"
               if module.startswith("statekit") and not shipped else
               f"install {module.split('.')[0]} in that Python, give the executors this "
               "environment (statekit pack, then --env-archive FILE), or point --conf "
               "spark.pyspark.python at a Python of the executors that has it")
        raise EnvironmentProblem(
            f"executor Python {executor.executable} (Python {executor.version}, host "
            f"{executor.host}) cannot import {module} ({why}): {fix}")


_shipped: set[tuple[int, str]] = set()
"""``(id of the SparkContext, zip)`` already added: ``addPyFile`` once per session."""


def prepare_executors(spark: SparkSession) -> list[ExecutorPython]:
    """Ship statekit to a cluster session's executors (unless ``STATEKIT_SHIP=0``) and probe
    them; on a local master nothing (the executors are this process's Python)."""
    context = spark.sparkContext
    if is_local(context.master or "local"):
        return []
    shipped = os.environ.get(SHIP_ENV, "1").strip() not in ("0", "false", "no")
    if shipped:
        archive = package_zip()
        key = (id(context), str(archive))
        if key not in _shipped:
            context.addPyFile(str(archive))
            _shipped.add(key)
    executors = probe(spark)
    require_modules(executors, shipped)
    return executors
