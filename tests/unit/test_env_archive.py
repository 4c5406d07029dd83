"""``statekit pack`` and ``--env-archive`` without a JVM: what goes into the archive (decided
from the running venv's real metadata), how it is written and published, what the option
stands for, and the one-line refusals. The archive working as ``spark.archives`` on a real
cluster is tests/spark/test_cluster.py's."""

from __future__ import annotations

import json
import os
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from statekit.jobs.env_archive import (
    ARCHIVE_ALIAS,
    PackPlan,
    env_archive_conf,
    plan_pack,
    runtime_closure,
    write_pack,
)
from statekit.support.errors import EXIT_BAD_INPUT, EXIT_UNSAFE, BadInput, UnsafeOperation
from tests.support.cli import run

pytestmark = pytest.mark.skipif(sys.prefix == sys.base_prefix,
                                reason="the tests run in make's .venv")


@pytest.fixture(scope="module")
def plan() -> PackPlan:
    return plan_pack()


def test_the_closure_is_statekits_runtime_needs_and_nothing_of_the_dev_tools():
    needed = runtime_closure()
    # direct requirements, a transitive one (pandas -> python-dateutil -> six) and the
    # installed extras (rocksdb: google-crc32c, cramjam; tws: protobuf)
    assert {"statekit", "pyspark", "py4j", "pandas", "numpy", "pyarrow", "lz4", "zstandard",
            "xxhash", "python-dateutil", "six", "google-crc32c", "cramjam",
            "protobuf"} <= needed
    assert not {"pytest", "ruff", "mypy", "moto", "hypothesis", "pip"} & needed


def test_the_plan_packs_the_closure_without_jars_dev_tools_or_the_editable_hook(plan):
    targets = [target.replace(os.sep, "/") for _, target in plan.files]
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    tops = {t[len(site) + 1:].split("/", 1)[0] for t in targets if t.startswith(site + "/")}
    assert {"pandas", "pyarrow", "numpy", "lz4", "zstandard", "pyspark", "py4j"} <= tops
    assert not {"pytest", "_pytest", "moto", "mypy", "ruff", "hypothesis"} & tops
    assert not any(t.startswith(f"{site}/pyspark/jars/") for t in targets)
    assert not any("__editable__" in target for target in targets)
    assert "bin/python" in targets and "pytest" not in {Path(t).name for t in targets}
    assert set(plan.packed) & set(plan.left_out) == set()
    assert plan.total_bytes == sum(os.path.getsize(s) for s, _ in plan.files
                                   if not os.path.islink(s))


def _small_plan(plan: PackPlan, names: tuple[str, ...] = ("six.py", "bin/python")) -> PackPlan:
    files = tuple(f for f in plan.files if f[1].endswith(names))
    return PackPlan(prefix=plan.prefix, files=files,
                    total_bytes=sum(os.path.getsize(s) for s, _ in files
                                    if not os.path.islink(s)),
                    packed=("six",), left_out=(), python_home=plan.python_home,
                    python_version=plan.python_version)


@pytest.mark.parametrize("name", ["env.tar.gz", "env.zip"])
def test_the_archive_is_published_complete_with_venv_packs_rewrites(plan, tmp_path, name):
    small = _small_plan(plan)
    seen: list[tuple[int, int]] = []
    result = write_pack(small, tmp_path / name, python_prefix="/usr",
                        on_progress=lambda done, total: seen.append((done, total)))
    assert result.archive == tmp_path / name and result.files == len(small.files)
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no staging file left
    assert seen[-1] == (small.total_bytes, small.total_bytes)
    if name.endswith(".zip"):
        names = zipfile.ZipFile(result.archive).namelist()
        assert "pyvenv.cfg" in names
    else:
        with tarfile.open(result.archive) as archive:
            names = archive.getnames()
            python = archive.getmember("bin/python3") if "bin/python3" in names else None
            config = archive.extractfile("pyvenv.cfg").read().decode()
        assert "home = /usr/bin" in config  # venv-pack's --python-prefix rewrite
        assert python is None or python.issym()
    assert {target for _, target in small.files} <= set(names)
    assert oct(result.archive.stat().st_mode & 0o777) != oct(0o600)
    archive_conf, python_conf = result.confs()
    assert archive_conf == f"spark.archives={result.archive}#{ARCHIVE_ALIAS}"
    assert python_conf == f"spark.pyspark.python=./{ARCHIVE_ALIAS}/bin/python"


def test_an_existing_archive_is_kept_unless_forced(plan, tmp_path):
    out = tmp_path / "env.tar.gz"
    out.write_bytes(b"someone's archive")
    with pytest.raises(UnsafeOperation):
        write_pack(_small_plan(plan), out)
    assert out.read_bytes() == b"someone's archive"
    write_pack(_small_plan(plan), out, force=True)
    assert tarfile.is_tarfile(out)


@pytest.mark.parametrize("name", ["env.tar.bz2", "env"])
def test_only_what_spark_unpacks_is_written(plan, tmp_path, name):
    with pytest.raises(BadInput, match=r"must end in \.tar\.gz, \.tgz or \.zip"):
        write_pack(_small_plan(plan), tmp_path / name)
    assert not list(tmp_path.iterdir())


def test_the_archive_is_never_written_into_the_venv_it_packs(plan):
    with pytest.raises(BadInput, match="inside the venv"):
        write_pack(_small_plan(plan), plan.prefix / "env.tar.gz")
    assert not (plan.prefix / "env.tar.gz").exists()


def test_env_archive_stands_for_the_two_settings_and_keeps_the_users_archives(tmp_path):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    conf = env_archive_conf(str(archive), "spark://h:7077",
                            {"spark.archives": "hdfs:///other.zip#other", "k": "v"})
    assert conf == {"spark.archives": f"hdfs:///other.zip#other,{archive}#{ARCHIVE_ALIAS}",
                    "spark.pyspark.python": f"./{ARCHIVE_ALIAS}/bin/python", "k": "v"}
    remote = env_archive_conf("hdfs:///envs/env.tar.gz", "yarn", {})
    assert remote["spark.archives"] == f"hdfs:///envs/env.tar.gz#{ARCHIVE_ALIAS}"
    # an explicit interpreter inside the archive wins
    own = env_archive_conf(str(archive), "yarn",
                           {"spark.pyspark.python": f"./{ARCHIVE_ALIAS}/bin/python3"})
    assert own["spark.pyspark.python"] == f"./{ARCHIVE_ALIAS}/bin/python3"


@pytest.mark.parametrize("master", [None, "local[*]", "local"])
def test_env_archive_is_refused_on_a_local_master(tmp_path, master):
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    with pytest.raises(BadInput, match="cluster master"):
        env_archive_conf(str(archive), master, {})


def test_cli_pack_refusals_are_one_line(tmp_path):
    out = tmp_path / "env.tar.gz"
    out.write_bytes(b"x")
    code, stdout, stderr = run(["pack", str(out)])
    assert code == EXIT_UNSAFE and stderr.count("\n") == 1 and str(out) in stderr
    assert out.read_bytes() == b"x" and not stdout
    code, _, stderr = run(["pack", str(tmp_path / "env.rar")])
    assert code == EXIT_BAD_INPUT and "env.rar" in stderr and stderr.count("\n") == 1


def test_cli_env_archive_refusals_come_before_spark(tmp_path):
    from tests.support.builders import hdfs_checkpoint

    checkpoint = hdfs_checkpoint(tmp_path)
    missing = tmp_path / "none.tar.gz"
    code, _, stderr = run(["growth", str(checkpoint), "--master", "spark://h:1",
                           "--env-archive", str(missing)])
    assert code == EXIT_BAD_INPUT and "no such archive" in stderr and str(missing) in stderr
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    code, stdout, stderr = run(["growth", str(checkpoint), "--deep", "--env-archive",
                                str(archive)])
    assert code == EXIT_BAD_INPUT and "cluster master" in stderr
    assert stderr.count("\n") == 1 and not stdout


def test_cli_pack_prints_the_settings_to_use(plan, tmp_path, monkeypatch):
    """The whole command on a plan cut to two files (the full venv is the cluster test's)."""
    import statekit.jobs.env_archive as env_archive

    monkeypatch.setattr(env_archive, "plan_pack", lambda everything=False: _small_plan(plan))
    out = tmp_path / "env.tgz"
    code, stdout, stderr = run(["pack", str(out), "--json"])
    assert code == 0, stderr
    data = json.loads(stdout)
    assert data["archive"] == str(out) and data["files"] == 2 and out.is_file()
    assert data["conf"] == [f"spark.archives={out}#{ARCHIVE_ALIAS}",
                            f"spark.pyspark.python=./{ARCHIVE_ALIAS}/bin/python"]
    code, stdout, _ = run(["pack", str(out), "--overwrite"])
    assert code == 0 and f"--env-archive {out}" in stdout
    assert f"--conf spark.archives={out}#{ARCHIVE_ALIAS}" in stdout
