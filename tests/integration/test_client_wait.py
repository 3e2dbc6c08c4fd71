"""``Client.wait`` costs what happened since the run last changed, never the history before it.

The run's ``sessions`` partition is filled with 10,000 earlier runs' snapshots; every wait
below must still read only a few hundred records (``Client.records_read``), and must see the
run's end however it interleaves with the wait: ended before the wait began, ended after it,
or ended in a transaction that was still open when the wait took the partition's end.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor

from confluent_kafka import Producer

from runplane.config import Settings
from runplane.kafka.clients import producer_config, transactional_producer_config
from runplane.kafka.partition import partition_for
from runplane.kafka.txn import TransactionalProducer
from runplane.runs.client import Client
from runplane.wire import RunStatus, SessionSnapshot, serde_for

HISTORY = 10_000
# Reading back from the end starts with a 256-record window; a run changed within it costs
# that window, plus what arrives while following. Far below the 10,000 records of history.
BOUND = 1_000


def _snapshot(run_id: str, status: RunStatus) -> SessionSnapshot:
    now = time.time_ns() // 1_000_000
    return SessionSnapshot(
        session_id=run_id,
        capability="bench",
        status=status,
        era=0,
        next_seq=1,
        last_hash="0" * 64,
        admission_key=f"k-{run_id}",
        tenant="default",
        initiator="tester",
        input_json="{}",
        started_ms=now,
        updated_ms=now,
    )


def _on(partition: int, partitions: int, count: int) -> list[str]:
    """``count`` fresh run ids that hash to ``partition``."""
    out: list[str] = []
    while len(out) < count:
        run_id = f"r-{uuid.uuid4()}"
        if partition_for(run_id, partitions) == partition:
            out.append(run_id)
    return out


class _Partition:
    """Writes snapshots to the one ``sessions`` partition the test's runs share."""

    def __init__(self, settings: Settings, client: Client) -> None:
        self.serde = serde_for(settings)
        self.topic = settings.topic("sessions")
        self.count = len(client.mark().ends)
        self.index = 0
        self.producer = Producer(producer_config(settings))

    def runs(self, n: int) -> list[str]:
        return _on(self.index, self.count, n)

    def value(self, run_id: str, status: RunStatus) -> bytes:
        return self.serde.encode("sessions", _snapshot(run_id, status))

    def write(self, run_id: str, status: RunStatus) -> None:
        self.producer.produce(
            self.topic, key=run_id.encode(), value=self.value(run_id, status), partition=self.index
        )
        self.producer.poll(0)

    def history(self, n: int) -> None:
        for run_id in self.runs(n):
            self.write(run_id, RunStatus.COMPLETED)
        assert self.producer.flush(60) == 0


def _waiting(client: Client, run_id: str, **kwargs: object) -> Future[SessionSnapshot]:
    pool = ThreadPoolExecutor(1)
    future = pool.submit(client.wait, run_id, timeout=60, **kwargs)  # type: ignore[arg-type]
    pool.shutdown(wait=False)
    return future


def test_a_run_that_ended_before_the_wait_is_found_without_reading_history(
    settings: Settings,
) -> None:
    with Client(settings) as client:
        part = _Partition(settings, client)
        part.history(HISTORY)
        (run,) = part.runs(1)
        part.write(run, RunStatus.RUNNING)
        part.write(run, RunStatus.COMPLETED)
        part.history(50)  # others finish after it
        snap = client.wait(run, timeout=60)
        assert snap.session_id == run and snap.status is RunStatus.COMPLETED
        assert client.records_read <= BOUND, client.records_read


def test_a_wait_from_a_mark_follows_the_run_to_its_end(settings: Settings) -> None:
    with Client(settings) as client:
        part = _Partition(settings, client)
        part.history(HISTORY)
        mark = client.mark()
        (run,) = part.runs(1)
        waiting = _waiting(client, run, since=mark)  # no snapshot of the run exists yet
        part.write(run, RunStatus.RUNNING)
        assert part.producer.flush(10) == 0
        time.sleep(0.5)  # let the wait pass RUNNING (either order must work)
        part.write(run, RunStatus.COMPLETED)
        assert part.producer.flush(10) == 0
        snap = waiting.result(timeout=90)
        assert snap.session_id == run and snap.status is RunStatus.COMPLETED
        assert client.records_read <= BOUND, client.records_read


def test_a_run_ending_in_a_transaction_open_at_the_wait_is_seen(settings: Settings) -> None:
    """The wait starts at the last stable offset, not the high watermark: a snapshot written
    by a transaction that is open when the wait begins is read once it commits."""
    with Client(settings) as client:
        part = _Partition(settings, client)
        part.history(HISTORY)
        (run,) = part.runs(1)
        part.write(run, RunStatus.RUNNING)
        assert part.producer.flush(10) == 0
        txp = TransactionalProducer(
            transactional_producer_config(settings, f"test-wait-{uuid.uuid4().hex[:8]}")
        )
        txp.init()
        txp.begin()
        completed = part.value(run, RunStatus.COMPLETED)
        txp.produce(part.topic, run.encode(), completed, partition=part.index)
        txp.flush()
        waiting = _waiting(client, run)
        started = threading.Event()
        started.wait(1.0)  # the wait takes the partition's end while the transaction is open
        txp.commit([], None)
        snap = waiting.result(timeout=90)
        assert snap.status is RunStatus.COMPLETED
        assert client.records_read <= BOUND, client.records_read
