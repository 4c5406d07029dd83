"""A packed Python environment for a cluster's executors (``statekit pack``, ``--env-archive``).

Shipping statekit's own zip (:mod:`statekit.jobs.shipping`) is enough where the executors'
Python already has statekit's dependencies. Where it does not (a bare cluster Python, no
``pip install`` allowed on the workers), PySpark's own answer is a packed environment passed
with ``spark.archives``: Spark unpacks it into every executor's working folder and
``spark.pyspark.python`` points at the Python inside.

Why venv-pack, not PEX: venv-pack archives the files *as installed* in the running venv — no
re-resolution, no index or wheel cache on the building host, exactly the versions the driver
runs (statekit's readers and the driver must agree on pyarrow/pandas) — and the result is the
``.tar.gz#alias`` + ``./alias/bin/python`` pair that Spark's docs give for YARN, Kubernetes and
standalone alike. PEX would re-resolve the requirements from an index or wheels (this project's
venv holds an editable statekit, which PEX cannot take as it is) and unpacks itself into a
``PEX_ROOT`` on each executor's first run. Both need a compatible CPython on the executors:
the packed venv links to the base interpreter at the path it has here (``--python-prefix``
names another), the same major.minor as the driver's (the probe checks it).

By default the archive holds what statekit's tasks need, not the whole venv: statekit's
runtime requirements (with its installed extras), transitively, and files no distribution
owns. Left out: development tools, pyspark's jars (the JVM side lives on the cluster; the
Python worker needs only pyspark's Python files) and an editable statekit's import hook,
which points at a source tree the executors do not have (the session ships statekit's zip).
"""

from __future__ import annotations

import os
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from statekit.support.errors import BadInput, EnvironmentProblem, UnsafeOperation

ARCHIVE_ALIAS = "statekit_env"
"""The folder Spark unpacks the archive into, in each executor's working folder."""

ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
SKIPPED_EXTRAS = frozenset({"dev"})
"""statekit extras that never matter on an executor."""


@dataclass(frozen=True)
class PackPlan:
    """What ``statekit pack`` will put into the archive, decided without writing anything."""

    prefix: Path
    files: tuple[tuple[str, str], ...]
    """``(absolute source, path inside the archive)``, in venv-pack's order."""
    total_bytes: int
    packed: tuple[str, ...]
    """The distributions packed (canonical names), sorted."""
    left_out: tuple[str, ...]
    """Installed distributions statekit's tasks do not need, sorted."""
    python_home: str
    """The base interpreter's prefix the packed venv links to."""
    python_version: str
    notes: tuple[str, ...] = field(default=())
    venv: Any = field(default=None, repr=False, compare=False)
    """venv-pack's reading of the venv (its layout and original prefix), which the writer
    needs again; kept so the venv is walked once."""


@dataclass(frozen=True)
class PackResult:
    archive: Path
    files: int
    bytes_in: int
    bytes_out: int
    seconds: float
    python_prefix: str

    def confs(self) -> tuple[str, str]:
        """The two ``--conf`` settings that make executors run the packed Python."""
        return (f"spark.archives={self.archive}#{ARCHIVE_ALIAS}",
                f"spark.pyspark.python=./{ARCHIVE_ALIAS}/bin/python")


def _installed() -> dict[str, metadata.Distribution]:
    found: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), dist)
    return found


def _requirements(dist: metadata.Distribution, extras: Iterable[str]) -> list[Requirement]:
    """The requirements of ``dist`` that apply here with ``extras`` requested."""
    wanted = ["", *extras]
    applicable = []
    for text in dist.requires or ():
        requirement = Requirement(text)
        if requirement.marker is None or any(requirement.marker.evaluate({"extra": extra})
                                             for extra in wanted):
            applicable.append(requirement)
    return applicable


def installed_extras(dist: metadata.Distribution, installed: dict[str, metadata.Distribution]
                     ) -> list[str]:
    """The extras of ``dist`` (``dev`` aside) whose own requirements are all installed."""
    extras = []
    for extra in dist.metadata.get_all("Provides-Extra") or ():
        if extra in SKIPPED_EXTRAS:
            continue
        needed = [r for r in _requirements(dist, [extra])
                  if r.marker is not None and r.marker.evaluate({"extra": extra})
                  and not r.marker.evaluate({"extra": ""})]
        if needed and all(canonicalize_name(r.name) in installed for r in needed):
            extras.append(extra)
    return extras


def runtime_closure(root: str = "statekit",
                    installed: dict[str, metadata.Distribution] | None = None) -> set[str]:
    """``root`` and every installed distribution it needs at run time, transitively (its
    installed extras included; a requirement that is not installed is skipped)."""
    installed = _installed() if installed is None else installed
    start = canonicalize_name(root)
    if start not in installed:
        raise EnvironmentProblem(f"{root} is not installed in {sys.prefix}: nothing to pack")
    needed: set[str] = set()
    pending: list[tuple[str, list[str]]] = [(start, installed_extras(installed[start],
                                                                      installed))]
    while pending:
        name, extras = pending.pop()
        if name in needed:
            continue
        needed.add(name)
        for requirement in _requirements(installed[name], extras):
            child = canonicalize_name(requirement.name)
            if child in installed and child not in needed:
                pending.append((child, sorted(requirement.extras)))
    return needed


def _owned_paths(dist: metadata.Distribution) -> set[str]:
    return {os.path.normpath(str(dist.locate_file(path))) for path in dist.files or ()}


def _site_packages(prefix: Path) -> Path:
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return prefix / "lib" / version / "site-packages"


def _is_editable_hook(name: str) -> bool:
    return name.startswith("__editable__") or name.endswith(".egg-link")


def plan_pack(everything: bool = False, prefix: Path | None = None) -> PackPlan:
    """Decide the archive's files for the running venv (``everything``: the whole venv but
    pyspark's jars and editable hooks)."""
    import venv_pack

    prefix = Path(prefix or sys.prefix)
    if Path(sys.prefix) == Path(sys.base_prefix) and prefix == Path(sys.prefix):
        raise EnvironmentProblem(
            f"statekit runs from {sys.prefix}, not a virtual environment: statekit pack packs "
            "the venv statekit is installed in (python -m venv …; pip install statekit)")
    try:
        env = venv_pack.Env(str(prefix))
    except venv_pack.VenvPackException as error:
        raise EnvironmentProblem(f"cannot pack {prefix}: {' '.join(str(error).split())}"
                                 ) from None
    installed = _installed()
    needed = set(installed) if everything else runtime_closure(installed=installed)
    site = _site_packages(prefix)
    excluded_files: set[str] = set()
    excluded_tops: set[str] = set()
    kept_tops: set[str] = set()
    for name, dist in installed.items():
        owned = _owned_paths(dist)
        tops = {Path(path).relative_to(site).parts[0] for path in owned
                if Path(path).is_relative_to(site) and Path(path) != site}
        if name in needed:
            kept_tops |= tops
        else:
            excluded_files |= owned
            excluded_tops |= tops
    excluded_tops -= kept_tops
    site_target = str(site.relative_to(prefix))
    jars = f"{site_target}/pyspark/jars/"
    files: list[tuple[str, str]] = []
    total = 0
    notes: list[str] = []
    for entry in env.files:
        target = entry.target.replace(os.sep, "/")
        inside = target[len(site_target) + 1:] if target.startswith(site_target + "/") else None
        top = inside.split("/", 1)[0] if inside else None
        if target.startswith(jars) or (top is not None and _is_editable_hook(
                top if top != "__pycache__" else target.rsplit("/", 1)[-1])):
            continue
        if top in excluded_tops or os.path.normpath(entry.source) in excluded_files:
            continue
        files.append((entry.source, entry.target))
        if not os.path.islink(entry.source):
            total += os.path.getsize(entry.source)
    if any(_is_editable_hook(p.name) for p in site.glob("__editable__*statekit*")):
        notes.append("statekit is an editable install here: its source tree is not packed "
                     "(statekit ships its own code to the executors)")
    version = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    return PackPlan(prefix=prefix, files=tuple(files), total_bytes=total,
                    packed=tuple(sorted(needed)),
                    left_out=tuple(sorted(set(installed) - needed)),
                    python_home=str(Path(sys.base_prefix)), python_version=version,
                    notes=tuple(notes), venv=env._context)


def _archive_format(output: Path) -> str:
    name = output.name
    if name.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    if name.endswith(".zip"):
        return "zip"
    raise BadInput(f"{output}: the archive must end in .tar.gz, .tgz or .zip "
                   "(what spark.archives unpacks)")


def _members(output: Path, fmt: str) -> int:
    if fmt == "zip":
        with zipfile.ZipFile(output) as archive:
            return len(archive.namelist())
    with tarfile.open(output, "r:gz") as archive:
        return len(archive.getmembers())


def check_output(output: Path, prefix: Path, force: bool) -> Path:
    """``output`` made absolute, or the one-line reason it cannot be written."""
    output = output.absolute()
    _archive_format(output)
    if output.exists() and not force:
        raise UnsafeOperation(f"{output} exists: choose another name or add --overwrite",
                              path=str(output))
    if output.is_relative_to(prefix):
        raise BadInput(f"{output}: the archive cannot be written inside the venv it packs")
    if not output.parent.is_dir():
        raise BadInput(f"{output.parent}: no such folder")
    return output


def write_pack(plan: PackPlan, output: Path, *, python_prefix: str | None = None,
               force: bool = False, compress_level: int = 4,
               on_progress: Callable[[int, int], None] | None = None) -> PackResult:
    """Write ``plan`` to ``output`` through a staging file beside it; published (renamed into
    place) only when the archive reads back with every file."""
    from venv_pack.core import Env, File, Packer, archive

    output = check_output(output, plan.prefix, force)
    fmt = _archive_format(output)
    started = time.monotonic()
    context = plan.venv if plan.venv is not None else Env(str(plan.prefix))._context
    handle, staging = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.",
                                       suffix=".partial")
    done = 0
    try:
        with os.fdopen(handle, "wb") as sink, \
                archive(sink, fmt, compress_level=compress_level, zip_symlinks=False,
                        zip_64=True) as writer:
            packer = Packer(context, writer, python_prefix)
            for source, target in plan.files:
                packer.add(File(source, target))
                if not os.path.islink(source):
                    done += os.path.getsize(source)
                if on_progress:
                    on_progress(done, plan.total_bytes)
            packer.finish()
        written = _members(Path(staging), fmt)
        if written < len(plan.files):
            raise EnvironmentProblem(f"{output}: the archive read back with {written} of "
                                     f"{len(plan.files)} files; not published")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staging, 0o666 & ~umask)  # mkstemp's 0600 would hide it from a file server
        os.replace(staging, output)
    except OSError as error:
        raise EnvironmentProblem(f"cannot write {output}: {error.strerror or error}") from None
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
    return PackResult(archive=output, files=len(plan.files), bytes_in=plan.total_bytes,
                      bytes_out=output.stat().st_size, seconds=time.monotonic() - started,
                      python_prefix=python_prefix or plan.python_home)


def env_archive_conf(archive: str, master: str | None, conf: dict[str, str]) -> dict[str, str]:
    """The settings ``--env-archive FILE`` stands for, merged over ``conf`` (a user's own
    ``spark.archives`` kept beside it). Refused on a local master, where the executors are
    this process's Python and nothing is unpacked."""
    from statekit.jobs.shipping import is_local

    if master is None or is_local(master):
        raise BadInput("--env-archive is for a cluster master (--master spark://…, yarn, "
                       "k8s://…); on local[*] the executors run this Python")
    if "://" not in archive:
        path = Path(archive)
        if not path.is_file():
            raise BadInput(f"{archive}: no such archive (build one with statekit pack)")
        _archive_format(path)
        archive = str(path.absolute())
    merged = dict(conf)
    own = f"{archive}#{ARCHIVE_ALIAS}"
    merged["spark.archives"] = ",".join(filter(None, [conf.get("spark.archives"), own]))
    merged.setdefault("spark.pyspark.python", f"./{ARCHIVE_ALIAS}/bin/python")
    return merged
