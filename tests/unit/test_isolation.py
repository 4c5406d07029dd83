"""One checkpoint's fault stays its own: readings with deadlines, failures as user errors,
and the exporter's per-checkpoint state, on real files and real misbehaving endpoints.

No JVM. The endpoints are real servers on 127.0.0.1 (tests/support/bad_endpoints.py): one
that never answers, one that refuses connections, one that refuses the credentials; the
clients (s3fs, botocore, aiohttp) run for real against them."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from statekit.checkpoint import open_checkpoint
from statekit.checkpoint.storage_errors import REASONS, reason_of, user_error
from statekit.fleet.live_metrics import LiveMetrics
from statekit.support.deadlines import Finished, Readings, given_up
from statekit.support.errors import (
    EXIT_BAD_INPUT,
    EXIT_UNREACHABLE,
    CorruptFile,
    NotACheckpoint,
    StatekitError,
)
from tests.support.bad_endpoints import refusing_credentials, refusing_endpoint, silent_endpoint

GOLDEN = Path(__file__).parent.parent / "data" / "golden" / "spark-4.1.4"
HEALTHY = GOLDEN / "aggregation_hdfs" / "checkpoint"
S3_KEYS = {"key": "testing", "secret": "testing"}


# ---------------------------------------------------------------------------- deadlines
def _collect() -> tuple[list[Finished], threading.Event, callable]:
    got: list[Finished] = []
    event = threading.Event()

    def done(finished: Finished) -> None:
        got.append(finished)
        event.set()
    return got, event, done


def test_a_reading_past_its_deadline_is_given_up_and_never_started_twice():
    release = threading.Event()
    readings = Readings(1, name="test-deadline")
    hung, hung_done, on_hung = _collect()
    quick, quick_done, on_quick = _collect()
    key = ("test", "hung", id(readings))
    assert readings.submit(key, lambda: release.wait(60), on_hung, timeout=0.3)
    # one slot: the quick reading can only run because the hung one gave its slot up
    assert readings.submit(("test", "quick", id(readings)), lambda: 42, on_quick, timeout=30)
    assert hung_done.wait(30) and quick_done.wait(30)
    assert hung[0].timed_out and not hung[0].ok
    assert quick[0].ok and quick[0].value == 42
    # the abandoned reading still runs: its key is given up, a second one is refused
    assert given_up(key)
    again, again_done, on_again = _collect()
    assert not readings.submit(key, lambda: 1, on_again, timeout=1)
    assert again_done.is_set() and again[0].busy
    release.set()
    for _ in range(300):
        if not given_up(key):
            break
        threading.Event().wait(0.05)
    assert not given_up(key)
    assert len(hung) == 1  # the late result was dropped: on_done ran once
    readings.close()


def test_errors_reach_the_listener_and_workers_stay_within_their_slots():
    readings = Readings(2, name="test-errors")
    got: list[Finished] = []
    lock = threading.Lock()

    def done(finished: Finished) -> None:
        with lock:
            got.append(finished)

    def fail() -> None:
        raise ValueError("broken")

    for index in range(20):
        readings.submit(("test", "errors", id(readings), index),
                        fail if index % 2 else (lambda i=index: i), done, timeout=30)
        assert readings.threads <= 2
    assert readings.wait_idle(60)
    assert len(got) == 20
    assert sum(isinstance(f.error, ValueError) for f in got) == 10
    assert sorted(f.value for f in got if f.ok) == list(range(0, 20, 2))
    readings.close()


# ---------------------------------------------------------------------------- user errors
def test_client_failures_become_one_line_user_errors():
    from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

    cases = [
        (NoCredentialsError(), EXIT_BAD_INPUT, "credentials"),
        (ClientError({"Error": {"Code": "InvalidAccessKeyId", "Message": "unknown key"}},
                     "ListObjectsV2"), EXIT_BAD_INPUT, "credentials"),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:9"), EXIT_UNREACHABLE,
         "unreachable"),
        (ConnectionRefusedError(111, "Connection refused"), EXIT_UNREACHABLE, "unreachable"),
        (TimeoutError("timed out"), EXIT_UNREACHABLE, "timeout"),
        (NotADirectoryError(20, "Not a directory", "out/_spark_metadata"), EXIT_BAD_INPUT,
         "invalid"),
        (PermissionError(13, "Permission denied", "ck/offsets/3"), EXIT_BAD_INPUT, "denied"),
    ]
    for raised, code, reason in cases:
        error = user_error(raised, "s3://bucket/ck")
        assert error is not None, raised
        assert (error.exit_code, reason_of(error)) == (code, reason), raised
        assert "\n" not in str(error) and str(error).startswith("s3://bucket/ck: ")
    assert user_error(KeyError("a bug"), "x") is None  # a bug stays a bug


def test_every_error_class_has_a_one_word_reason():
    assert reason_of(CorruptFile("bad", path="f")) == "corrupt"
    assert reason_of(NotACheckpoint("no", path="d")) == "not-checkpoint"
    assert reason_of(StatekitError("bug")) == "error"
    assert all(" " not in reason for reason in REASONS)


def test_cli_reports_store_failures_as_user_errors(tmp_path):
    """No credentials, refused credentials, a refusing endpoint, a file given as the sink
    folder: one stderr line and a documented code each, never 'internal error'."""
    import subprocess
    import sys

    def statekit(*args: str, env: dict | None = None) -> tuple[int, str]:
        done = subprocess.run([sys.executable, "-m", "statekit", *args], capture_output=True,
                              text=True, env=env, timeout=300)
        return done.returncode, done.stderr

    import os

    bare = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    bare.update({"AWS_CONFIG_FILE": str(tmp_path / "none"),
                 "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                 "AWS_EC2_METADATA_DISABLED": "true"})
    with refusing_credentials() as endpoint:
        results = {
            "no credentials": statekit("report", "s3://bucket/ck", "--storage-option",
                                       f"endpoint_url={endpoint}", env=bare),
            "refused credentials": statekit(
                "report", "s3://bucket/ck", "--storage-option", f"endpoint_url={endpoint}",
                "--storage-option", "key=wrong", "--storage-option", "secret=wrong"),
        }
    results["refused connection"] = statekit(
        "report", "s3://bucket/ck", "--storage-option", f"endpoint_url={refusing_endpoint()}",
        "--storage-option", "key=a", "--storage-option", "secret=b")
    sink = tmp_path / "output"
    sink.write_text("a file, not the sink's folder")
    results["file as sink"] = statekit("recovery", str(HEALTHY), "--file-sink", str(sink))
    expected = {"no credentials": (3, "credentials"), "refused credentials": (3, "credentials"),
                "refused connection": (13, "cannot reach the store"),
                "file as sink": (3, "is a file")}
    for case, (code, words) in expected.items():
        got_code, err = results[case]
        lines = err.strip().splitlines()
        assert got_code == code, (case, err)
        assert len(lines) == 1 and lines[0].startswith("statekit: error: "), (case, err)
        assert words in lines[0] and "internal error" not in lines[0], (case, err)


# ---------------------------------------------------------------------------- the exporter
def _up(families) -> dict[str, tuple[float, str | None]]:
    for family in families:
        if family.name == "statekit_checkpoint_up":
            return {dict(labels)["checkpoint"]: (value, dict(labels).get("reason"))
                    for labels, value in family.samples}
    return {}


def _values(families, checkpoint: str) -> dict[str, list]:
    return {family.name: sorted((labels, value) for labels, value in family.samples
                                if dict(labels).get("checkpoint") == checkpoint)
            for family in families
            if family.name not in ("statekit_checkpoint_read_timestamp_seconds",
                                   "statekit_scrape_duration_seconds",
                                   "statekit_last_batch_age_seconds")}


def test_a_broken_fleet_leaves_the_healthy_checkpoint_alone(tmp_path):
    healthy = tmp_path / "healthy"
    shutil.copytree(HEALTHY, healthy)
    vanishing = tmp_path / "vanishing"
    shutil.copytree(HEALTHY, vanishing)
    lines: list[str] = []
    with silent_endpoint() as silent, refusing_credentials() as wrong_keys:
        options = {
            "s3://silent/ck": {"endpoint_url": silent, **S3_KEYS},
            "s3://refused/ck": {"endpoint_url": refusing_endpoint(), **S3_KEYS},
            "s3://wrongkeys/ck": {"endpoint_url": wrong_keys, **S3_KEYS},
        }
        urls = [str(healthy), str(tmp_path / "missing"), str(vanishing), *options]
        live = LiveMetrics(
            urls, lambda url: open_checkpoint(url, options.get(url), allow_missing_metadata=True),
            cores=1, timeout_s=4, refresh_s=0, slots=2, first_wait_s=60,
            log=lines.append)
        first = live.families()
        up = _up(first)
        assert up[str(healthy)] == (1.0, None)
        assert up[str(vanishing)] == (1.0, None)
        assert up[str(tmp_path / "missing")] == (0.0, "missing")
        assert up["s3://silent/ck"] == (0.0, "timeout")
        assert up["s3://wrongkeys/ck"] == (0.0, "credentials")
        assert up["s3://refused/ck"][0] == 0.0
        assert up["s3://refused/ck"][1] in ("unreachable", "timeout")
        # the silent endpoint's reading was given up, not ended: it still runs, and
        # the next scrape neither waits for it nor starts a second one
        assert given_up(("metrics", "s3://silent/ck", id(live)))
        shutil.rmtree(vanishing)  # deleted between two readings
        for _ in range(600):  # a scrape never waits: ask until the new reading is in
            second = live.families()
            if _up(second)[str(vanishing)][0] == 0.0:
                break
            threading.Event().wait(0.1)
        live.close()
    up = _up(second)
    assert up[str(healthy)] == (1.0, None)
    assert _values(first, str(healthy)) == _values(second, str(healthy))
    assert up["s3://silent/ck"] == (0.0, "timeout")
    # one line per failure transition: each broken checkpoint once, the vanished one once,
    # the healthy one never
    downs = [line for line in lines if "down (" in line]
    assert _up(second)[str(vanishing)] == (0.0, "missing")
    assert sum(str(vanishing) in line for line in downs) == 1
    assert not any(str(healthy) + ":" in line for line in lines)
    assert sum("s3://silent/ck" in line for line in downs) == 1
    assert all("\n" not in line and "Traceback" not in line for line in lines)


# ---------------------------------------------------------------------------- the fleet list
def _fleet_threads_left() -> int:
    """The fleet list's reading threads still alive once a round's own have ended (a closed
    round's workers and watchdog end as soon as they wake; wait for that, at most 10 s)."""
    for _ in range(200):
        left = [t for t in threading.enumerate() if t.name.startswith("statekit-fleet")]
        if len(left) <= 1:
            break
        threading.Event().wait(0.05)
    return len(left)


def test_the_fleet_list_gives_each_checkpoint_its_own_deadline(tmp_path):
    """What the TUI's fleet list (and ``--watch``) reads: a checkpoint behind a silent
    endpoint gets an error row at its deadline while the others complete; the next round
    does not start a second reading of it, and rounds do not add threads."""
    from statekit.fleet.readings import read_fleet

    healthy = tmp_path / "healthy"
    shutil.copytree(HEALTHY, healthy)
    with silent_endpoint() as silent, refusing_credentials() as wrong_keys:
        per_url = {"s3://silent/ck": {"endpoint_url": silent, **S3_KEYS},
                   "s3://wrongkeys/ck": {"endpoint_url": wrong_keys, **S3_KEYS}}
        urls = [str(healthy), *per_url]
        rounds = []
        threads = []
        for _ in range(3):
            rounds.append({row.url: row for row in read_fleet(
                urls, cores=1, per_url=per_url, timeout_s=3, workers=2)})
            threads.append(_fleet_threads_left())
    for number, rows in enumerate(rounds):
        assert rows[str(healthy)].error is None and rows[str(healthy)].complete
        assert rows[str(healthy)].health == "restarts"
        assert rows["s3://wrongkeys/ck"].exit_code == EXIT_BAD_INPUT
        assert "refused the credentials" in rows["s3://wrongkeys/ck"].error
        silent_row = rows["s3://silent/ck"]
        assert silent_row.exit_code == EXIT_UNREACHABLE
        # later rounds find the first one's reading still blocked (unless the client's own
        # 30 s socket timeout ended it in between, on a very slow machine)
        expected = ("took longer than --timeout 3 s",) if number == 0 else \
            ("still runs", "took longer than --timeout 3 s")
        assert any(words in silent_row.error for words in expected), silent_row.error
    # after each round only the hung reading's thread is left (none once its socket gave
    # up): a round adds no thread, however many rounds
    assert all(left <= 1 for left in threads), threads


def test_a_long_running_process_sees_an_object_stores_new_batches(s3_server, tmp_path):
    """The exporter and ``--watch`` open the same S3 checkpoint again and again in one
    process, through one cached filesystem object: each opening lists what the store holds
    now (a running query's next batch), not what the first one saw."""
    copy = tmp_path / "ck"
    shutil.copytree(HEALTHY, copy)
    last = max(int(p.name) for p in (copy / "commits").iterdir() if p.name.isdigit())
    commit = (copy / "commits" / str(last)).read_bytes()
    (copy / "commits" / str(last)).unlink()
    url = s3_server.upload(str(copy), "growing", "ck")
    options = {"endpoint_url": s3_server.endpoint, **S3_KEYS}  # fsspec's caching as a user's
    before = open_checkpoint(url, options).last_committed_batch
    s3_server.filesystem().pipe(f"growing/ck/commits/{last}", commit)
    after = open_checkpoint(url, options).last_committed_batch
    assert (before, after) == (last - 1, last)
