"""The command output the docs show is what the commands print.

``docs/make_samples.py`` generates every sample from one ``make demo`` run frozen in
``tests/data/demo``; this test runs the same commands on the same data and compares. What a
command prints about *when* it runs — the age of the last batch, the time a read took — moves
with the clock, so both sides are compared with those few fields masked (``normalised``); every
other character must match. A sample that fails here is regenerated with
``.venv/bin/python docs/make_samples.py`` after checking the new output is right.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
make_samples = load_script("docs/make_samples.py")

VOLATILE = [
    # how long ago something happened, as the commands word it
    (re.compile(r"\b\d+(\.\d+)?\s?(ms|s|sec|seconds?|min|minutes?|h|hours?|d|days?)"
                r"( \d+(\.\d+)?\s?(ms|s|min|h|d))? ago\b"), "<age> ago"),
    (re.compile(r"(statekit_last_batch_age_seconds\{[^}]*\}) \S+"), r"\1 <age>"),
    (re.compile(r"(statekit_scrape_duration_seconds\{[^}]*\}) \S+"), r"\1 <duration>"),
    (re.compile(r"(statekit_checkpoint_read_timestamp_seconds\{[^}]*\}) \S+"), r"\1 <when>"),
    # how long a read took
    (re.compile(r"\bin \d+(\.\d+)? ?(ms|s)\b"), "in <duration>"),
]


def normalised(text: str) -> str:
    """The text with the clock's fields masked and every run of white space one space (a
    masked number of another width may wrap a line elsewhere)."""
    text = " ".join(text.split())
    for pattern, replacement in VOLATILE:
        text = pattern.sub(replacement, text)
    return text


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return make_samples.workspace(tmp_path_factory.mktemp("samples"))


@pytest.mark.parametrize("sample", [
    pytest.param(s, id=s.name, marks=[pytest.mark.spark] if s.jvm else [])
    for s in make_samples.SAMPLE_LIST])
def test_sample_matches_what_the_command_prints(sample, workspace):
    stored = (make_samples.SAMPLES / f"{sample.name}.txt").read_text()
    printed = make_samples.run(sample, workspace)
    assert stored.splitlines()[0] == f"$ {sample.command}"
    assert normalised(printed) == normalised(stored), (
        f"docs/samples/{sample.name}.txt is not what `{sample.command}` prints: regenerate it "
        "with .venv/bin/python docs/make_samples.py")


def test_every_sample_file_is_generated():
    stored = {p.stem for p in make_samples.SAMPLES.glob("*.txt")}
    assert stored == {s.name for s in make_samples.SAMPLE_LIST}


def test_the_comparison_would_see_a_changed_number():
    stored = (make_samples.SAMPLES / "report.txt").read_text()
    changed = re.sub(r"\d", lambda m: str((int(m.group(0)) + 1) % 10), stored, count=3)
    assert normalised(changed) != normalised(stored)
