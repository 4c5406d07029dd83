"""Run the static checks (import-linter contracts, mypy) on statekit as it is installed.

The repository keeps its product folders (``toolkit/``, ``jobs/``, ``tui/``,
``reference_pipeline/``) while everything is imported as ``statekit.…``: pyproject's
``package-dir`` maps the one onto the other. Python follows that mapping through setuptools'
editable-install hook, but static tools do not: grimp (import-linter) walks the folder of
``statekit`` only and would never see ``statekit.jobs``; mypy cannot find ``statekit`` at all.
So this script builds the installed layout as a tree of symbolic links (real folders, one link
per source file) under ``build/static/``, points both tools at it, and prints their findings
with the repository's own paths.

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


def main() -> int:
    root = link_tree()
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PYTHONPATH=str(root), MYPYPATH=str(root))
    failed = 0
    failed |= run([str(bin_dir / "lint-imports"), "--no-cache"], env, root) != 0
    failed |= run([sys.executable, "-m", "mypy", "-p", "statekit"], env, root) != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
