"""The test suite's spine: no test module imports from another test module.

Importing a test module runs its module-level code and ties tests that have nothing to do with
each other together: a helper renamed in one breaks the collection of the other, and a JVM-free
test ends up importing a Spark test module. Helpers more than one test module needs live in
``tests/support``; the helpers there and next to the tests import no test module either.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
REPO = TESTS.parent


def _names_a_test_module(dotted: str) -> bool:
    return any(part.startswith("test_") for part in dotted.split("."))


def _is_module(dotted: str) -> bool:
    path = REPO.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imports_of_test_modules(source: str, path: Path) -> list[tuple[int, str]]:
    """(line, module) of each import in ``source`` (the text of ``path``) of a module named
    ``test_*``: ``import a.test_b``, ``from a.test_b import c``, ``from a import test_b``,
    relative or absolute, at module level or inside a function."""
    package = list(path.relative_to(REPO).parts[:-1])
    found = []
    for node in ast.walk(ast.parse(source, str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if _names_a_test_module(a.name)]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if _names_a_test_module(module):
                found.append((node.lineno, module))
                continue
            found += [(node.lineno, f"{module}.{a.name}") for a in node.names
                      if a.name.startswith("test_") and _is_module(f"{module}.{a.name}")]
    return sorted(found)


def offenders(paths) -> list[str]:
    return [f"{path.relative_to(REPO)}:{line} imports {module}"
            for path in sorted(paths)
            for line, module in imports_of_test_modules(path.read_text(), path)]


def test_no_test_module_imports_another_test_module():
    modules = list(TESTS.rglob("test_*.py"))
    assert len(modules) > 50  # the walk found the suite
    assert offenders(modules) == [], "move the shared helpers into tests/support"


def test_no_helper_imports_a_test_module():
    """A helper module that imports a test module passes the test module on to every test
    module that imports the helper."""
    helpers = [p for p in TESTS.rglob("*.py") if not p.name.startswith("test_")]
    assert TESTS / "support" / "__init__.py" in helpers
    assert offenders(helpers) == [], "move the shared helpers into tests/support"


def test_every_kind_of_import_of_a_test_module_is_found():
    path = TESTS / "unit" / "test_example.py"
    source = "\n".join([
        "import json",
        "import tests.spark.test_migrate",
        "import tests.spark.test_migrate as migrate",
        "from tests.spark.test_inspect_cli import tree_hash",
        "from tests.spark import test_repartition",
        "from tests.support.trees import tree_hash",
        "from tests.unit.checkpoint_builder import write_checkpoint",
        "from . import test_rollback",
        "from .test_rollback import source",
        "from ..spark.test_fault_corpus import run",
        "from .checkpoint_builder import write_checkpoint",
        "def helper():",
        "    from tests.unit.test_progress_log import progress",
        "    return progress",
    ])
    assert imports_of_test_modules(source, path) == [
        (2, "tests.spark.test_migrate"),
        (3, "tests.spark.test_migrate"),
        (4, "tests.spark.test_inspect_cli"),
        (5, "tests.spark.test_repartition"),
        (8, "tests.unit.test_rollback"),
        (9, "tests.unit.test_rollback"),
        (10, "tests.spark.test_fault_corpus"),
        (13, "tests.unit.test_progress_log"),
    ]
