"""``statekit metrics``: statekit's numbers for Prometheus, printed once or served.

Printed once, the exposition suits node_exporter's textfile collector (a cron job writes
``*.prom``); served (``--serve HOST:PORT``), Prometheus scrapes it directly. Either way each
checkpoint is read apart from the others, with its own deadline
(:mod:`statekit.fleet.live_metrics`): a broken, missing or hanging checkpoint is its own
``statekit_checkpoint_up 0``, never the scrape's failure. Served, a scrape renders each
checkpoint's last reading and a checkpoint is read again only when that reading is older
than ``--cache-seconds``; the process ends, children included, on SIGTERM or Ctrl+C. No
JVM either way.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import click

from statekit.cli.options import (
    checkpoints_from_option,
    cores_option,
    decode_option,
    executor_options,
    fleet_options,
    rto_option,
    storage_option,
    timeout_option,
)
from statekit.support.errors import BadInput


class _Collector:
    """A prometheus_client collector over a :class:`~statekit.fleet.live_metrics.LiveMetrics`:
    each scrape renders every checkpoint's last reading (a scrape never waits for a
    checkpoint, never fails for one)."""

    def __init__(self, families: Callable[[], list[Any]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import Metric

        for family in self._families():
            metric = Metric(family.name, family.help, family.kind)
            sample_name = family.name + ("_total" if family.kind == "counter" else "")
            for labels, value in family.samples:
                metric.add_sample(sample_name, dict(labels), value)
            yield metric


def serve_address(text: str, option: str = "--serve") -> tuple[str, int]:
    """``:PORT``, ``PORT`` or ``HOST:PORT`` (``[v6]:PORT``) → (host, port); every interface
    when no host is named; port 0 takes any free one (the line that says where it serves
    names it). A port above 65535 is a one-line error."""
    host, _, port = text.strip().rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise BadInput(f"{option} {text!r}: expected [HOST]:PORT with a port from 0 to 65535, "
                       "e.g. :9108 or 127.0.0.1:9108")
    return host.strip("[]") or "0.0.0.0", int(port)


def _log(line: str) -> None:
    """One line on stderr, with the time: what a service's journal keeps."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    click.echo(f"{stamp} statekit metrics: {line}", err=True)


def _listen(host: str, port: int, registry: Any) -> int:
    """Start the /metrics server; the port it listens on. A port in use or an address this
    machine does not have is a one-line error."""
    from prometheus_client import start_http_server

    try:
        started = start_http_server(port, addr=host, registry=registry)
    except OSError as error:
        reason = error.strerror or str(error)
        raise BadInput(f"cannot listen on {host}:{port}: {reason.lower()}") from error
    return started[0].server_port if isinstance(started, tuple) else port


@click.command("metrics")
@click.argument("checkpoints", nargs=-1, metavar="[CKPT]...")
@checkpoints_from_option
@storage_option
@click.option("--per-partition", is_flag=True,
              help="Also the `statekit_partition_*` families: keys, bytes and snapshot lag, "
                   "one series per partition.")
@decode_option
@cores_option
@executor_options
@rto_option
@timeout_option
@click.option("--serve", "serve", default=None, metavar="[HOST]:PORT",
              help="Serve /metrics over HTTP on this address instead of printing once: "
                   ":9108 (every interface) or 127.0.0.1:9108. Runs until interrupted.")
@click.option("--cache-seconds", type=click.FloatRange(min=0), default=60.0,
              show_default=True, metavar="SECONDS",
              help="With --serve: read a checkpoint again at most this often; scrapes in "
                   "between get its last reading.")
def metrics_command(checkpoints: tuple[str, ...], listing: Any,
                    storage_option: tuple[str, ...], per_partition: bool, decode: bool,
                    cores: int | None, executors: int, executor_memory: float | None,
                    rto: float | None, timeout: float, serve: str | None,
                    cache_seconds: float) -> None:
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

    Each checkpoint is read on its own with its own deadline (--timeout). One that cannot be
    read, or takes longer, is statekit_checkpoint_up 0 with a one-word reason label (timeout,
    unreachable, credentials, denied, missing, corrupt…) and its exit code in
    statekit_checkpoint_error_exit_code; every other checkpoint is unaffected, and each
    failure (and recovery) is one line on stderr. Without --serve the metrics are printed
    once (node_exporter's textfile collector, from cron); with --serve statekit answers
    /metrics from each checkpoint's last reading (a scrape never waits for a slow one) and
    reads a checkpoint again at most every --cache-seconds; SIGTERM or Ctrl+C stops it and
    everything it started.
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
    from statekit.fleet.live_metrics import LiveMetrics
    from statekit.state.memory import ExecutorSizing

    per_url = fleet_options(checkpoints, listing, storage_option)
    urls = list(per_url)
    address = serve_address(serve) if serve is not None else None  # before any work
    if address is not None:
        from statekit.support.gc_pause import long_running_process

        long_running_process()  # serves for weeks: no process-wide collector pause
    live = LiveMetrics(
        urls, lambda u: open_checkpoint(u, per_url[u], allow_missing_metadata=True),
        cores=cores or os.cpu_count() or 1,
        sizing=ExecutorSizing(executors, int(executor_memory) if executor_memory else None),
        per_partition=per_partition, decode=decode,
        rto_s=rto, timeout_s=timeout, refresh_s=cache_seconds if serve else 0.0,
        log=_log if serve else lambda line: click.echo(f"statekit metrics: {line}", err=True))
    registry = CollectorRegistry(auto_describe=False)
    if address is None:
        registry.register(_Collector(live.read_all))
        sys.stdout.write(generate_latest(registry).decode())
        live.close()
        return
    registry.register(_Collector(live.families))
    host, port = address
    bound = _listen(host, port, registry)
    _log(f"serving http://{host}:{bound}/metrics ({len(urls)} checkpoint(s), each read at "
         f"most every {cache_seconds:g} s within --timeout {timeout:g} s); SIGTERM or Ctrl+C "
         "stops")  # the first line, before any checkpoint's
    live.refresh_due()  # the first round starts now, not at the first scrape
    _serve_until_stopped()


def _serve_until_stopped() -> None:
    """Sleep until SIGTERM or SIGINT, then end this process and everything it started
    (decode workers, a reading blocked on a dead endpoint) within seconds."""
    from statekit.support.stopping import end_process, on_stop_signals

    stop = threading.Event()
    on_stop_signals(lambda _number: stop.set())
    while not stop.wait(3600):
        pass
    _log("stopping")
    end_process(0)
