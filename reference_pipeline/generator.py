"""Realistic, deterministic card-transaction streams for the reference pipeline.

The generator writes one JSON-lines file per micro-batch into ``<landing>/events/`` (the
pipeline reads it with ``maxFilesPerTrigger=1``, so one file is one micro-batch) and, beside
it, ``<landing>/truth/``: what it made — every session with its events and pattern — so tests
can check the pipeline's alerts and session summaries against ground truth.

Why it is built this way:

* **Deterministic per batch index.** Everything in batch *i* is a pure function of
  ``(seed, i)`` (and of the user ids involved), so ``generate 6`` followed by
  ``generate --append 6`` writes byte-for-byte the same files as ``generate 12``. That is
  what lets the exactly-once test feed the same input in two halves.
* **Sessions, not isolated events.** Users are active in *sessions*: a few transactions
  minutes apart. A user may start a session only in its *slots* (every
  ``slot_period`` batches, ≥70 minutes apart), so two sessions of a user are always more
  than 30 minutes apart — the inactivity gap is real, and ground truth is unambiguous.
* **Patterns a fraud team would recognise**: ``fraud`` (an optional quiet purchase, then a
  velocity burst — ≥5 transactions or ≥5000 within minutes — then a purchase from another
  country within 2 minutes, and an analyst's ``case_closed`` 20–40 minutes later);
  near misses that must *not* alert: ``burst_cleared`` (burst, then ``auth_ok`` within
  90 s) and ``burst_unconfirmed`` (burst, no confirmation); and ``normal`` sessions that never
  cross a threshold (≤4 transactions of ≤1200).
* **Messy arrival, like a real feed**: lines shuffled within a file; a share of normal
  transactions from the last 2 minutes of a batch arrive one file late (within the
  pipeline's 5-minute watermark delay, so they still count); and a few transactions arrive
  more than an hour late (behind the watermark: Spark must drop them).
* **An open population**: ``new_users_per_batch`` brand-new users appear in every batch, so a
  pipeline that never removes state (the leaky variant) grows every batch.

Files are written to a hidden temporary name and renamed, so a live query never reads half a
file, and their modification times increase with the batch index (Spark's file source orders
new files by modification time).
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from statekit.reference_pipeline.state_machine import MINUTE_MS

GENERATOR_FILE = "generator.json"
EVENTS_DIR = "events"
TRUTH_DIR = "truth"
FORMAT_VERSION = 1

# A user's sessions start at least this far apart (> 30 min inactivity + longest session).
MIN_SLOT_GAP_MIN = 70
# The longest a session's events can trail its start (fraud: 18 + 7 + 2 + 40 min) + delay.
MAX_SESSION_SPAN_MIN = 70
# Average events per session; turns --events-per-batch into a number of sessions.
MEAN_EVENTS_PER_SESSION = 2.25
OUT_OF_ORDER_TAIL_MS = 2 * MINUTE_MS

COUNTRIES = (
    ("US", "USD", 0.28), ("GB", "GBP", 0.12), ("DE", "EUR", 0.13), ("FR", "EUR", 0.10),
    ("NL", "EUR", 0.06), ("ES", "EUR", 0.07), ("IT", "EUR", 0.07), ("CA", "CAD", 0.07),
    ("JP", "JPY", 0.05), ("BR", "BRL", 0.05),
)
CURRENCY = {code: currency for code, currency, _ in COUNTRIES}
COUNTRY_WEIGHTS = np.array([w for *_, w in COUNTRIES]) / sum(w for *_, w in COUNTRIES)
EVERYDAY_MERCHANTS = ("grocery", "restaurants", "fuel", "transport", "pharmacy",
                      "online_retail", "subscriptions", "clothing")
FRAUD_MERCHANTS = ("electronics", "gift_cards", "online_retail", "jewelry", "crypto_exchange")

PATTERNS = ("normal", "fraud", "burst_cleared", "burst_unconfirmed")


@dataclass(frozen=True)
class GeneratorConfig:
    """Everything that shapes the stream. Stored in ``generator.json``; appends must match."""

    seed: int = 7
    users: int = 2000
    """Users that exist before the first batch."""
    new_users_per_batch: int = 10
    """Brand-new users appearing in every batch after the first (each starts a session)."""
    events_per_batch: int = 400
    """Target number of events per batch file (sessions are sized to hit it on average)."""
    batch_minutes: int = 10
    """Event time covered by one batch file."""
    fraud_per_batch: float = 1.0
    """Expected fraud incidents started per batch (Poisson)."""
    near_miss_per_batch: float = 2.0
    """Expected harmless bursts per batch (cleared by auth_ok, or never confirmed)."""
    late_per_batch: int = 2
    """Transactions per batch that arrive more than an hour late (Spark drops them)."""
    out_of_order: float = 0.10
    """Share of eligible normal transactions delivered one batch late (within the watermark)."""
    start: str = "2026-01-05T08:00:00+00:00"
    """Event time of the first batch (ISO 8601 with offset)."""
    burstiness: float = 0.0
    """Spread of per-batch traffic: each batch's session count is scaled by a lognormal factor
    with this sigma and mean 1 (0 = steady; 0.6 gives frequent 2-3x bursts and quiet batches)."""

    def validate(self) -> None:
        problems = []
        if self.users < 1:
            problems.append("users must be at least 1")
        if self.new_users_per_batch < 0:
            problems.append("new_users_per_batch must not be negative")
        if self.events_per_batch < 1:
            problems.append("events_per_batch must be at least 1")
        if not 1 <= self.batch_minutes <= 60:
            problems.append("batch_minutes must be between 1 and 60")
        if self.fraud_per_batch < 0 or self.near_miss_per_batch < 0 or self.late_per_batch < 0:
            problems.append("fraud, near-miss and late rates must not be negative")
        if not 0.0 <= self.out_of_order <= 1.0:
            problems.append("out_of_order must be between 0 and 1")
        if not 0.0 <= self.burstiness <= 2.0:
            problems.append("burstiness must be between 0 and 2")
        try:
            self.start_ms  # noqa: B018 — parse check
        except ValueError:
            problems.append(f"start {self.start!r} is not an ISO 8601 timestamp")
        if problems:
            raise ValueError("; ".join(problems))

    @property
    def start_ms(self) -> int:
        parsed = datetime.fromisoformat(self.start)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return int(parsed.timestamp() * 1000)

    @property
    def span_ms(self) -> int:
        return self.batch_minutes * MINUTE_MS

    @property
    def slot_period(self) -> int:
        """Batches between a user's possible session starts (≥ MIN_SLOT_GAP_MIN apart)."""
        return math.ceil(MIN_SLOT_GAP_MIN / self.batch_minutes) + 1

    @property
    def lookback(self) -> int:
        """How many earlier batches can still have events landing in a batch's file."""
        return math.ceil(MAX_SESSION_SPAN_MIN / self.batch_minutes) + 1

    def population(self, batch: int) -> int:
        """Users that exist once ``batch`` has started."""
        return self.users + max(0, batch) * self.new_users_per_batch


@dataclass(frozen=True)
class GeneratedEvent:
    event_id: str
    event_type: str
    user_id: str
    event_ms: int
    amount: float | None
    country: str | None
    merchant_category: str | None
    file: int
    """Index of the batch file the event is delivered in."""

    def json_line(self, card_id: str) -> str:
        currency = CURRENCY.get(self.country or "") if self.event_type == "txn" else None
        record = {
            "event_id": self.event_id,
            "event_type": self.event_type,
            "user_id": self.user_id,
            "card_id": card_id,
            "amount": self.amount,
            "currency": currency,
            "merchant_category": self.merchant_category,
            "country": self.country,
            "event_time": _iso(self.event_ms),
        }
        return json.dumps(record, separators=(",", ":"))

    def truth(self) -> dict:
        return {"id": self.event_id, "type": self.event_type, "ms": self.event_ms,
                "amount": self.amount, "country": self.country, "file": self.file}


@dataclass(frozen=True)
class GeneratedSession:
    session_id: str
    user_id: str
    pattern: str
    start_batch: int
    events: tuple[GeneratedEvent, ...]

    def truth(self) -> dict:
        return {"session_id": self.session_id, "user_id": self.user_id, "pattern": self.pattern,
                "start_batch": self.start_batch, "events": [e.truth() for e in self.events]}


@dataclass(frozen=True)
class GenerateResult:
    landing: Path
    first_batch: int
    batches_written: int
    total_batches: int
    events_written: int
    fraud_incidents: int


def _iso(ms: int) -> str:
    dt = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


_MASK64 = (1 << 64) - 1


def _mix(*parts: int) -> int:
    """splitmix64 over the parts: a stable per-entity hash (Python's hash() is salted)."""
    x = 0x9E3779B97F4A7C15
    for part in parts:
        x = (x ^ (part & _MASK64)) * 0xBF58476D1CE4E5B9 & _MASK64
        x = (x ^ (x >> 31)) * 0x94D049BB133111EB & _MASK64
        x ^= x >> 29
    return x


def user_id(number: int) -> str:
    return f"u{number:07d}"


class _Batches:
    """Builds sessions per start batch (memoised) and routes their events to files."""

    def __init__(self, config: GeneratorConfig) -> None:
        self.config = config
        self._sessions: dict[int, tuple[GeneratedSession, ...]] = {}
        period = config.slot_period
        offsets = [_mix(config.seed, 1, n) % period for n in range(config.users)]
        self._initial_by_slot: dict[int, list[int]] = {s: [] for s in range(period)}
        for number, offset in enumerate(offsets):
            self._initial_by_slot[offset].append(number)

    # -- who does what in a batch -----------------------------------------------------------
    def _new_users(self, batch: int) -> range:
        if batch < 1:
            return range(0)
        first = self.config.users + (batch - 1) * self.config.new_users_per_batch
        return range(first, first + self.config.new_users_per_batch)

    def _eligible(self, batch: int) -> list[int]:
        """Existing users whose slot falls on this batch (new users: their creation batch)."""
        cfg = self.config
        period = cfg.slot_period
        eligible = list(self._initial_by_slot[batch % period])
        for created in range(batch - period, 0, -period):
            eligible.extend(self._new_users(created))
        return eligible

    def traffic_factor(self, batch: int) -> float:
        """This batch's traffic relative to ``events_per_batch`` (1.0 unless bursty)."""
        sigma = self.config.burstiness
        if sigma <= 0:
            return 1.0
        rng = np.random.default_rng([self.config.seed, 6, batch])
        return float(rng.lognormal(-sigma * sigma / 2, sigma))

    def sessions(self, batch: int) -> tuple[GeneratedSession, ...]:
        if batch < 0:
            return ()
        if batch not in self._sessions:
            self._sessions[batch] = self._build_sessions(batch)
        return self._sessions[batch]

    def _build_sessions(self, batch: int) -> tuple[GeneratedSession, ...]:
        cfg = self.config
        rng = np.random.default_rng([cfg.seed, 2, batch])
        forced = list(self._new_users(batch))
        wanted = max(0, round(cfg.events_per_batch / MEAN_EVENTS_PER_SESSION
                              * self.traffic_factor(batch)) - len(forced))
        eligible = self._eligible(batch)
        chosen = [int(u) for u in rng.choice(eligible, size=min(wanted, len(eligible)),
                                             replace=False)] if eligible else []
        n_fraud = min(len(chosen), int(rng.poisson(cfg.fraud_per_batch)))
        n_cleared = min(len(chosen) - n_fraud, int(rng.poisson(cfg.near_miss_per_batch / 2)))
        n_unconf = min(len(chosen) - n_fraud - n_cleared,
                       int(rng.poisson(cfg.near_miss_per_batch / 2)))
        patterns = (["fraud"] * n_fraud + ["burst_cleared"] * n_cleared
                    + ["burst_unconfirmed"] * n_unconf)
        patterns += ["normal"] * (len(chosen) - len(patterns))
        plan = list(zip(chosen, patterns, strict=True)) + [(u, "normal") for u in forced]
        plan.sort()
        return tuple(self._session(batch, number, pattern) for number, pattern in plan)

    # -- one session ------------------------------------------------------------------------
    def home_country(self, number: int) -> str:
        rng = np.random.default_rng([self.config.seed, 3, number])
        return COUNTRIES[int(rng.choice(len(COUNTRIES), p=COUNTRY_WEIGHTS))][0]

    def card_id(self, number: int) -> str:
        return f"c{_mix(self.config.seed, 4, number) & 0xFFFFFFFFFF:010x}"

    def _session(self, batch: int, number: int, pattern: str) -> GeneratedSession:
        cfg = self.config
        rng = np.random.default_rng([cfg.seed, 5, batch, number])
        uid = user_id(number)
        home = self.home_country(number)
        t = cfg.start_ms + batch * cfg.span_ms + int(rng.integers(0, cfg.span_ms))
        steps: list[tuple[str, int, float | None, str | None, str | None]] = []

        def txn(at: int, amount: float, country: str, merchant: str) -> None:
            steps.append(("txn", at, round(float(amount), 2), country, merchant))

        def everyday_amount() -> float:
            return min(1200.0, max(1.0, rng.lognormal(math.log(45), 0.9)))

        def everyday_merchant() -> str:
            return EVERYDAY_MERCHANTS[int(rng.integers(len(EVERYDAY_MERCHANTS)))]

        def foreign() -> str:
            others = [c for c, _, _ in COUNTRIES if c != home]
            return others[int(rng.integers(len(others)))]

        if pattern == "normal":
            for k in range(int(rng.choice([1, 2, 3, 4], p=[0.35, 0.3, 0.2, 0.15]))):
                if k:
                    t += int(rng.integers(1 * MINUTE_MS, 8 * MINUTE_MS))
                country = foreign() if rng.random() < 0.03 else home
                txn(t, everyday_amount(), country, everyday_merchant())
        else:
            if rng.random() < 0.5:  # a quiet purchase well before the burst
                txn(t, everyday_amount(), home, everyday_merchant())
                t += int(rng.integers(11 * MINUTE_MS, 18 * MINUTE_MS))
            by_count = rng.random() < 0.6
            if pattern == "burst_cleared":
                size = 5 if by_count else 2
            else:
                size = int(rng.integers(5, 8)) if by_count else int(rng.integers(2, 4))
            for k in range(size):
                if k:
                    t += int(rng.integers(20_000, 70_000 if by_count else 120_000))
                if by_count:
                    amount = rng.uniform(20, 400)
                else:
                    amount = rng.uniform(2600, 3500) if size == 2 else rng.uniform(1700, 2500)
                merchant = FRAUD_MERCHANTS[int(rng.integers(len(FRAUD_MERCHANTS)))]
                txn(t, amount, home, merchant)
            if pattern == "fraud":
                t += int(rng.integers(30_000, 100_000))
                amount = rng.uniform(100, 2000)  # drawn before the country, as always
                abroad = foreign()
                txn(t, amount, abroad, "electronics")
                flagged_at = t
                for _ in range(int(rng.integers(0, 3))):
                    t += int(rng.integers(15_000, 60_000))
                    txn(t, rng.uniform(50, 1500), abroad, "gift_cards")
                closed = flagged_at + int(rng.integers(20 * MINUTE_MS, 40 * MINUTE_MS))
                steps.append(("case_closed", closed, None, None, None))
            elif pattern == "burst_cleared":
                t += int(rng.integers(20_000, 90_000))
                steps.append(("auth_ok", t, None, None, None))
                for _ in range(int(rng.integers(0, 3))):
                    t += int(rng.integers(1 * MINUTE_MS, 5 * MINUTE_MS))
                    txn(t, everyday_amount(), home, everyday_merchant())

        events = []
        for k, (kind, at, step_amount, step_country, step_merchant) in enumerate(steps):
            file = (at - cfg.start_ms) // cfg.span_ms
            in_tail = (at - cfg.start_ms) % cfg.span_ms >= cfg.span_ms - OUT_OF_ORDER_TAIL_MS
            if pattern == "normal" and in_tail and rng.random() < cfg.out_of_order:
                file += 1  # arrives one file late, still ahead of the watermark
            events.append(GeneratedEvent(f"{uid}-{batch:06d}-{k:02d}", kind, uid, at,
                                         step_amount, step_country, step_merchant, int(file)))
        return GeneratedSession(f"{uid}-{batch:06d}", uid, pattern, batch, tuple(events))

    def late_events(self, batch: int) -> list[GeneratedEvent]:
        """Transactions far behind the watermark; from the third batch on."""
        cfg = self.config
        if batch < 2 or cfg.late_per_batch == 0:
            return []
        rng = np.random.default_rng([cfg.seed, 6, batch])
        late = []
        for k in range(cfg.late_per_batch):
            number = int(rng.integers(0, cfg.population(batch - 1)))
            behind = cfg.span_ms + 60 * MINUTE_MS + int(rng.integers(0, 30 * MINUTE_MS))
            at = cfg.start_ms + batch * cfg.span_ms - behind
            late.append(GeneratedEvent(f"late-{batch:06d}-{k:02d}", "txn", user_id(number), at,
                                       round(float(rng.uniform(5, 300)), 2),
                                       self.home_country(number), "online_retail", batch))
        return late

    def file_events(self, batch: int) -> Iterator[GeneratedEvent]:
        for start in range(max(0, batch - self.config.lookback), batch + 1):
            for session in self.sessions(start):
                yield from (e for e in session.events if e.file == batch)
        yield from self.late_events(batch)

    def file_lines(self, batch: int) -> list[str]:
        lines = [e.json_line(self.card_id(int(e.user_id[1:]))) for e in self.file_events(batch)]
        order = np.random.default_rng([self.config.seed, 7, batch]).permutation(len(lines))
        return [lines[i] for i in order]


def read_manifest(landing: Path) -> tuple[GeneratorConfig, int] | None:
    """The config and number of batches already in ``landing``; None for a new folder."""
    path = Path(landing) / GENERATOR_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
        known = {f.name for f in fields(GeneratorConfig)}
        config = GeneratorConfig(**{k: v for k, v in data["config"].items() if k in known})
        return config, int(data["batches"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a generator manifest ({exc})") from exc


def _write_atomic(path: Path, text: str, mtime: float | None = None) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    if mtime is not None:
        os.utime(tmp, (mtime, mtime))
    os.replace(tmp, path)


def events_file(landing: Path, batch: int) -> Path:
    return Path(landing) / EVENTS_DIR / f"batch-{batch:06d}.jsonl"


def truth_file(landing: Path, batch: int) -> Path:
    return Path(landing) / TRUTH_DIR / f"batch-{batch:06d}.json"


def generate(landing: Path, config: GeneratorConfig, batches: int) -> GenerateResult:
    """Write ``batches`` more batch files into ``landing`` (a new folder, or one made by the
    same config). Raises ``ValueError`` on a config mismatch or an invalid config."""
    config.validate()
    if batches < 1:
        raise ValueError("batches must be at least 1")
    landing = Path(landing)
    existing = read_manifest(landing)
    first = 0
    mtime_base = time.time()
    if existing is not None:
        old_config, first = existing
        if old_config != config:
            diff = {k: (v, getattr(config, k)) for k, v in asdict(old_config).items()
                    if getattr(config, k) != v}
            raise ValueError(f"{landing} was generated with a different config {diff}")
        mtime_base = json.loads((landing / GENERATOR_FILE).read_text())["mtime_base"]
    elif landing.exists() and any(landing.iterdir()):
        raise ValueError(f"{landing} is not empty and holds no {GENERATOR_FILE}")
    (landing / EVENTS_DIR).mkdir(parents=True, exist_ok=True)
    (landing / TRUTH_DIR).mkdir(parents=True, exist_ok=True)

    builder = _Batches(config)
    events_written = fraud = 0
    for batch in range(first, first + batches):
        sessions = builder.sessions(batch)
        fraud += sum(s.pattern == "fraud" for s in sessions)
        truth = {"batch": batch, "sessions": [s.truth() for s in sessions],
                 "late_events": [e.truth() for e in builder.late_events(batch)]}
        _write_atomic(truth_file(landing, batch), json.dumps(truth, separators=(",", ":")))
        lines = builder.file_lines(batch)
        events_written += len(lines)
        # Spark's file source picks up new files in modification-time order.
        _write_atomic(events_file(landing, batch), "\n".join(lines) + "\n",
                      mtime=mtime_base + batch)
        manifest = {"format": FORMAT_VERSION, "config": asdict(config), "batches": batch + 1,
                    "mtime_base": mtime_base}
        _write_atomic(landing / GENERATOR_FILE, json.dumps(manifest, indent=2) + "\n")
    return GenerateResult(landing, first, batches, first + batches, events_written, fraud)
