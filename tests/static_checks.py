"""Run the static checks (import-linter contracts, mypy) on statekit as it is installed.

The repository keeps its product folders (``toolkit/``, ``jobs/``, ``tui/``,
``reference_pipeline/``) while everything is imported as ``statekit.…``: pyproject's
``package-dir`` maps the one onto the other. Python follows that mapping through setuptools'
editable-install hook, but static tools do not: grimp (import-linter) walks the folder of
``statekit`` only and would never see ``statekit.jobs``; mypy cannot find ``statekit`` at all.
So this script builds the installed layout as a tree of symbolic links (real folders, one link
per source file) under ``build/static/``, points both tools at it, and prints their findings
with the repository's own paths.

A third check needs no tool of its own: the module import graph has no cycle (two modules
importing each other, directly or round a loop, at module level or inside a function; imports
under ``TYPE_CHECKING`` are types only and do not count). The layers contract forbids upward
imports between statekit's children; this also covers modules of one package.

Usage: ``python tests/static_checks.py`` (``make lint`` runs it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # mypy brings tomli on older Pythons
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
TREE = REPO / "build" / "static"


def read_pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def package_dirs() -> dict[str, Path]:
    """Every package in pyproject's ``packages`` list and the folder it is built from."""
    setuptools = read_pyproject()["tool"]["setuptools"]
    mapping: dict[str, str] = setuptools.get("package-dir", {})
    folders: dict[str, Path] = {}
    for package in setuptools["packages"]:
        parts = package.split(".")
        for cut in range(len(parts), 0, -1):
            mapped = mapping.get(".".join(parts[:cut]))
            if mapped is not None:
                folders[package] = REPO / mapped / Path(*parts[cut:])
                break
        else:
            folders[package] = REPO / Path(*parts)
    return folders


def link_tree(root: Path = TREE) -> Path:
    """Mirror the installed package layout under ``root`` with one symlink per ``.py`` file."""
    shutil.rmtree(root, ignore_errors=True)
    for package, folder in package_dirs().items():
        target = root / Path(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for source in sorted(folder.glob("*.py")):
            (target / source.name).symlink_to(source)
    (root / ".gitignore").write_text("*\n")
    return root


def _real_paths(output: str, root: Path) -> str:
    """Show findings at the repository's paths (``jobs/session.py``), not the tree's."""
    pattern = re.compile(re.escape(str(root)) + r"/([\w/]+\.py)")

    def repo_path(match: re.Match[str]) -> str:
        return os.path.relpath(os.path.realpath(root / match.group(1)), REPO)

    relative = re.compile(r"(?<![\w/])" + re.escape(os.path.relpath(root, REPO)) + r"/([\w/]+\.py)")
    return relative.sub(repo_path, pattern.sub(repo_path, output))


def run(command: list[str], env: dict[str, str], root: Path) -> int:
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    sys.stdout.write(_real_paths(done.stdout, root))
    sys.stderr.write(_real_paths(done.stderr, root))
    return done.returncode


def import_cycles(package: str = "statekit") -> list[list[str]]:
    """Every set of modules that import each other round a loop (Tarjan's strongly connected
    components of the import graph), as grimp builds it from the importable package."""
    import grimp

    graph = grimp.build_graph(package, exclude_type_checking_imports=True)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in edges[module]:
            if imported not in edges:
                continue
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(edges)))
    for module in sorted(edges):
        if module not in index:
            visit(module)
    return cycles


def check_cycles() -> int:
    cycles = import_cycles()
    for cycle in cycles:
        print(f"import cycle: {' <-> '.join(cycle)}")
    if not cycles:
        print("Import graph: no cycle")
    return 1 if cycles else 0


def main() -> int:
    root = link_tree()
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PYTHONPATH=str(root), MYPYPATH=str(root))
    failed = 0
    failed |= run([str(bin_dir / "lint-imports"), "--no-cache"], env, root) != 0
    failed |= run([sys.executable, __file__, "--cycles"], env, root) != 0
    failed |= run([sys.executable, "-m", "mypy", "-p", "statekit"], env, root) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(check_cycles() if sys.argv[1:] == ["--cycles"] else main())
