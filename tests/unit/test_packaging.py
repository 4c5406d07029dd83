"""The built wheel, installed into a fresh virtual environment, beside a user's project.

Spark projects very often have their own ``jobs`` (and sometimes ``tui``) package. statekit
installs exactly one top-level import name, ``statekit``, so neither can shadow the other.
This test builds the wheel from the sources, installs it (without dependencies) into a new
venv, and runs statekit from inside a dummy project whose ``jobs`` and ``tui`` packages are
on the path first. The runtime dependencies (pyspark, pyarrow, …) are not installed again:
the new venv sees the test environment's site-packages *after* its own, so statekit itself
can only come from the wheel (the test checks that).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "toolkit", "jobs", "tui", "reference_pipeline")



@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the sources (the work tree stays untouched)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        path = REPO / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet",
                    "--wheel-dir", str(root / "dist"), str(src)], check=True)
    (built,) = (root / "dist").glob("statekit-*.whl")
    return built


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory, wheel) -> Path:
    """A new venv with the wheel installed; the test environment's packages visible last."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True).stdout.strip())
    ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
    ours.append(sysconfig.get_paths()["purelib"])
    (purelib / "zz_test_environment.pth").write_text("\n".join(dict.fromkeys(ours)) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                    "--no-deps", "--quiet", str(wheel)], check=True)
    return venv


def test_the_wheel_installs_one_top_level_package(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    tops = {n.split("/", 1)[0] for n in names}
    dist_info = {t for t in tops if t.endswith(".dist-info")}
    assert tops - dist_info == {"statekit"}
    for expected in ("statekit/__init__.py", "statekit/checkpoint/checkpoint.py",
                     "statekit/cli/main.py", "statekit/jobs/session.py",
                     "statekit/jobs/log4j2.properties", "statekit/tui/app.py",
                     "statekit/tui/statekit.tcss", "statekit/reference_pipeline/pipeline.py"):
        assert expected in names
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read(metadata).decode()
    requires = [line for line in text.splitlines() if line.startswith("Requires-Dist:")]
    runtime = [r for r in requires if "extra ==" not in r]
    assert not any("protobuf" in r for r in runtime)  # only transformWithState queries
    assert not any("==" in r.split(";")[0] for r in runtime)  # ranges, never exact pins
    assert any("protobuf" in r and "extra == \"tws\"" in r for r in requires)


def test_statekit_works_beside_a_project_with_its_own_jobs_and_tui(fresh_venv, tmp_path):
    project = tmp_path / "etl_project"
    for package in ("jobs", "tui"):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text(f"OWNER = 'the user: {package}'\n")
    (project / "jobs" / "daily.py").write_text("def run():\n    return 'daily job'\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env["PYTHONPATH"] = str(project)  # the user's project comes first on the path
    python = fresh_venv / "bin" / "python"

    code = """
import json, statekit, jobs, tui
from jobs.daily import run
import statekit.jobs.session, statekit.tui.app, statekit.reference_pipeline.generator
from statekit.cli.main import cli
print(json.dumps({"statekit": statekit.__file__, "jobs": jobs.OWNER, "tui": tui.OWNER,
                  "daily": run(), "session": statekit.jobs.session.__file__,
                  "app": statekit.tui.app.__file__}))
"""
    done = subprocess.run([str(python), "-c", code], cwd=project, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["jobs"] == "the user: jobs" and seen["tui"] == "the user: tui"
    assert seen["daily"] == "daily job"
    for module in ("statekit", "session", "app"):  # ours, from the wheel in the new venv
        assert Path(seen[module]).is_relative_to(fresh_venv), seen[module]

    ckpt = tmp_path / "ck"  # a real checkpoint: report decodes what a restart loads
    shutil.copytree(Path(__file__).resolve().parents[1] / "data" / "fault_corpus" / "hdfs",
                    ckpt)
    script = fresh_venv / "bin" / "statekit"
    for args in (["--help"], ["report", str(ckpt), "--json"],
                 ["pipeline", "generate", "--landing", str(tmp_path / "landing"),
                  "--batches", "1", "--users", "20", "--events-per-batch", "10"]):
        done = subprocess.run([str(script), *args], cwd=project, env=env, capture_output=True,
                              text=True)
        assert done.returncode == 0, (args, done.stderr)
    assert json.loads(subprocess.run([str(script), "report", str(ckpt), "--json"], cwd=project,
                                     env=env, capture_output=True, text=True,
                                     check=True).stdout)["last_committed_batch"] == 14
    assert any((tmp_path / "landing").iterdir())
