"""The session builder's settings, checked without starting a JVM."""

from __future__ import annotations

import sys

import pytest

from statekit.jobs.java_check import java_major
from statekit.jobs.session import parse_conf_pairs, session_conf
from statekit.support.errors import BadInput


def test_defaults_pin_the_interpreter_and_quiet_the_ui():
    conf = session_conf()
    assert conf["spark.master"] == "local[*]"
    assert conf["spark.pyspark.python"] == sys.executable
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert "log4j2.properties" in conf["spark.driver.extraJavaOptions"]


def test_master_and_extra_conf_win():
    conf = session_conf(master="spark://host:7077", conf={"spark.ui.enabled": "true"})
    assert conf["spark.master"] == "spark://host:7077"
    assert conf["spark.ui.enabled"] == "true"
    assert "spark.pyspark.python" not in conf  # a cluster's executors have their own Python


def test_spark_submit_keeps_its_own_master(monkeypatch):
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "12345")
    assert "spark.master" not in session_conf()
    assert session_conf(master="local[2]")["spark.master"] == "local[2]"


def test_conf_pairs():
    assert parse_conf_pairs(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    with pytest.raises(BadInput, match="KEY=VALUE"):
        parse_conf_pairs(["=1"])


@pytest.mark.parametrize(("text", "major"), [('openjdk version "17.0.15" 2025', 17),
                                             ('java version "1.8.0_292"', 8),
                                             ('openjdk version "21" 2023-09-19', 21),
                                             ("garbage", None)])
def test_java_version_parsing(text, major):
    assert java_major(text) == major
