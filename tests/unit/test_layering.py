"""The dependency rules, enforced by importing each module in a fresh interpreter.

The core (``statekit`` outside ``statekit.cli``, ``statekit.tui``, ``statekit.jobs`` and
``statekit.reference_pipeline``) must never pull in pyspark, textual or click; the pure parts
of the reference pipeline must never pull in pyspark. A fresh subprocess per module is the
only honest check: in this test process those packages may already be loaded. To keep that
cheap, one fresh interpreter per test worker (``fresh_importer``) loads only what the core is
allowed to use (pyarrow, fsspec, numpy…) — checked to hold none of the forbidden packages —
and forks a child per module: each child starts from that clean state. The
import-linter layers contract (``make lint``) checks the order between the layers; the tests
here make sure that contract names every module there is.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYERS_ABOVE_CORE = ("statekit.cli", "statekit.tui", "statekit.jobs",
                     "statekit.reference_pipeline", "statekit.__main__")
CORE_FORBIDDEN = ("pyspark", "py4j", "textual", "click", "pandas")
PURE_PIPELINE = ("statekit.reference_pipeline.state_machine", "statekit.reference_pipeline.leaky",
                 "statekit.reference_pipeline.generator", "statekit.reference_pipeline.truth",
                 "statekit.reference_pipeline.simulate", "statekit.reference_pipeline")


def all_modules(package: str = "statekit") -> list[str]:
    """Every module below ``package`` as installed (pkgutil cannot see the subpackages that
    pyproject's package-dir maps from other folders)."""
    from tests.static_checks import package_dirs

    found = []
    for name, folder in package_dirs().items():
        if name == package or name.startswith(package + "."):
            found += [name] if name != package else []
            found += [f"{name}.{path.stem}" for path in folder.glob("*.py")
                      if path.stem != "__init__"]
    return sorted(found)


def core_modules() -> list[str]:
    return ["statekit"] + [name for name in all_modules()
                           if not name.startswith(LAYERS_ABOVE_CORE)]


def top_names(modules: list[str]) -> set[str]:
    """Top-level packages, and statekit's own layers by their full name."""
    names = set()
    for name in modules:
        parts = name.split(".")
        names.add(".".join(parts[:2]) if parts[0] == "statekit" and len(parts) > 1 else parts[0])
    return names


#: What the forking importer loads before it forks: third-party packages the core may use.
PRELOADED = ("pyarrow", "fsspec", "numpy", "lz4.block", "xxhash", "zstandard")
_IMPORTER = f"""
import importlib, json, os, sys
for name in {PRELOADED!r}:
    importlib.import_module(name)
print(json.dumps(sorted(sys.modules)), flush=True)
for line in sys.stdin:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(line.strip())
            answer = {{"modules": sorted(sys.modules)}}
        except BaseException as error:
            answer = {{"error": repr(error)}}
        os.write(write, json.dumps(answer).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        print(pipe.read(), flush=True)
    os.waitpid(pid, 0)
"""


@pytest.fixture(scope="session")
def fresh_importer():
    """``import_in_fresh(module)``: the top-level names loaded after importing ``module`` in a
    forked child of an interpreter that holds only the standard library and PRELOADED."""
    process = subprocess.Popen([sys.executable, "-c", _IMPORTER], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    assert process.stdin is not None and process.stdout is not None
    base = top_names(json.loads(process.stdout.readline()))
    assert not base & {*CORE_FORBIDDEN, *LAYERS_ABOVE_CORE, "statekit"}, base

    def import_in_fresh(module: str) -> set[str]:
        process.stdin.write(module + "\n")
        process.stdin.flush()
        answer = json.loads(process.stdout.readline())
        assert "error" not in answer, f"importing {module}: {answer.get('error')}"
        return top_names(answer["modules"])

    yield import_in_fresh
    process.stdin.close()
    process.wait(timeout=60)


def contracts() -> list[dict]:
    from tests.static_checks import read_pyproject

    return read_pyproject()["tool"]["importlinter"]["contracts"]


@pytest.mark.parametrize("module", core_modules())
def test_core_module_imports_no_ui_cli_or_spark(module, fresh_importer):
    leaked = fresh_importer(module) & {*CORE_FORBIDDEN, *LAYERS_ABOVE_CORE}
    assert not leaked, f"{module} imports {sorted(leaked)}"


@pytest.mark.parametrize("module", PURE_PIPELINE)
def test_pipeline_logic_is_pure_python(module, fresh_importer):
    leaked = fresh_importer(module) & {"pyspark", "textual", "click", "statekit.jobs",
                                       "statekit.tui", "statekit.cli"}
    assert not leaked, f"{module} imports {sorted(leaked)}"


def test_the_cli_starts_without_spark(fresh_importer):
    leaked = fresh_importer("statekit.cli.main") & {"pyspark", "textual"}
    assert not leaked, f"`statekit --help` would load {sorted(leaked)}"


@pytest.mark.parametrize("module", ["statekit.tui.app", "statekit.jobs.actions.repartition",
                                    "statekit.jobs.actions.evict",
                                    "statekit.jobs.actions.rollback"])
def test_the_tui_and_the_write_actions_prepare_without_spark(module, fresh_importer):
    """The actions' JVM-free ``prepare`` (dry-run checks, the TUI's Fix and Repartition tabs)
    must not pay for importing pyspark: their Spark side loads in ``run``."""
    leaked = fresh_importer(module) & {"pyspark", "py4j"}
    assert not leaked, f"importing {module} loads {sorted(leaked)}"


def test_every_pipeline_module_is_listed():
    found = set(all_modules("statekit.reference_pipeline"))
    assert found - set(PURE_PIPELINE) == {"statekit.reference_pipeline.pipeline"}


def test_the_layers_contract_covers_every_module():
    """Each direct child of ``statekit`` sits in exactly one layer, so no module escapes."""
    (layers,) = [c for c in contracts() if c["type"] == "layers"]
    assert layers["containers"] == ["statekit"]
    placed = [name.strip() for layer in layers["layers"] for name in layer.split("|")]
    children = {name.split(".")[1] for name in all_modules()}
    assert sorted(placed) == sorted(set(placed)), "a module sits in two layers"
    assert children == set(placed)


def test_the_core_contract_covers_every_core_module():
    (core,) = [c for c in contracts() if c["name"].startswith("The headless core")]
    children = {".".join(name.split(".")[:2]) for name in core_modules() if name != "statekit"}
    assert children == set(core["source_modules"])


def test_every_package_folder_is_in_the_distribution():
    """A subpackage missing from pyproject's list would be left out of the wheel."""
    from tests.static_checks import package_dirs

    folders = package_dirs()
    assert all(folder.is_dir() for folder in folders.values())
    listed = {folder.resolve() for folder in folders.values()}
    on_disk = {init.parent.resolve() for root in ("toolkit", "jobs", "tui", "reference_pipeline")
               for init in (REPO / root).rglob("__init__.py")}
    assert on_disk == listed


def test_no_module_imports_the_folder_names():
    """``toolkit``, ``jobs``, ``tui`` are folders, not import names: importing them would load a
    second copy of a module (and could pick up a user's own ``jobs`` package)."""
    import ast

    folders = {"toolkit", "jobs", "tui", "reference_pipeline"}
    offenders = []
    for top in ("toolkit", "jobs", "tui", "reference_pipeline", "tests", "benchmarks", "docs"):
        for path in (REPO / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module or ""] if isinstance(node, ast.ImportFrom) and
                         not node.level else [])
                if any(name.split(".")[0] in folders for name in names):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}")
    assert offenders == []


def modules_after_cli(args: list[str], tmp_path) -> tuple[int, set[str]]:
    """Run the real CLI entry point in a fresh interpreter; return its exit code and the
    top-level packages it had loaded by the end."""
    dump = tmp_path / "modules.json"
    code = ("import json, sys; from statekit.cli.runner import run_cli; "
            "from statekit.cli.main import cli; rc = run_cli(cli, 'statekit', sys.argv[2:]); "
            "open(sys.argv[1], 'w').write(json.dumps(sorted(sys.modules))); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, str(dump), *args],
                          capture_output=True, text=True)
    return done.returncode, top_names(json.loads(dump.read_text()))


FROZEN_CHECKPOINT = Path(__file__).resolve().parents[1] / "data" / "fault_corpus" / "hdfs"
"""A real checkpoint (read only): the commands decode its state files as they would a
user's."""


@pytest.mark.parametrize("command", [["--help"], ["report"], ["batches"], ["report", "--json"]])
def test_help_and_report_never_load_spark_or_pandas(command, tmp_path):
    ckpt = FROZEN_CHECKPOINT
    args = command if command == ["--help"] else [command[0], str(ckpt), *command[1:]]
    code, loaded = modules_after_cli(args, tmp_path)
    assert code == 0
    leaked = loaded & {"pyspark", "py4j", "textual", "pandas", "statekit.jobs"}
    assert not leaked, f"`statekit {' '.join(command)}` loaded {sorted(leaked)}"


@pytest.mark.parametrize("command", ["growth", "recovery"])
def test_growth_and_recovery_never_load_spark_or_pandas(command, tmp_path):
    """``statekit growth`` replays files (only ``--deep`` may start Spark); ``statekit
    recovery`` estimates from files."""
    code, loaded = modules_after_cli([command, str(FROZEN_CHECKPOINT), "--json"], tmp_path)
    assert code == 0
    leaked = loaded & {"pyspark", "py4j", "textual", "pandas", "statekit.jobs"}
    assert not leaked, f"`statekit {command}` loaded {sorted(leaked)}"


def test_the_cycle_check_finds_loops_through_function_imports_not_type_checking(
        tmp_path, monkeypatch):
    from tests.static_checks import import_cycles

    package = tmp_path / "loops"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from loops import b\n")
    (package / "b.py").write_text("def late():\n    from loops import c\n")
    (package / "c.py").write_text("import loops.a\n")
    (package / "d.py").write_text("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from loops import e\n")
    (package / "e.py").write_text("from loops import d\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("loops") == [["loops.a", "loops.b", "loops.c"]]
