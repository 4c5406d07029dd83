"""The ``statekit`` console script: one group, one sub-command per capability.

Commands stay thin: parse options, call one core (or jobs) function, render. The reference
pipeline's commands are mounted as ``statekit pipeline …`` so users need one CLI only.
"""

from __future__ import annotations

import click

from reference_pipeline.cli import cli as pipeline_cli
from toolkit import __version__
from toolkit.cli.runner import exit_with


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="statekit")
def cli() -> None:
    """statekit: see inside Spark Structured Streaming checkpoints and state stores."""


cli.add_command(pipeline_cli, name="pipeline")


def main() -> None:
    exit_with(cli, "statekit")


if __name__ == "__main__":
    main()
