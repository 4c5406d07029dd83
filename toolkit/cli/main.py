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
    "report": ("statekit.cli.commands.report:report_command",
               "State files, snapshot lag, findings; will it restart? (no JVM)"),
    "batches": ("statekit.cli.commands.batches:batches_command",
                "One row per retained batch: committed, watermark, offsets."),
    "schema": ("statekit.cli.commands.files:schema_command",
               "Key and value schema of every operator/store."),
    "ls": ("statekit.cli.commands.files:ls_command",
           "The files of one state store instance and their roles."),
    "dump": ("statekit.cli.commands.files:dump_command",
             "Decoded records of one state file."),
    "growth": ("statekit.cli.commands.growth:growth_command",
               "Is the state growing without bound? Verdict, evidence (no JVM)."),
    "recovery": ("statekit.cli.commands.recovery:recovery_command",
                 "How long a restart takes; what-if minDeltasForSnapshot; RTO."),
    "repartition": ("statekit.cli.commands.repartition:repartition_command",
                    "Another partition count, in a NEW checkpoint (JVM)."),
    "migrate": ("statekit.cli.commands.repartition:migrate_command",
                "Another state store provider (HDFS ↔ RocksDB), NEW checkpoint."),
    "rollback": ("statekit.cli.commands.rollback:rollback_command",
                 "Back to an earlier committed batch, in a NEW checkpoint."),
    "evict": ("statekit.cli.commands.evict:evict_command",
              "Remove selected state rows, in a NEW checkpoint (JVM)."),
    "doctor": ("statekit.cli.commands.doctor:doctor_command",
               "Will it restart? Spark's error per problem, and the fix."),
    "metrics": ("statekit.cli.commands.metrics:metrics_command",
                "Prometheus metrics of one or many checkpoints (no JVM)."),
    "pack": ("statekit.cli.commands.pack:pack_command",
             "Pack this venv for a cluster's executors (--env-archive)."),
    "tui": ("statekit.cli.commands.tui:tui_command",
            "Browse checkpoints in the terminal or a browser."),
    "state": ("statekit.cli.commands.state:state_group",
              "State rows through Spark's state data source (JVM)."),
    "pipeline": ("statekit.cli.commands.pipeline:cli",
                 "The reference fraud/session pipeline: generate, run, labels."),
}


@click.group(cls=LazyGroup, lazy_commands=COMMANDS,
             context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="statekit")
def cli() -> None:
    """See inside Spark Structured Streaming checkpoints and state stores.

    CKPT is a checkpoint folder: a local path or an fsspec URL (s3://, gs://, abfs://,
    webhdfs://HOST:9870/…, file://, memory://…). hdfs:// goes through pyarrow's libhdfs,
    which needs Hadoop and loads a JVM: prefer webhdfs://. Credentials and endpoints of object
    stores: --storage-option KEY=VALUE, or a JSON object in $STATEKIT_STORAGE_OPTIONS.

    The commands that read start no JVM unless an option or the help says so. The commands
    that write (repartition, migrate, rollback, evict) never modify CKPT: they build a new
    checkpoint DST in a staging folder beside it (.DST.statekit-staging), verify it through
    Spark and publish it with one rename, so a crash leaves no DST.

    Every error is one line on stderr, "statekit: error: …", with an exit code:

    \b
    - 0 success; 1 internal error (a bug: STATEKIT_DEBUG=1 shows the traceback)
    - 2 usage error, before any work: unknown option, bad value
    - 3 bad input: no such path, not a checkpoint, no such operator or batch,
      missing or refused credentials, a port invalid or in use
    - 4 corrupt input: truncated or damaged file, checksum mismatch, bad JSON
    - 5 unsupported format, codec, operator or provider
    - 6 refused as unsafe: DST not empty, query looks live, uncommitted batch
    - 7 environment: Java 17+ missing, an fsspec package (e.g. gcsfs) missing
    - 8 a Spark job or query failed, or a write's verification failed
    - 9, 11, 12, 14 the doctor's verdict (see statekit doctor); 10 growth
      --fail-on
    - 13 storage unreachable: endpoint down or silent, no network, --timeout
    - 130 interrupted

    Environment:

    \b
    - STATEKIT_STORAGE_OPTIONS: fsspec options as a JSON object
    - STATEKIT_CONCURRENCY: requests in flight on object stores (1-4096,
      default 256; lower it for a shared bucket or a connection-capped proxy)
    - STATEKIT_MACHINE_SPEED: recovery's --machine-speed default
    - STATEKIT_CACHE_DIR: the cache folder (default ~/.cache/statekit)
    - STATEKIT_SHIP=0: do not ship statekit to a cluster's executors
    - STATEKIT_DEBUG=1: tracebacks of internal errors
    """


def main() -> None:
    exit_with(cli, "statekit")


if __name__ == "__main__":
    main()
