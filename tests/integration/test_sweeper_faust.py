"""The Faust sweeper's edges on the real broker and Redis: what it reads uncommitted, what it
cannot read, and its service face.

- A case record from an *aborted* cases transaction reaches the Faust stream (it reads
  ``read_uncommitted``): the sweeper indexes the ghost obligation and decides it, the decision
  is never confirmed, and after ``revalidate_ms`` the committed view does not hold it, so the
  entry is dropped and nothing more is sent. A committed obligation that is merely unconfirmed
  (no cases service is running) is kept and still decided.
- An undecodable case record goes to ``deadletter`` with its coordinates; the stream goes on.
- ``serve()`` answers ``/healthz`` and ``/metrics`` on the sweeper's port while it sweeps.
"""

from __future__ import annotations

import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace

import pytest
from confluent_kafka import Producer
from prometheus_client import REGISTRY
from test_cases_support import read_all, redis_db, redis_url

from runplane.config import Settings
from runplane.fakes import free_port
from runplane.kafka.clients import producer_config, transactional_producer_config
from runplane.kafka.partition import partition_for
from runplane.wire import (
    BreachDeadline,
    CaseRecord,
    DeadLetter,
    Obligation,
    ObligationStatus,
    serde_for,
)
from services.sweeper.serve import serve
from services.sweeper.settings import SweeperSettings
from services.sweeper.sweeper import Sweeper
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

REDIS_DB = 13
SERDE = serde_for(Settings())


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def case_record(case_id: str, name: str, due_ms: int) -> CaseRecord:
    ob = Obligation(
        name=name,
        due_ms=due_ms,
        warn_ms=None,
        calendar="wall",
        calendar_digest="00" * 32,
        rule_json='{"days": 1}',
        on_breach="escalate",
        status=ObligationStatus.OPEN,
        registered_by=f"run-{case_id}",
        updated_ms=0,
    )
    return CaseRecord(
        case_id=case_id, version=1, state_json="{}", obligations=(ob,), closed=False, updated_ms=0
    )


def produce_cases(settings: Settings, records: list[tuple[str, bytes]], *, abort: bool) -> None:
    """Write raw case records keyed by case id; in one transaction that is aborted if asked."""
    topic = settings.topic("cases")
    n = settings.partitions
    if abort:
        producer = Producer(
            transactional_producer_config(settings, f"{settings.instance_id}-ghost-writer")
        )
        producer.init_transactions(30)
        producer.begin_transaction()
    else:
        producer = Producer(producer_config(settings))
    for key, value in records:
        producer.produce(topic, key=key.encode(), value=value, partition=partition_for(key, n))
    assert producer.flush(30) == 0
    if abort:
        producer.abort_transaction(30)


def metric(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@contextmanager
def running(sweeper: Sweeper) -> Iterator[Sweeper]:
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            sweeper.run(stop)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    thread = threading.Thread(target=run, name="sweeper", daemon=True)
    thread.start()
    try:
        assert sweeper.ready.wait(60), f"no partitions assigned: {errors}"
        yield sweeper
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive(), "the sweeper did not stop"
    assert not errors, errors


def own_settings(settings: Settings, **kw: int) -> SweeperSettings:
    base = replace(settings, redis_url=redis_url(REDIS_DB))
    return SweeperSettings(base=base, **kw)


def indexed(settings: Settings) -> int:
    """How many partitions have an index (a rebuild reads committed records only)."""
    return int(redis_db(REDIS_DB).hlen(f"runplane:sweeper:{settings.topic_prefix}:offsets"))


def breaches(settings: Settings) -> Counter[str]:
    return Counter(
        k for k, r in read_all(settings, "cases.commands") if isinstance(r, BreachDeadline)
    )


def test_a_ghost_obligation_from_an_aborted_transaction_is_dropped_a_committed_one_kept(
    settings: Settings,
) -> None:
    redis_db(REDIS_DB).flushdb()
    due = now_ms() - 60_000  # already due: the first tick decides both
    produce_cases(
        settings, [("c-real", SERDE.encode("cases", case_record("c-real", "r", due)))], abort=False
    )
    ghosts_before = metric("runplane_sweeper_revalidations_total", result="ghost")
    kept_before = metric("runplane_sweeper_revalidations_total", result="committed")

    own = own_settings(settings, tick_ms=50, retry_ms=100, revalidate_ms=1500)
    with running(Sweeper(own)) as sw:
        # A rebuild reads committed records only, so the ghost is written once the index is
        # built and the stream is what delivers it.
        wait_for(lambda: indexed(settings) == settings.partitions, what="every partition indexed")
        assert sw.index_size() == 1
        produce_cases(
            settings,
            [("c-ghost", SERDE.encode("cases", case_record("c-ghost", "g", due)))],
            abort=True,
        )
        # Faust read the aborted record: the ghost is decided like a real obligation...
        wait_for(lambda: set(breaches(settings)) == {"c-real", "c-ghost"}, what="both decided")
        # ...until the committed view says it never existed.
        wait_for(
            lambda: metric("runplane_sweeper_revalidations_total", result="ghost") > ghosts_before,
            what="ghost dropped",
        )
        after_drop = breaches(settings)["c-ghost"]
        time.sleep(1.5)  # many ticks and retries later
        sent = breaches(settings)
        assert sw.index_size() == 1  # the real one, still unconfirmed
    print(f"breach decisions sent: {dict(sent)}")
    assert sent["c-ghost"] == after_drop  # not retried any more
    assert sent["c-real"] > after_drop  # a committed obligation is still decided
    assert metric("runplane_sweeper_revalidations_total", result="committed") > kept_before


def test_an_undecodable_case_record_is_dead_lettered_and_the_stream_goes_on(
    settings: Settings,
) -> None:
    redis_db(REDIS_DB).flushdb()
    due = now_ms() + 3_600_000
    bad = b"\xc3\x01not avro at all"
    unreadable_before = metric("runplane_sweeper_unreadable_records_total")

    with running(Sweeper(own_settings(settings, tick_ms=50))) as sw:
        # Written once the index is built, so the stream (not a rebuild) reads them.
        wait_for(lambda: indexed(settings) == settings.partitions, what="every partition indexed")
        produce_cases(settings, [("c-bad", bad)], abort=False)
        good = SERDE.encode("cases", case_record("c-bad", "b", due))
        produce_cases(settings, [("c-bad", good)], abort=False)
        wait_for(lambda: sw.index_size() == 1, what="the good record indexed")
        letters = wait_for(
            lambda: [r for _, r in read_all(settings, "deadletter") if isinstance(r, DeadLetter)],
            what="the dead letter",
        )
    (letter,) = letters
    assert letter.source_topic == settings.topic("cases")
    assert letter.partition == partition_for("c-bad", settings.partitions)
    assert letter.offset == 0 and letter.value == bad and letter.key == b"c-bad"
    assert letter.service == "sweeper" and letter.reason
    assert metric("runplane_sweeper_unreadable_records_total") == unreadable_before + 1


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except OSError:
        return 0, ""


def test_serve_answers_healthz_and_metrics_while_sweeping(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    monkeypatch.setenv("RUNPLANE_SWEEPER_PORT", str(port))
    monkeypatch.setenv("RUNPLANE_SWEEPER_TICK_MS", "50")
    base = replace(
        settings,
        redis_url=redis_url(REDIS_DB),
        instance_id=f"{settings.instance_id}-{uuid.uuid4().hex[:4]}",
    )
    stop = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            serve(base, stop)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run, name="serve-sweeper", daemon=True)
    thread.start()
    try:

        def healthy() -> tuple[int, str] | None:
            answer = get(f"http://127.0.0.1:{port}/healthz")
            return answer if answer[0] == 200 else None

        status, body = wait_for(healthy, what="healthy")
        assert status == 200 and body, body
        status, text = get(f"http://127.0.0.1:{port}/metrics")
        assert status == 200
        assert "runplane_sweeper_index_entries" in text
        assert "runplane_sweeper_commands_total" in text
    finally:
        stop.set()
        thread.join(30)
    assert not thread.is_alive() and not errors, errors
