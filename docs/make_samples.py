"""Generate the command output the docs show (``docs/samples/*.txt``).

Why generated: a pasted sample goes stale the day a command's output changes. Every sample
here is what the command prints, made by this one script, and
``tests/unit/test_doc_samples.py`` runs the same commands and fails when a stored sample no
longer matches.

Why from a frozen run: every ``make demo`` carries its own query id, batch timestamps and
snapshot files written when the maintenance task happened to run, so no two runs print the
same report. The samples come from one ``make demo`` run kept in ``tests/data/demo``
(the checkpoint and its progress log) and one run of the reference pipeline's
leaky variant (the growth guide's leak). ``--freeze`` replaces that data: run ``make demo``
first (it writes ``./demo``); the leaky run is made here.

The commands run in a folder where ``demo/`` is that data, so the samples show the paths a
reader who ran ``make demo`` types. A damaged copy, ``demo/broken-checkpoint`` (a state file
cut in half, as a full disk leaves it), is made fresh for the "will not restart" guide. The
output is what a pipe gets (160 columns), with the benchmark machine's cost constants
(``STATEKIT_MACHINE_SPEED=reference``) so the estimates do not move with the machine.

Run::

    .venv/bin/python docs/make_samples.py            # docs/samples from tests/data/demo
    .venv/bin/python docs/make_samples.py --freeze   # after make demo: new frozen data first
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
FROZEN = ROOT / "tests" / "data" / "demo"
SAMPLES = DOCS / "samples"
DAMAGED_FILE = "checkpoint/state/0/5/37.delta"
"""The file ``damage`` cuts in half: partition 5's newest delta (the version a restart
loads), relative to ``demo/``."""


@dataclass(frozen=True)
class Sample:
    name: str
    command: str
    """As the docs show it: ``statekit …`` with paths relative to the folder holding demo/."""
    jvm: bool = False
    """The command starts Spark (its test runs in the Spark tier)."""


SAMPLE_LIST = (
    Sample("report", "statekit report demo/checkpoint"),
    Sample("schema", "statekit schema demo/checkpoint"),
    Sample("ls", "statekit ls demo/checkpoint --operator 0 --partition 3"),
    Sample("doctor", "statekit doctor demo/checkpoint --progress-log demo/progress.jsonl"),
    Sample("doctor-broken", "statekit doctor demo/broken-checkpoint"),
    Sample("rollback-list", "statekit rollback demo/broken-checkpoint --list"),
    Sample("rollback-dry-run",
           "statekit rollback demo/broken-checkpoint --to-batch 35 --out demo/fixed --dry-run"),
    Sample("growth", "statekit growth demo/checkpoint --progress-log demo/progress.jsonl"),
    Sample("growth-leaky",
           "statekit growth demo/leaky-checkpoint --progress-log demo/leaky-progress.jsonl "
           "--executor-memory 2g"),
    Sample("recovery",
           "statekit recovery demo/checkpoint --progress-log demo/progress.jsonl --rto 30s"),
    Sample("repartition-dry-run",
           "statekit repartition demo/checkpoint --partitions 4 --out demo/four --dry-run",
           jvm=True),
    Sample("migrate-dry-run",
           "statekit migrate demo/checkpoint --to rocksdb --out demo/rocksdb --dry-run",
           jvm=True),
    Sample("metrics", "statekit metrics demo/checkpoint"),
)


def damage(demo: Path) -> None:
    """``demo/broken-checkpoint``: a copy of the checkpoint with one state file cut in half."""
    broken = demo / "broken-checkpoint"
    shutil.copytree(demo / "checkpoint", broken)
    cut = broken / Path(DAMAGED_FILE).relative_to("checkpoint")
    data = cut.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    (cut.parent / f".{cut.name}.crc").unlink(missing_ok=True)


def workspace(into: Path) -> Path:
    """A folder whose ``demo/`` holds the frozen run (copied: commands may not write into the
    repository) and the damaged copy; returns the folder to run the commands in."""
    demo = into / "demo"
    shutil.copytree(FROZEN, demo)
    damage(demo)
    return into


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STATEKIT_")}
    env.update(STATEKIT_MACHINE_SPEED="reference", NO_COLOR="1",
               TERM="dumb", PYTHONWARNINGS="ignore")
    return env


def run(sample: Sample, cwd: Path) -> str:
    """The sample's text: the command line, what it printed (stdout, then stderr), and its
    exit code when not 0."""
    argv = sample.command.split()
    done = subprocess.run([sys.executable, "-m", "statekit", *argv[1:]], cwd=cwd,
                          env=environment(), capture_output=True, text=True, timeout=300,
                          check=False)
    text = f"$ {sample.command}\n{done.stdout}{done.stderr}"
    if done.returncode:
        text += f"(exit code {done.returncode})\n"
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def freeze() -> None:
    """Replace ``tests/data/demo`` with ``./demo`` (make demo's run) and a fresh leaky run."""
    demo = ROOT / "demo"
    if not (demo / "checkpoint").is_dir():
        sys.exit("run `make demo` first: ./demo/checkpoint is missing")
    statekit = [sys.executable, "-m", "statekit"]
    with tempfile.TemporaryDirectory() as tmp:
        leaky = Path(tmp)
        subprocess.run([*statekit, "pipeline", "generate", "--landing", str(leaky / "landing"),
                        "--batches", "24", "--seed", "7"], check=True)
        subprocess.run([*statekit, "pipeline", "run", "--landing", str(leaky / "landing"),
                        "--checkpoint", str(leaky / "checkpoint"), "--output",
                        str(leaky / "output"), "--leaky", "--partitions", "4",
                        "--progress-log", str(leaky / "progress.jsonl")], check=True)
        shutil.rmtree(FROZEN, ignore_errors=True)
        FROZEN.mkdir(parents=True)
        shutil.copytree(demo / "checkpoint", FROZEN / "checkpoint")
        shutil.copy(demo / "progress.jsonl", FROZEN / "progress.jsonl")
        shutil.copytree(leaky / "checkpoint", FROZEN / "leaky-checkpoint")
        shutil.copy(leaky / "progress.jsonl", FROZEN / "leaky-progress.jsonl")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--freeze", action="store_true",
                        help="first replace tests/data/demo with ./demo and a new leaky run")
    args = parser.parse_args()
    if args.freeze:
        freeze()
    SAMPLES.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        cwd = workspace(Path(tmp))
        for sample in SAMPLE_LIST:
            (SAMPLES / f"{sample.name}.txt").write_text(run(sample, cwd))
            print(f"docs/samples/{sample.name}.txt", flush=True)


if __name__ == "__main__":
    main()
