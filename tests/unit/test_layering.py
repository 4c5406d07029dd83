"""The dependency rules of DESIGN.md, enforced by importing each module in a fresh interpreter.

``toolkit`` (outside ``toolkit.cli``) must never pull in pyspark, textual or click; the pure
parts of the reference pipeline must never pull in pyspark. A fresh subprocess per module is
the only honest check: in this test process those packages may already be loaded.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import pytest

import reference_pipeline
import toolkit

CORE_FORBIDDEN = ("pyspark", "textual", "click", "jobs", "tui")
PURE_PIPELINE = ("reference_pipeline.state_machine", "reference_pipeline.leaky",
                 "reference_pipeline.generator", "reference_pipeline.truth",
                 "reference_pipeline.simulate", "reference_pipeline")


def core_modules() -> list[str]:
    names = ["toolkit"]
    for info in pkgutil.walk_packages(toolkit.__path__, "toolkit."):
        if not info.name.startswith("toolkit.cli"):
            names.append(info.name)
    return names


def loaded_after_import(module: str) -> set[str]:
    code = f"import importlib, json, sys; importlib.import_module({module!r}); " \
           "print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    return {name.split(".")[0] for name in json.loads(out)}


@pytest.mark.parametrize("module", core_modules())
def test_core_module_imports_no_ui_cli_or_spark(module):
    leaked = loaded_after_import(module) & set(CORE_FORBIDDEN)
    assert not leaked, f"{module} imports {sorted(leaked)}"


@pytest.mark.parametrize("module", PURE_PIPELINE)
def test_pipeline_logic_is_pure_python(module):
    leaked = loaded_after_import(module) & {"pyspark", "toolkit", "jobs", "tui", "textual"}
    assert not leaked, f"{module} imports {sorted(leaked)}"


def test_the_cli_starts_without_spark():
    leaked = loaded_after_import("toolkit.cli.main") & {"pyspark", "textual"}
    assert not leaked, f"`statekit --help` would load {sorted(leaked)}"


def test_every_pipeline_module_is_listed():
    found = {info.name for info in pkgutil.walk_packages(reference_pipeline.__path__,
                                                          "reference_pipeline.")}
    assert found - set(PURE_PIPELINE) == {"reference_pipeline.pipeline", "reference_pipeline.cli",
                                          "reference_pipeline.__main__"}


def modules_after_cli(args: list[str], tmp_path) -> tuple[int, set[str]]:
    """Run the real CLI entry point in a fresh interpreter; return its exit code and the
    top-level packages it had loaded by the end."""
    dump = tmp_path / "modules.json"
    code = ("import json, sys; from toolkit.cli.runner import run_cli; "
            "from toolkit.cli.main import cli; rc = run_cli(cli, 'statekit', sys.argv[2:]); "
            "open(sys.argv[1], 'w').write(json.dumps(sorted(sys.modules))); sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", code, str(dump), *args],
                          capture_output=True, text=True)
    return done.returncode, {name.split(".")[0] for name in json.loads(dump.read_text())}


@pytest.mark.parametrize("command", [["--help"], ["report"], ["batches"], ["report", "--json"]])
def test_help_and_report_never_load_spark_or_pandas(command, tmp_path):
    import fsspec

    from tests.unit.checkpoint_builder import write_checkpoint

    ckpt = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(ckpt), planned=3, committed=3)
    args = command if command == ["--help"] else [command[0], str(ckpt), *command[1:]]
    code, loaded = modules_after_cli(args, tmp_path)
    assert code == 0
    leaked = loaded & {"pyspark", "py4j", "textual", "pandas", "jobs"}
    assert not leaked, f"`statekit {' '.join(command)}` loaded {sorted(leaked)}"


@pytest.mark.parametrize("command", ["growth", "recovery"])
def test_growth_and_recovery_never_load_spark_or_pandas(command, tmp_path):
    """``statekit growth`` replays files (only ``--deep`` may start Spark); ``statekit
    recovery`` estimates from files."""
    import fsspec

    from tests.unit.checkpoint_builder import write_checkpoint

    ckpt = tmp_path / "ck"
    write_checkpoint(fsspec.filesystem("file"), str(ckpt), planned=8, committed=8,
                     provider="rocksdb")
    code, loaded = modules_after_cli([command, str(ckpt), "--json"], tmp_path)
    assert code == 0
    leaked = loaded & {"pyspark", "py4j", "textual", "pandas", "jobs"}
    assert not leaked, f"`statekit {command}` loaded {sorted(leaked)}"
