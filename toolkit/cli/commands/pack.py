"""``statekit pack``: the running environment as an archive for a cluster's executors.

Where executors have a Python but not statekit's dependencies, Spark's own remedy is a packed
venv in ``spark.archives``; this command builds it from the venv statekit runs in (what
statekit's tasks need, see :mod:`statekit.jobs.env_archive`) and prints how to use it:
``--env-archive FILE`` on any ``--master`` command, or the two ``--conf`` lines.
"""

from __future__ import annotations

from pathlib import Path

import click

from statekit.cli.options import json_option, print_json
from statekit.cli.render import console
from statekit.support.presentation import human_bytes


@click.command("pack")
@click.argument("archive", default="statekit-env.tar.gz", metavar="[ARCHIVE]")
@click.option("--all", "everything", is_flag=True,
              help="Pack every distribution of the venv, not only what statekit's tasks need "
                   "(for your own code in the same session).")
@click.option("--python-prefix", metavar="PATH", default=None,
              help="Where the executors' base Python lives (its prefix, e.g. /usr), when not "
                   "at this venv's base path.")
@click.option("--overwrite", is_flag=True, help="Replace ARCHIVE if it exists.")
@json_option
def pack_command(archive: str, everything: bool, python_prefix: str | None, overwrite: bool,
                 as_json: bool) -> None:
    """Pack this venv into ARCHIVE for the executors of a cluster (spark.archives).

    ARCHIVE: .tar.gz, .tgz or .zip (default statekit-env.tar.gz); it must not exist unless
    --overwrite. It holds statekit's runtime dependencies as installed here (the whole venv
    with --all); pyspark's jars and development tools stay out. Executors need a CPython of
    the driver's major.minor version at the venv's base path (or --python-prefix). Prints how
    to use it: --env-archive ARCHIVE on any command that takes --master, or the two --conf
    settings it stands for. --json: the archive, its size, the distributions packed and left
    out, and the confs.

    Examples:

    \b
        statekit pack /shared/statekit-env.tar.gz
        statekit growth hdfs:///ckpt --master yarn \\
            --env-archive /shared/statekit-env.tar.gz
    """
    import sys

    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn

    from statekit.jobs.env_archive import check_output, plan_pack, write_pack

    check_output(Path(archive), Path(sys.prefix), overwrite)  # before the venv is read
    plan = plan_pack(everything=everything)
    with Progress(TextColumn("packing"), BarColumn(), DownloadColumn(), TimeElapsedColumn(),
                  console=console(), transient=True, disable=as_json) as progress:
        task = progress.add_task("pack", total=plan.total_bytes)
        result = write_pack(plan, Path(archive), python_prefix=python_prefix, force=overwrite,
                            on_progress=lambda done, total: progress.update(
                                task, completed=done, total=total))
    archive_conf, python_conf = result.confs()
    if as_json:
        print_json({"archive": str(result.archive), "files": result.files,
                    "bytes_packed": result.bytes_in, "bytes": result.bytes_out,
                    "seconds": round(result.seconds, 2), "distributions": list(plan.packed),
                    "left_out": list(plan.left_out), "python_prefix": result.python_prefix,
                    "python_version": plan.python_version, "notes": list(plan.notes),
                    "conf": [archive_conf, python_conf]})
        return
    out_console = console()
    out_console.print(
        f"packed {len(plan.packed)} distributions ({result.files} files, "
        f"{human_bytes(result.bytes_in)}) into {result.archive} "
        f"({human_bytes(result.bytes_out)}) in {result.seconds:.1f} s")
    if plan.left_out:
        out_console.print(f"left out {len(plan.left_out)} distributions statekit's tasks do "
                          "not need (--all packs them)")
    for note in plan.notes:
        out_console.print(f"note: {note}")
    minor = ".".join(plan.python_version.split(".")[:2])
    out_console.print(f"executors need Python {minor} under {result.python_prefix}")
    out_console.print("use it on a --master command with:")
    out_console.print(f"  --env-archive {result.archive}", markup=False)
    out_console.print("or as Spark settings:")
    out_console.print(f"  --conf {archive_conf}", markup=False)
    out_console.print(f"  --conf {python_conf}", markup=False)
