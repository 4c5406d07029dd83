"""``statekit metrics``: statekit's numbers for Prometheus, printed once or served.

Printed once, the exposition suits node_exporter's textfile collector (a cron job writes
``*.prom``); served (``--serve HOST:PORT``), Prometheus scrapes it directly and a cache
keeps scrapes cheap: the checkpoints are read again only when the last reading is older
than ``--cache-seconds``. No JVM either way.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import click

from statekit.cli.options import (
    checkpoint_urls,
    checkpoints_from_option,
    cores_option,
    decode_option,
    parse_storage_options,
    rto_option,
    storage_option,
)
from statekit.support.errors import BadInput


class _Collector:
    """A prometheus_client collector over :func:`statekit.fleet.metrics.checkpoint_metrics`,
    re-reading at most every ``cache_seconds``."""

    def __init__(self, read: Callable[[], list[Any]], cache_seconds: float) -> None:
        self._read = read
        self._cache_seconds = cache_seconds
        self._lock = threading.Lock()
        self._families: list[Any] | None = None
        self._at = 0.0

    def families(self) -> list[Any]:
        with self._lock:  # one reading at a time, however many scrapes arrive
            if self._families is None or time.monotonic() - self._at >= self._cache_seconds:
                self._families = self._read()
                self._at = time.monotonic()
            return self._families

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import Metric

        for family in self.families():
            metric = Metric(family.name, family.help, family.kind)
            sample_name = family.name + ("_total" if family.kind == "counter" else "")
            for labels, value in family.samples:
                metric.add_sample(sample_name, dict(labels), value)
            yield metric


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not port.isdigit():
        raise BadInput(f"--serve {text!r}: expected [HOST]:PORT, e.g. :9108 or "
                       "127.0.0.1:9108")
    return host or "0.0.0.0", int(port)


@click.command("metrics")
@click.argument("checkpoints", nargs=-1, metavar="[CKPT]...")
@checkpoints_from_option
@storage_option
@click.option("--per-partition", is_flag=True,
              help="Also the `statekit_partition_*` families: keys, bytes and snapshot lag, "
                   "one series per partition.")
@decode_option
@cores_option
@rto_option
@click.option("--serve", "serve", default=None, metavar="[HOST]:PORT",
              help="Serve /metrics over HTTP on this address instead of printing once: "
                   ":9108 (every interface) or 127.0.0.1:9108. Runs until interrupted.")
@click.option("--cache-seconds", type=click.FloatRange(min=0), default=60.0,
              show_default=True, metavar="SECONDS",
              help="With --serve: read the checkpoints again at most this often; scrapes in "
                   "between get the last reading.")
def metrics_command(checkpoints: tuple[str, ...], listing: Any,
                    storage_option: tuple[str, ...], per_partition: bool, decode: bool,
                    cores: int | None, rto: float | None,
                    serve: str | None, cache_seconds: float) -> None:
    """Prometheus metrics of one or many checkpoints, printed once or served.

    No JVM. Each CKPT (and each line of --checkpoints-from) is a path or URL; the storage
    options apply to every one. The exposition (Prometheus text format) has, per
    checkpoint: statekit_checkpoint_up, the doctor's verdict (statekit_restart_verdict,
    statekit_restart_problems, statekit_doctor_exit_code), the state version a restart loads,
    the last committed batch, the last batch's time and age, the watermark; per
    operator/store: keys at the version a restart loads, bytes, files per kind,
    snapshot lag, unloadable partitions, orphan files, the growth verdict with its plateau and
    slope (`statekit_growth_*`); the restart estimate with its range, state-load part and memory
    (`statekit_recovery_*`, absent when the checkpoint will not restart; with --rto
    statekit_recovery_meets_rto by the rule every surface uses). Each family carries its
    own HELP text. --per-partition adds `statekit_partition_*` (kept apart so that a sum() never
    counts a store twice).

    A checkpoint that cannot be read is statekit_checkpoint_up 0 with its exit code in
    statekit_checkpoint_error_exit_code; the rest of the scrape is unaffected. Without --serve
    the metrics are printed once (node_exporter's textfile collector, from cron); with --serve
    statekit answers /metrics and reads the checkpoints again at most every --cache-seconds.
    The verdict decodes every state file a restart loads; files decoded before and unchanged
    since are not read again (statekit's cache folder), so a scrape reads only new files.
    --no-decode: the verdict is not-checked unless the listing shows a fatal problem.

    Examples:

    \b
        statekit metrics demo/checkpoint > /var/lib/node_exporter/statekit.prom
        statekit metrics --checkpoints-from checkpoints.txt --serve :9108
    """
    import os

    from prometheus_client import CollectorRegistry, generate_latest

    from statekit.checkpoint import open_checkpoint
    from statekit.fleet.metrics import checkpoint_metrics, merge

    urls = checkpoint_urls(checkpoints, listing)
    options = parse_storage_options(storage_option)
    use_cores = cores or os.cpu_count() or 1

    def read() -> list[Any]:
        return merge(checkpoint_metrics(url, lambda u: open_checkpoint(
            u, options, allow_missing_metadata=True),
                                        cores=use_cores, per_partition=per_partition,
                                        decode=decode, rto_s=rto)
                     for url in urls)

    collector = _Collector(read, cache_seconds if serve else 0.0)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    if serve is None:
        sys.stdout.write(generate_latest(registry).decode())
        return
    from prometheus_client import start_http_server

    host, port = _address(serve)
    started = start_http_server(port, addr=host, registry=registry)
    bound = started[0].server_port if isinstance(started, tuple) else port
    click.echo(f"statekit metrics: serving http://{host}:{bound}/metrics "
               f"({len(urls)} checkpoint(s), re-read at most every {cache_seconds:g} s)",
               err=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        return
