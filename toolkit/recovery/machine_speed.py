"""How fast this machine runs a state load, against the machine the cost model was fitted on.

Why: the recovery estimate's constants are seconds on the benchmark machine. The same
restart (same checkpoint, same Spark, same settings) took 1.9× less on a newer CPU than on
the machine the grid was measured on: constants in seconds do not travel. ``--measure``
scales them by Spark's own timing, but it starts a JVM; the default estimate must not.

The probe is a small, fixed piece of the work a load does — decompress a block of packed
rows, decode every record, insert it into a map, sort the keys — timed in Python with
``thread_time`` (CPU seconds of this thread: another process on the machine does not
lengthen it the way it lengthens wall time). A machine that runs the probe in half the
benchmark machine's time gets half the seconds. That assumes the JVM's speed moves with the
interpreter's (both are bound by one core's speed and its memory) — checked by re-running
grid configurations on a faster machine (docs/concepts/recovery.md).

A Python loop does not carry the JVM's speed, though: on one VM in two states Spark ran
1.6× faster while the probe moved 10 %. So where Spark itself has timed a state load on this
machine (``statekit recovery --measure``: its state reader loading the slowest partitions of
a checkpoint, against what the benchmark machine's constants say for the same reads), that
factor is kept per machine, Spark version, provider and fit of the constants
(:func:`record_spark_speed`, :data:`MODEL_FIT`) and is
the speed every later estimate there uses, JVM-free; the Python probe is the fallback,
labelled so.

The probe takes ~0.3 s. A shared machine (a cloud VM) runs the same probe in 17 ms one
minute and 26 ms the next, when its neighbours are busy: the machine's speed is the fastest
probe seen. Results are cached per machine (host name, CPU, Python) in the user cache: the
probe runs again once a day (one estimate a day pays for it) and the fastest of the last
:data:`KEPT_PROBES` within :data:`CACHE_DAYS` counts.
``STATEKIT_MACHINE_SPEED`` (or ``statekit recovery --machine-speed``) overrides it:
``reference`` keeps the benchmark machine's constants, a number is the factor itself.
"""

from __future__ import annotations

import gc
import json
import os
import platform
import random
import struct
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from statekit.support.cache import cache_dir
from statekit.support.errors import EnvironmentProblem

SPEED_ENV = "STATEKIT_MACHINE_SPEED"
"""``probe`` (default), ``reference`` or a factor (seconds here ÷ seconds there)."""

REFERENCE_PROBE_S = 0.0197
"""The probe's seconds on the machine the cost model's constants were fitted on, probed there
on the day of the fit (:data:`MODEL_FIT`; the fastest of five processes, 0.0196–0.0197 s).
``benchmarks/bench_machine_speed.py --derive`` tells what value would make restarts
re-measured on another machine match the estimate there (docs/concepts/recovery.md)."""

PROBE_VERSION = 1
"""Part of the cache key: a changed probe is a different measurement."""

MODEL_FIT = "grid 2026-11-30, Spark 4.3.0"
"""Which fit of the cost model's constants a factor Spark measured is relative to (part of
its cache key): a factor kept against the previous constants would scale the new ones wrongly.
``benchmarks/bench_recovery_grid.py`` prints it with the constants it fits."""

PROBE_ROWS = 50_000
PROBE_REPEATS = 15
"""~20 ms each on a current server core: the fastest of 15 is steady to ~10 % between
processes on a shared VM, where the median of a few moves by a third."""
CACHE_DAYS = 30
REPROBE_DAYS = 1
KEPT_PROBES = 5
SETTLED_PROBES = 3
"""Until this many probes are cached, every process that estimates probes again (~0.3 s):
one probe taken while the machine was busy (a build, a test suite beside it) measured it up
to 1.6× slower than it is, and alone it would set the factor for a day."""
FACTOR_LIMITS = (0.2, 5.0)
"""A factor outside this range is a broken probe (a loaded machine, a debugger): clamped."""


@dataclass(frozen=True)
class MachineSpeed:
    """What the estimate's constants are multiplied by on this machine, and why."""

    factor: float
    """Seconds here ÷ seconds on the benchmark machine (1.0 = the constants as fitted)."""
    source: str
    """``spark`` (Spark's own state read timed on this machine, cached), ``probe`` (the
    Python probe, measured now), ``cached probe``, ``reference`` or ``given`` (a number the
    user set)."""
    probe_s: float | None = None
    """The probe's seconds here (``None`` unless probed)."""
    detail: str = ""
    """For ``spark``: which Spark and when it measured."""

    def describe(self) -> str:
        """One phrase for the estimate's output."""
        if self.source == "reference":
            return "constants of the benchmark machine, not scaled"
        if self.source == "given":
            return f"× {self.factor:.2f} (given)"
        if self.source == "spark":
            return f"× {self.factor:.2f} for this machine's speed as Spark measured it " \
                   f"({self.detail})"
        return (f"× {self.factor:.2f} for this machine's speed by the Python probe "
                f"({self.probe_s:.3f} s, the benchmark machine's {REFERENCE_PROBE_S:.3f} s; a "
                "fallback: `statekit recovery --measure` times Spark's own state load here "
                "and is kept for later estimates)")


def _rows() -> bytes:
    """The probe's input: ``PROBE_ROWS`` records of a 4-byte size, an 8-byte key and a 48-byte
    hex value — the shape of a small aggregation's state rows — compressed fast."""
    rnd = random.Random(7)
    values = [rnd.randbytes(24).hex().encode() for _ in range(256)]
    packed = b"".join(struct.pack(">iq", 48, (i * 2654435761) % (1 << 62)) + values[i & 255]
                      for i in range(PROBE_ROWS))
    return zlib.compress(packed, 1)


def _load_once(compressed: bytes) -> float:
    """CPU seconds of one load of the probe's rows into a map."""
    started = time.thread_time()
    data = zlib.decompress(compressed)
    unpack = struct.unpack_from
    rows: dict[int, bytes] = {}
    offset = 0
    for _ in range(PROBE_ROWS):
        size, key = unpack(">iq", data, offset)
        rows[key] = data[offset + 12: offset + 12 + size]
        offset += 12 + size
    sorted(rows)
    return time.thread_time() - started


def probe_seconds(repeats: int = PROBE_REPEATS) -> float:
    """The fastest of ``repeats`` loads: the machine's speed without the noise of the
    moments another thread took the core or its cache (and without Python's cyclic garbage
    collector, which would time the caller's heap)."""
    compressed = _rows()
    collecting = gc.isenabled()
    gc.disable()
    try:
        return min(_load_once(compressed) for _ in range(repeats))
    finally:
        if collecting:
            gc.enable()


def _machine_key() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{platform.node()}|{cpu}|{os.cpu_count()}|{platform.python_implementation()} "
            f"{platform.python_version()}|probe {PROBE_VERSION}")


PROBE_CACHE = "machine-speed.json"
SPARK_CACHE = "spark-speed.json"


def _read_cache() -> dict[str, Any]:
    return _read_cache_file(PROBE_CACHE)


def _read_cache_file(name: str) -> dict[str, Any]:
    try:
        entries = json.loads((cache_dir() / name).read_text())
    except (OSError, ValueError):
        return {}
    return entries if isinstance(entries, dict) else {}


def _recent_probes(entries: dict[str, Any], key: str, now: float) -> list[tuple[float, float]]:
    """(measured at, seconds) of this machine's probes younger than ``CACHE_DAYS``."""
    recent = []
    try:
        for measured_at, seconds in entries.get(key, {}).get("probes", []):
            if now - float(measured_at) < CACHE_DAYS * 86400 and float(seconds) > 0:
                recent.append((float(measured_at), float(seconds)))
    except (AttributeError, TypeError, ValueError):
        return []
    return sorted(recent)[-KEPT_PROBES:]


def _store_probes(entries: dict[str, Any], key: str, probes: list[tuple[float, float]],
                  name: str = PROBE_CACHE) -> None:
    """Written beside, then renamed (a concurrent estimate never reads half a file); a
    cache that cannot be written is only a cache."""
    folder = cache_dir()
    entries[key] = {"probes": probes}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=".machine-speed-")
        with os.fdopen(handle, "w") as out:
            json.dump(entries, out)
        os.replace(temporary, folder / name)
    except OSError:
        pass


def _clamped(factor: float) -> float:
    low, high = FACTOR_LIMITS
    return min(high, max(low, factor))


def parse_speed(text: str) -> MachineSpeed | None:
    """``reference`` or a positive number as a :class:`MachineSpeed`; ``probe`` (or empty)
    is ``None`` — measure. Raises ``ValueError`` for anything else."""
    text = text.strip().lower()
    if text in ("", "probe"):
        return None
    if text == "reference":
        return MachineSpeed(1.0, "reference")
    try:
        factor = float(text)
    except ValueError:
        factor = float("nan")
    if not 0 < factor < float("inf"):
        raise ValueError(f"expected probe, reference or a positive number, not {text!r}")
    return MachineSpeed(factor, "given")


_PROBING = threading.Lock()
"""The fleet estimates many checkpoints on threads at once: one of them probes, the others
wait for its answer (each probing would cost the GIL ~0.3 s per thread)."""


@lru_cache(maxsize=1)
def _probed() -> MachineSpeed:
    key, now = _machine_key(), time.time()
    entries = _read_cache()
    probes = _recent_probes(entries, key, now)
    source = "cached probe"
    if len(probes) < SETTLED_PROBES or now - probes[-1][0] >= REPROBE_DAYS * 86400:
        probes = [*probes, (now, probe_seconds())][-KEPT_PROBES:]
        _store_probes(entries, key, probes)
        source = "probe"
    fastest = min(seconds for _, seconds in probes)
    return MachineSpeed(_clamped(fastest / REFERENCE_PROBE_S), source, fastest)


def spark_version() -> str:
    """The installed pyspark's version, from its metadata (no import, no JVM)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyspark")
    except PackageNotFoundError:
        return "unknown"


def _spark_key(provider: str) -> str:
    return f"{_machine_key()}|spark {spark_version()}|{provider}|{MODEL_FIT}"


def record_spark_speed(provider: str, factor: float, now: float | None = None) -> None:
    """Keep a factor Spark measured on this machine (``recovery --measure``) for later
    JVM-free estimates of the same provider with the same Spark."""
    entries = _read_cache_file(SPARK_CACHE)
    key = _spark_key(provider)
    probes = [*_recent_probes(entries, key, now or time.time()),
              (now or time.time(), _clamped(factor))][-KEPT_PROBES:]
    _store_probes(entries, key, probes, SPARK_CACHE)


def cached_spark_speed(provider: str, now: float | None = None) -> MachineSpeed | None:
    """The newest factor Spark measured here for ``provider`` within ``CACHE_DAYS``."""
    now = now or time.time()
    probes = _recent_probes(_read_cache_file(SPARK_CACHE), _spark_key(provider), now)
    if not probes:
        return None
    measured_at, factor = probes[-1]
    days = (now - measured_at) / 86400
    age = f"{days:.0f} days ago" if days >= 1.5 else "within a day"
    return MachineSpeed(factor, "spark", detail=f"`--measure`, Spark {spark_version()}, "
                                                f"{provider}, {age}")


def machine_speed(setting: str | None = None, provider: str | None = None) -> MachineSpeed:
    """This machine's speed factor: ``setting`` (``--machine-speed``), else
    ``STATEKIT_MACHINE_SPEED``, else what Spark measured here for ``provider`` (cached by
    ``--measure``), else the (cached) Python probe. A ``setting`` that is not ``probe``,
    ``reference`` or a positive number raises ``ValueError``; the variable, a one-line
    :class:`~statekit.support.errors.EnvironmentProblem`. ``probe`` (set explicitly) skips
    Spark's measurement."""
    chosen = setting if setting is not None else os.environ.get(SPEED_ENV, "")
    if setting is not None:
        given = parse_speed(setting)
    else:
        try:
            given = parse_speed(chosen)
        except ValueError as exc:
            raise EnvironmentProblem(f"{SPEED_ENV}: {exc}") from None
    if given is not None:
        return given
    if provider is not None and chosen.strip().lower() != "probe":
        measured = cached_spark_speed(provider)
        if measured is not None:
            return measured
    with _PROBING:
        return _probed()
