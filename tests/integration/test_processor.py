"""The shared transactional processor on the real broker (Foundation's "done means").

Outputs, table changes and input offsets land together or not at all; a crash between
produce and commit leaves nothing visible to read_committed readers and the restart produces
the outputs exactly once; a zombie's late commit is fenced; tables are restored from their
compacted topic after a restart; bad input is dead-lettered and the partition moves on.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from test_processor_support import MiniAdmission, make_processor

from runplane.config import Settings
from runplane.kafka.clients import consumer_config, producer_config
from runplane.kafka.handler import Emit, State
from runplane.kafka.partition import partition_for
from runplane.kafka.processor import Processor, ProcessorConfig
from runplane.wire import (
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    DeadLetter,
    Record,
    serde_for,
)
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.integration

SUPPORT = Path(__file__).with_name("test_processor_support.py")
SERDE = serde_for(Settings())


def request(key: str, capability: str = "refund") -> AdmissionRequest:
    return AdmissionRequest(
        admission_key=key, capability=capability, input_json="{}", tenant="t", initiator="me"
    )


def produce(settings: Settings, items: list[tuple[str, bytes]]) -> None:
    producer = Producer(producer_config(settings))
    for key, value in items:
        producer.produce(settings.topic("admission"), key=key.encode(), value=value)
    assert producer.flush(30) == 0


def produce_requests(settings: Settings, keys: list[str]) -> None:
    produce(settings, [(k, SERDE.encode("admission", request(k))) for k in keys])


def read_all(
    settings: Settings, logical: str, *, committed: bool = True
) -> list[tuple[str, Record | None]]:
    """Every record of a topic up to its end (last stable offset under read_committed)."""
    topic = settings.topic(logical)
    consumer = Consumer(
        consumer_config(
            settings,
            f"reader-{uuid.uuid4().hex[:8]}",
            **{
                "enable.partition.eof": True,
                "isolation.level": "read_committed" if committed else "read_uncommitted",
            },
        )
    )
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in parts])
        pending, out = set(parts), []
        deadline = time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.2):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                    continue
                value = msg.value()
                record = None if value is None else SERDE.decode(logical, value)
                out.append(((msg.key() or b"").decode(), record))
        assert not pending, f"{topic}: no EOF for partitions {pending}"
        return out
    finally:
        consumer.close()


def replies(settings: Settings) -> list[AdmissionReply]:
    return [r for _, r in read_all(settings, "admission.replies") if isinstance(r, AdmissionReply)]


@contextmanager
def running(processor: Processor) -> Iterator[Processor]:
    stop = threading.Event()
    errors: list[BaseException] = []

    def target() -> None:
        try:
            processor.run(stop)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        yield processor
    finally:
        stop.set()
        thread.join(30)
        assert not errors, errors


def spawn(
    settings: Settings, instance: str, hook: str = "", marker: Path | None = None
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "RUNPLANE_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "RUNPLANE_TOPIC_PREFIX": settings.topic_prefix,
        "RUNPLANE_PARTITIONS": str(settings.partitions),
        "MINI_INSTANCE": instance,
        "MINI_HOOK": hook,
        "MINI_MARKER": str(marker) if marker else "/dev/null",
        "MINI_STALL_S": "20",
    }
    return subprocess.Popen(
        [sys.executable, str(SUPPORT)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def stop_process(proc: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    return proc.returncode, err.decode(errors="replace")


def test_outputs_tables_and_restore_after_restart(settings: Settings) -> None:
    keys = [f"k{i}" for i in range(20)]
    produce_requests(settings, keys)
    with running(make_processor(settings, "a")) as proc:
        wait_for(lambda: len(replies(settings)) >= 20, what="20 replies")
        assert proc.state.size("claims") == 20
    first = {r.admission_key: r for r in replies(settings)}
    assert {r.outcome for r in first.values()} == {AdmissionOutcome.ADMITTED}
    assert set(first) == set(keys)

    # A fresh instance knows nothing but what it restores from admission.claims.
    produce_requests(settings, keys)
    with running(make_processor(settings, "b")) as proc:
        wait_for(lambda: len(replies(settings)) >= 40, what="40 replies")
        assert proc.state.size("claims") == 20
    second = [r for r in replies(settings) if r.outcome == AdmissionOutcome.DUPLICATE]
    assert len(second) == 20
    assert all(r.run_id == first[r.admission_key].run_id for r in second)


def test_bad_input_is_dead_lettered_and_the_partition_moves_on(settings: Settings) -> None:
    bad_key = "bad"
    produce(
        settings,
        [
            (bad_key, b"\x00not avro at all"),
            ("explode", SERDE.encode("admission", request("explode", capability="explode"))),
            (bad_key, SERDE.encode("admission", request(bad_key))),
        ],
    )
    with running(make_processor(settings, "a")):
        wait_for(lambda: len(replies(settings)) >= 1, what="a reply after the bad record")
        wait_for(lambda: len(read_all(settings, "deadletter")) >= 2, what="2 dead letters")
    letters = [v for _, v in read_all(settings, "deadletter") if isinstance(v, DeadLetter)]
    reasons = sorted(dl.reason.split(":")[0] for dl in letters)
    assert reasons == ["invalid", "undecodable"]
    undecodable = next(dl for dl in letters if dl.reason.startswith("undecodable"))
    assert undecodable.value == b"\x00not avro at all"
    assert undecodable.key == bad_key.encode()
    assert undecodable.source_topic == settings.topic("admission")
    assert [r.admission_key for r in replies(settings)] == [bad_key]


def test_sigkill_between_produce_and_commit_leaves_nothing_and_restart_is_exactly_once(
    settings: Settings, tmp_path: Path
) -> None:
    keys = [f"x{i}" for i in range(30)]
    produce_requests(settings, keys)
    marker = tmp_path / "marker"
    proc = spawn(settings, "crashy", hook="stall", marker=marker)
    try:
        wait_for(marker.exists, what="the stalled transaction", timeout_s=60)
        # The batch's outputs are on the broker, uncommitted ...
        # (how many requests the stalled batch holds depends on how fast they arrived;
        # a batch closes when its first record has waited batch_ms)
        stalled = len(read_all(settings, "admission.replies", committed=False))
        assert 1 <= stalled <= len(keys)
        # ... and invisible to read_committed readers, tables included.
        assert read_all(settings, "admission.replies") == []
        assert read_all(settings, "admission.claims") == []
    finally:
        code, _ = stop_process(proc, signal.SIGKILL)
    assert code == -signal.SIGKILL

    # Same transactional.id: init_transactions aborts the dead instance's transaction.
    restarted = spawn(settings, "crashy")
    try:
        wait_for(lambda: len(replies(settings)) >= 30, what="30 committed replies", timeout_s=60)
        time.sleep(1.0)  # anything extra would show up by now
        got = replies(settings)
    finally:
        code, err = stop_process(restarted)
    assert code == 0, err
    counts = collections.Counter(r.admission_key for r in got)
    assert counts == collections.Counter(keys)  # exactly once per key
    assert all(r.outcome == AdmissionOutcome.ADMITTED for r in got)
    claims = read_all(settings, "admission.claims")
    assert collections.Counter(k for k, _ in claims) == collections.Counter(keys)
    # The aborted records are still in the log, only never visible as committed.
    assert len(read_all(settings, "admission.replies", committed=False)) == stalled + len(keys)


def test_zombie_late_commit_is_fenced(settings: Settings, tmp_path: Path) -> None:
    keys = [f"z{i}" for i in range(25)]
    produce_requests(settings, keys)
    marker = tmp_path / "marker"
    zombie = spawn(settings, "zombie", hook="stall", marker=marker)
    taker = None
    try:
        wait_for(marker.exists, what="the zombie's stalled transaction", timeout_s=60)
        taker = spawn(settings, "taker")
        # The zombie misses max.poll.interval.ms, loses its partitions; the taker restores
        # (waiting for the zombie's open transaction to end) and serves every key.
        wait_for(
            lambda: marker.read_text() == "resumed",
            what="the zombie to wake and try its commit",
            timeout_s=60,
        )
        wait_for(lambda: len(replies(settings)) >= 25, what="25 committed replies", timeout_s=60)
        time.sleep(2.0)  # give a wrongly-committed late transaction time to show
        got = replies(settings)
    finally:
        zcode, zerr = stop_process(zombie)
        if taker is not None:
            tcode, terr = stop_process(taker)
            assert tcode == 0, terr
    counts = collections.Counter(r.admission_key for r in got)
    assert counts == collections.Counter(keys)
    # Every visible output is the taker's: the zombie's late commit never became visible.
    assert all(r.run_id is not None and r.run_id.startswith("r-taker-") for r in got)
    # Two correct ways to be fenced, depending on timing: the offset commit is refused
    # (UNKNOWN_MEMBER_ID: abort, rewind, go on) or the producer epoch was bumped (_FENCED:
    # fatal, exit non-zero and let the supervisor restart us).
    aborted = zcode == 0 and "transaction aborted" in zerr
    stopped = zcode == 3 and "STOPPED" in zerr
    assert aborted or stopped, (zcode, zerr[-2000:])
    # Its records did reach the log; they were aborted, not lost in a buffer. (How many
    # depends on how many requests its stalled batch held: adaptive batching takes what had
    # been fetched when the first record arrived, at least one.)
    assert len(read_all(settings, "admission.replies", committed=False)) > len(keys)


def test_partition_for_matches_librdkafka_murmur2(settings: Settings) -> None:
    # The results topic is produced with an explicit partition computed by partition_for;
    # it must agree with where the murmur2 partitioner of every other producer puts the key.
    producer = Producer(producer_config(settings))
    placed: dict[str, int] = {}

    def on_delivery(err: object, msg: Any) -> None:
        assert err is None, err
        placed[msg.key().decode()] = msg.partition()

    keys = [f"session-{i}" for i in range(200)] + ["", "é", "x" * 257]
    for key in keys:
        producer.produce(
            settings.topic("journal"), key=key.encode(), value=b"v", on_delivery=on_delivery
        )
    assert producer.flush(30) == 0
    assert placed == {k: partition_for(k, settings.partitions) for k in keys}
    assert len(set(placed.values())) == settings.partitions


class Ticker(MiniAdmission):
    """Emits one reply per tick from the processor's clock; the emits commit on their own."""

    def __init__(self) -> None:
        super().__init__("ticker")
        self.ticks: list[int] = []

    def tick(self, state: State, now_ms: int) -> Sequence[Emit]:
        self.ticks.append(now_ms)
        reply = AdmissionReply(
            admission_key=f"tick-{len(self.ticks)}",
            outcome=AdmissionOutcome.REFUSED,
            reason="tick",
            replied_ms=now_ms,
        )
        return [Emit("admission.replies", reply.admission_key, reply)]


class SteppingClock:
    """Each reading is one second after the last: every loop iteration is due a tick."""

    def __init__(self) -> None:
        self.t = 1_000_000

    def now_ms(self) -> int:
        self.t += 1000
        return self.t


def test_tick_emits_are_committed_with_the_injected_clock(settings: Settings) -> None:
    handler = Ticker()
    config = ProcessorConfig(
        service="ticker", group_id=settings.topic("ticker"), inputs=("admission",), tick_ms=1000
    )
    with running(Processor(settings, config, handler, clock=SteppingClock())):
        wait_for(lambda: len(replies(settings)) >= 3, what="3 tick replies")
    got = replies(settings)
    assert all(r.reason == "tick" for r in got)
    # Replies land on several partitions, so read order says nothing; the key numbers the tick.
    by_tick = sorted(got, key=lambda r: int(r.admission_key.removeprefix("tick-")))
    assert [r.replied_ms for r in by_tick] == sorted(r.replied_ms for r in by_tick)
    assert {r.replied_ms for r in got} <= set(handler.ticks)
    assert all(t >= 1_001_000 for t in handler.ticks)  # the fake clock, not the wall clock
