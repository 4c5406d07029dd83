"""``--checkpoints-from``: comments where a person writes them, a line's own storage options,
and paths that hold spaces or ``#`` left whole."""

from __future__ import annotations

import io

from statekit.cli.options import fleet_options
from statekit.fleet.fleet_file import FleetEntry, parse_fleet_file
from statekit.fleet.metrics import read_checkpoint_list

FLEET = """\
# payments
s3://prod/ck/fraud   profile=prod  anon=false   # the big one
s3://lab/ck#7  endpoint_url=http://127.0.0.1:9000 key=lab secret=s3cr#t
/data/my checkpoint
   ck  # a note after the path

s3://prod/ck/fraud   profile=other
"""


def test_comments_options_and_whole_paths():
    assert parse_fleet_file(FLEET) == [
        FleetEntry("s3://prod/ck/fraud", {"profile": "prod", "anon": False}),
        FleetEntry("s3://lab/ck#7", {"endpoint_url": "http://127.0.0.1:9000", "key": "lab",
                                     "secret": "s3cr#t"}),
        FleetEntry("/data/my checkpoint"),
        FleetEntry("ck"),
    ]
    assert read_checkpoint_list(FLEET) == ["s3://prod/ck/fraud", "s3://lab/ck#7",
                                           "/data/my checkpoint", "ck"]


def test_a_lines_options_override_the_common_ones():
    per_url = fleet_options(("first",), io.StringIO(FLEET),
                            ("profile=default", "anon=true"))
    assert list(per_url)[:2] == ["first", "s3://prod/ck/fraud"]
    assert per_url["first"] == {"profile": "default", "anon": True}
    assert per_url["s3://prod/ck/fraud"] == {"profile": "prod", "anon": False}
    assert per_url["ck"] == {"profile": "default", "anon": True}
