"""``--remote`` / ``$SPARK_REMOTE`` without a server: the URL's checks, the one way to reach
Spark, what a Connect session is sent, and the one-line failures before any work."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from statekit.cli.options import refuse_remote, remote_given, spark_options
from statekit.jobs import connect
from statekit.support.errors import BadInput, EnvironmentProblem
from tests.support.cli import run
from tests.support.ports import free_port

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo" / "checkpoint"


@click.command()
@spark_options
def reach(master, confs):
    """What a Spark-side command would reach: a Connect URL, else its master."""
    click.echo(f"remote={remote_given()} master={master}")


def invoke(args, env=None):
    return CliRunner().invoke(reach, args, env=env or {}, catch_exceptions=False)


def test_a_connect_url_is_checked_and_its_server_address_read():
    assert connect.remote_url(" sc://127.0.0.1:15002 ") == "sc://127.0.0.1:15002"
    for bad in ("http://127.0.0.1:15002", "sc://", "127.0.0.1:15002"):
        with pytest.raises(BadInput, match="not a Spark Connect URL"):
            connect.remote_url(bad)
    assert connect.server_address("sc://h") == ("h", connect.DEFAULT_PORT)
    assert connect.server_address("sc://h:443/;token=abc;use_ssl=true") == ("h", 443)
    assert connect.server_address("sc://[::1]:9") == ("::1", 9)
    with pytest.raises(BadInput, match="no valid port"):
        connect.server_address("sc://h:port")


def test_one_way_to_spark(monkeypatch):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    assert invoke(["--remote", "sc://h:1"]).output.strip() == "remote=sc://h:1 master=None"
    # the standard variable stands for --remote …
    assert invoke([], {"SPARK_REMOTE": "sc://h:2"}).output.strip() == \
        "remote=sc://h:2 master=None"
    # … but an explicit --master wins over it, in either order of evaluation
    assert invoke(["--master", "local[1]"], {"SPARK_REMOTE": "sc://h:2"}).output.strip() == \
        "remote=None master=local[1]"
    # both on the command line: a usage error, whichever comes first
    for args in (["--master", "local[1]", "--remote", "sc://h:1"],
                 ["--remote", "sc://h:1", "--master", "local[1]"]):
        result = CliRunner().invoke(reach, args)
        assert result.exit_code == 2 and "two ways to reach Spark" in result.output


def test_a_connect_session_is_sent_only_what_a_running_server_accepts():
    from statekit.jobs.session import session_conf

    sent = connect.runtime_settings(session_conf("statekit-x", None, {
        "spark.master": "local[4]", "spark.ui.enabled": "true", "spark.executor.memory": "4g",
        "spark.sql.shuffle.partitions": "7", "spark.sql.session.timeZone": "Europe/Paris"}))
    assert sent["spark.sql.session.timeZone"] == "Europe/Paris"  # --conf wins
    assert sent["spark.sql.shuffle.partitions"] == "7"
    assert sent["spark.sql.execution.arrow.pyspark.enabled"] == "true"  # statekit's default
    assert not [k for k in sent if k.startswith(("spark.master", "spark.ui.", "spark.app.",
                                                 "spark.executor", "spark.driver.",
                                                 "spark.pyspark."))]
    assert all(k.startswith("spark.sql.") for k in sent), sent


def test_a_missing_client_library_is_named_with_the_fix(monkeypatch):
    assert connect.connect_problem() is None  # the dev install has the Connect client
    monkeypatch.setattr(connect, "CONNECT_MODULES",
                        (*connect.CONNECT_MODULES, "statekit_no_such_module"))
    problem = connect.connect_problem()
    assert "statekit_no_such_module" in problem and "statekit[connect]" in problem
    with pytest.raises(EnvironmentProblem, match="statekit_no_such_module"):
        connect.build_connect_session("sc://127.0.0.1:1")


def test_a_refusal_is_one_line_exit_7_only_over_connect():
    @click.command()
    @spark_options
    def measure(master, confs):
        refuse_remote("recovery --measure", "use --master")
        click.echo("measured")

    assert CliRunner().invoke(measure, [], env={"SPARK_REMOTE": ""}).output == "measured\n"
    result = CliRunner().invoke(measure, ["--remote", "sc://h:1"])
    assert isinstance(result.exception, connect.NotOverConnect)
    assert result.exception.exit_code == 7
    assert str(result.exception) == \
        "recovery --measure cannot run over Spark Connect: use --master"


def test_the_cli_fails_in_one_line_on_a_bad_url_or_a_server_that_is_not_there(monkeypatch):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    code, out, err = run(["state", "show", str(DEMO), "--remote", "http://127.0.0.1:1"])
    assert code == 3 and out == ""
    assert err.strip() == "statekit: error: --remote: 'http://127.0.0.1:1' is not a Spark " \
                          "Connect URL (sc://host:port)"
    monkeypatch.setenv("SPARK_REMOTE", "localhost:15002")
    code, _, err = run(["state", "show", str(DEMO)])
    assert code == 3 and "$SPARK_REMOTE: 'localhost:15002'" in err
    monkeypatch.delenv("SPARK_REMOTE")
    url = f"sc://127.0.0.1:{free_port()}"  # nothing listens there
    code, out, err = run(["state", "show", str(DEMO), "--remote", url])
    assert code == 7 and out == ""
    assert err.startswith(f"statekit: error: could not reach Spark Connect at {url}: ")
    assert len(err.strip().splitlines()) == 1


def test_what_has_no_connect_path_is_refused_before_reaching_the_server(monkeypatch):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    url = f"sc://127.0.0.1:{free_port()}"  # nothing listens: a refusal must come first
    code, out, err = run(["recovery", str(DEMO), "--measure", "--remote", url])
    assert code == 7 and out == ""
    assert err.startswith("statekit: error: recovery --measure cannot run over Spark "
                          "Connect: ") and "--master" in err
    assert len(err.strip().splitlines()) == 1


ROCKS = (Path(__file__).resolve().parents[1] / "data" / "golden" / "spark-4.0.5"
         / "dedup_rocksdb_changelog" / "checkpoint")


@pytest.mark.parametrize("args, what", [
    (["repartition", str(ROCKS), "-n", "4", "--out", "{out}"], "repartition"),
    (["migrate", str(DEMO), "--to", "rocksdb", "--out", "{out}"], "migrate"),
    (["evict", str(ROCKS), "--where", "true", "--out", "{out}"], "evict"),
    (["growth", str(DEMO), "--deep"], "growth --deep"),
])
def test_commands_without_a_connect_path_refuse_it_before_any_work(monkeypatch, tmp_path, args,
                                                                   what):
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    out = tmp_path / "out"
    url = f"sc://127.0.0.1:{free_port()}"
    code, stdout, err = run([a.format(out=out) for a in args] + ["--remote", url])
    assert code == 7 and stdout == "", err
    assert err.startswith(f"statekit: error: {what} cannot run over Spark Connect: "), err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists() and not any(tmp_path.iterdir())  # nothing written


@pytest.mark.parametrize("args", [
    ["repartition", str(DEMO), "-n", "4", "--out", "{out}"],
    ["migrate", str(ROCKS), "--to", "hdfs", "--out", "{out}"],
    ["repartition", str(ROCKS), "-n", "4", "--out", "{out}", "--dry-run"],
    ["evict", str(DEMO), "--where", "key.user_id = 'x'", "--out", "{out}"],
    ["rollback", str(DEMO), "--to-batch", "30", "--out", "{out}"],
])
def test_writes_with_a_connect_path_go_to_the_server(monkeypatch, tmp_path, args):
    """HDFS targets, dry runs and rollbacks are not refused: they reach for the server
    (nothing listens here) before writing anything."""
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    out = tmp_path / "out"
    url = f"sc://127.0.0.1:{free_port()}"
    code, _out, err = run([a.format(out=out) for a in args] + ["--remote", url])
    assert code == 7, err
    assert f"could not reach Spark Connect at {url}" in err, err
    assert not out.exists()


def test_statekit_help_runs_where_java_is_absent():
    import os
    import shutil
    import subprocess
    import sys

    folders = [f for f in os.environ.get("PATH", "").split(os.pathsep)
               if f and not (Path(f) / "java").exists()]
    env = {**os.environ, "PATH": os.pathsep.join(folders), "JAVA_HOME": ""}
    env.pop("SPARK_REMOTE", None)
    assert shutil.which("java", path=env["PATH"]) is None
    done = subprocess.run([sys.executable, "-m", "statekit", "--help"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Usage: statekit" in done.stdout and "--help" in done.stdout


def test_progress_over_connect_gets_the_row_totals_the_jvm_json_has():
    from statekit.reference_pipeline.pipeline import with_totals

    connect = {"batchId": 3, "durationMs": {"addBatch": 5},
               "sources": [{"numInputRows": 379, "inputRowsPerSecond": 270.5,
                            "processedRowsPerSecond": 308.0},
                           {"numInputRows": 21, "inputRowsPerSecond": 1.5,
                            "processedRowsPerSecond": 2.0}]}
    done = with_totals(dict(connect))
    assert done["numInputRows"] == 400
    assert done["inputRowsPerSecond"] == 272.0 and done["processedRowsPerSecond"] == 310.0
    jvm = {**connect, "numInputRows": 7}  # the JVM's own totals are kept
    assert with_totals(dict(jvm))["numInputRows"] == 7
    assert "numInputRows" not in with_totals({"batchId": 0, "sources": []})
