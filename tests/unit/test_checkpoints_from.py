"""``--checkpoints-from FILE``: a note after a path is a comment, not part of the path.

People annotate a fleet file the way they annotate a shell script (``ck  # the big one``),
while an object key may itself hold ``#`` (``s3://bucket/ck#7``). So a ``#`` starts a
comment at the start of a line or after whitespace, and stays inside a word. Checked on the
parser and through ``statekit metrics`` (no JVM) on real checkpoints, one of them in a
folder whose name holds a ``#``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from statekit.cli.main import cli
from statekit.cli.runner import run_cli
from statekit.fleet.metrics import read_checkpoint_list

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "spark-4.1.4"


def test_inline_comments_go_and_a_hash_inside_a_url_stays():
    listing = ("# the fleet\n"
               "\n"
               "ck  # a note after two spaces\n"
               "other\t# a note after a tab\n"
               "   # an indented comment line\n"
               "s3://bucket/ck#7\n"
               "s3://bucket/ck#8 # its note\n"
               "gs://bucket/a#b#c\n")
    assert read_checkpoint_list(listing) == ["ck", "other", "s3://bucket/ck#7",
                                             "s3://bucket/ck#8", "gs://bucket/a#b#c"]


def test_metrics_reads_the_checkpoints_of_an_annotated_file(tmp_path, capsys):
    hashed, plain = tmp_path / "ck#7", tmp_path / "sessions"
    shutil.copytree(GOLDEN / "aggregation_hdfs" / "checkpoint", hashed)
    shutil.copytree(GOLDEN / "session_window_hdfs" / "checkpoint", plain)
    listing = tmp_path / "fleet.txt"
    listing.write_text(f"# payments\n{hashed}\n{plain}   # the sessions, annotated\n")
    code = run_cli(cli, "statekit", ["metrics", "--checkpoints-from", str(listing)])
    out = capsys.readouterr().out
    assert code == 0
    up = {s.labels["checkpoint"]: s.value for f in text_string_to_metric_families(out)
          if f.name == "statekit_checkpoint_up" for s in f.samples}
    assert up == {str(hashed): 1.0, str(plain): 1.0}
