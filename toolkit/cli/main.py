"""The ``statekit`` console script: one group, one sub-command per capability.

Commands stay thin: parse options, call one core (or jobs) function, render. They are loaded
lazily (:mod:`statekit.cli.lazy`) so ``statekit --help`` and the JVM-free commands start fast
and never import pyspark. The reference pipeline's commands are mounted as
``statekit pipeline …`` so users need one CLI only.
"""

from __future__ import annotations

import click

from statekit import __version__
from statekit.cli.lazy import LazyGroup
from statekit.cli.runner import exit_with

COMMANDS = {
    "report": ("statekit.cli.report_cmd:report_command",
               "Delta/snapshot/changelog/zip counts, sizes, snapshot lag, warnings."),
    "batches": ("statekit.cli.batches_cmd:batches_command",
                "One row per retained batch: committed, watermark, timing, offsets."),
    "schema": ("statekit.cli.files_cmd:schema_command",
               "Key and value schema of every operator/store."),
    "ls": ("statekit.cli.files_cmd:ls_command",
           "The files of one state store instance with versions, kinds and sizes."),
    "dump": ("statekit.cli.files_cmd:dump_command",
             "Decoded records of one delta/snapshot/changelog file."),
    "growth": ("statekit.cli.growth_cmd:growth_command",
               "Detect unbounded key growth: verdict, evidence, projection (no JVM)."),
    "recovery": ("statekit.cli.recovery_cmd:recovery_command",
                 "Estimate the restart's state-load time; what-if minDeltasForSnapshot; RTO."),
    "repartition": ("statekit.cli.repartition_cmd:repartition_command",
                    "Repartition state into a NEW checkpoint: plan, write, verify, publish."),
    "migrate": ("statekit.cli.repartition_cmd:migrate_command",
                "Move state to another provider (HDFS ↔ RocksDB) in a NEW checkpoint."),
    "rollback": ("statekit.cli.rollback_cmd:rollback_command",
                 "Roll back to an earlier committed batch in a NEW checkpoint (--list)."),
    "evict": ("statekit.cli.evict_cmd:evict_command",
              "Remove state rows (--where, --stale-after, --expired) in a NEW checkpoint."),
    "doctor": ("statekit.cli.doctor_cmd:doctor_command",
               "Will it restart? Spark's predicted error per problem and the fix command."),
    "metrics": ("statekit.cli.metrics_cmd:metrics_command",
                "Prometheus metrics of one or many checkpoints: printed, or --serve (no JVM)."),
    "pack": ("statekit.cli.pack_cmd:pack_command",
             "Pack this venv for a cluster's executors (spark.archives; --env-archive)."),
    "tui": ("statekit.cli.tui_cmd:tui_command",
            "Browse a checkpoint in the terminal (Textual): report, files, growth, recovery."),
    "state": ("statekit.cli.state_cmd:state_group",
              "State rows through Spark's state data source: show, export, changes, stats."),
    "pipeline": ("statekit.cli.pipeline_cmd:cli",
                 "The reference fraud/session pipeline: generate, run, labels."),
}


@click.group(cls=LazyGroup, lazy_commands=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="statekit")
def cli() -> None:
    """statekit: see inside Spark Structured Streaming checkpoints and state stores."""


def main() -> None:
    exit_with(cli, "statekit")


if __name__ == "__main__":
    main()
