"""The emitter client: ask admission for a run and get its answer.

    with Client(settings) as client:
        reply = client.admit("refund", "order-17", {"invoice_id": "inv-1"}, initiator="ivan")
        reply.outcome, reply.run_id          # ADMITTED / DUPLICATE / REFUSED (+ reason)

``admit`` produces an AdmissionRequest to ``admission`` (key = the admission key) and waits
for the AdmissionReply on ``admission.replies``: it reads only the partition the key hashes
to (murmur2, like every producer), from the end as it was *before* the request was sent, and
keeps the first reply carrying that key and the request's tenant. Retrying with the same key is always safe — one key,
at most one run, ever — so a timeout is a ``RetryableError``.

``initiator`` names the worklist principal on whose behalf the run acts (four-eyes refuses
that principal on the run's tasks). It is never guessed from the OS user: pass it, or set
``RUNPLANE_INITIATOR`` (``Settings.initiator``); with neither, ``admit`` raises ConfigError.

With ``wait=True`` it then waits for the run to end (complete, fail, be quarantined or be
cancelled) and returns a :class:`RunResult`: admission's answer and how the run ended — its
final status, output or error (``Client.wait`` alone returns the SessionSnapshot).

Waiting costs what happened since the run last changed, never the partition's history.
``sessions`` is compacted by session, so a run's latest snapshot is the last record with its
key; ``wait`` takes the partition's last stable offset M, finds the run's latest snapshot
below M by reading backwards in doubling windows (stopping at the first window that holds
the key, or at a floor), then follows the partition from M. A snapshot committed before M is
found by the first read, one committed after M by the second: no gap, so a run that ended
before the wait began is still seen. ``admit(wait=True)`` and ``runplane emit --wait`` take a
``Mark`` (every partition's end, one request) before sending, so the backward read of a run
admitted just now is bounded by that mark even before the run's first snapshot exists.

Signed admission: with a ``SigningKey`` (or ``RUNPLANE_EMITTER_KEY`` /
``RUNPLANE_EMITTER_KEY_FILE`` in the environment) every request carries an Ed25519 signature
in its record headers (``runplane.signing.admission``); its tenant must be the one the key's emitter is
registered for. Without one, requests go unsigned, which only a dev-mode admission accepts.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, overload

from confluent_kafka import (
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from runplane.config import Settings, env_int
from runplane.core.agents import REGISTRY, AgentRegistry
from runplane.core.limits import DEFAULT_MAX_INPUT_BYTES, MAX_INPUT_BYTES_ENV
from runplane.core.repair import CANCELLED
from runplane.errors import ConfigError, RetryableError, WireError
from runplane.kafka.clients import consumer_config, producer_config
from runplane.kafka.partition import partition_for
from runplane.runs import operate
from runplane.runs.stream import StreamItem, follow
from runplane.serving.tracing import current_headers
from runplane.signing.admission import Headers, SigningKey
from runplane.wire import (
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    ErrorInfo,
    RunStatus,
    SessionSnapshot,
    Signal,
    TenantId,
    UpdateAnswer,
    serde_for,
)

__all__ = [
    "FINAL_STATUSES",
    "Client",
    "Mark",
    "RunResult",
    "final_status",
    "last_stable_offsets",
    "ready_batch",
]

_SETTLING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)

FINAL_STATUSES = frozenset(
    {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED, RunStatus.CANCELLED}
)


def final_status(snapshot: SessionSnapshot) -> RunStatus:
    """The run's status as a person means it: a run an operator cancelled is CANCELLED,
    also from an executor that records it as FAILED with error type ``RunCancelled``."""
    error = snapshot.error
    if snapshot.status is RunStatus.FAILED and error is not None and error.type == CANCELLED:
        return RunStatus.CANCELLED
    return snapshot.status


def _check_input_size(input_json: str) -> None:
    """Refuse an input admission would refuse, before it is produced — a larger one than
    Kafka carries would otherwise end in the producer's raw error. The limit is admission's
    (``RUNPLANE_ADMISSION_MAX_INPUT_BYTES``, read here from the same variable)."""
    limit = env_int(os.environ, MAX_INPUT_BYTES_ENV, DEFAULT_MAX_INPUT_BYTES)
    size = len(input_json.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise WireError(
            f"the input is {size} bytes, over admission's limit of {limit} bytes "
            f"({MAX_INPUT_BYTES_ENV}); nothing was sent"
        )


@dataclass(frozen=True, slots=True)
class RunResult:
    """What ``admit(wait=True)`` returns: admission's answer and, unless the request was
    refused, the run's final snapshot."""

    reply: AdmissionReply
    snapshot: SessionSnapshot | None = None

    @property
    def run_id(self) -> str | None:
        return self.reply.run_id

    @property
    def outcome(self) -> AdmissionOutcome:
        return self.reply.outcome

    @property
    def status(self) -> RunStatus | None:
        """The final status (None for a refused request)."""
        return None if self.snapshot is None else final_status(self.snapshot)

    @property
    def output(self) -> Any:
        """The run's output, decoded (None unless it completed)."""
        if self.snapshot is None or self.snapshot.output_json is None:
            return None
        return json.loads(self.snapshot.output_json)

    @property
    def error(self) -> ErrorInfo | None:
        """What the run failed (or was cancelled) with."""
        return None if self.snapshot is None else self.snapshot.error


# The first backward window; each next one doubles, so reading back d records costs < 2d + this.
_FIRST_WINDOW = 256


def ready_batch(consumer: Consumer, max_messages: int, timeout: float) -> list[Message]:
    """Up to ``max_messages`` messages, returned as soon as one is there.

    ``Consumer.consume(n, timeout)`` returns only when it holds ``n`` messages or the timeout
    runs out, so a watcher calling it with a large ``n`` waits out its whole timeout whenever
    traffic is light. This takes what is ready without waiting, and only when nothing is, blocks
    in ``poll`` for the first message to arrive.
    """
    ready: list[Message] = consumer.consume(max_messages, timeout=0)
    if ready:
        return ready
    first = consumer.poll(timeout)
    return [] if first is None else [first]


def last_stable_offsets(
    consumer: Consumer, partitions: Sequence[TopicPartition], timeout: float = 10.0
) -> list[int]:
    """Each partition's end for ``consumer`` (read_committed: the last stable offset), in one
    ListOffsets request, riding out a leader move (e.g. a topic created a moment ago).

    ``offsets_for_times`` with the LATEST sentinel (-1) asks for the end; a read_committed
    consumer gets the last stable offset, not the high watermark, so nothing of a transaction
    still open lies below it (starting at the high watermark would skip that transaction's
    records once it commits).
    """
    asked = [TopicPartition(tp.topic, tp.partition, OFFSET_END) for tp in partitions]
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = consumer.offsets_for_times(asked, timeout=timeout)
            bad = [tp for tp in got if tp.error is not None or tp.offset < 0]
            if not bad:
                return [int(tp.offset) for tp in got]
            exc: Exception = KafkaException(bad[0].error)
        except KafkaException as raised:
            exc = raised
        if not _settling(exc) or time.monotonic() > deadline:
            raise RetryableError(f"cannot read the end of {asked[0].topic}: {exc}") from exc
        time.sleep(0.2)


def _settling(exc: Exception) -> bool:
    # librdkafka does not flag a stale leader as retriable here, but it is: the metadata of a
    # topic created a moment ago is still settling.
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and (err.retriable() or err.code() in _SETTLING)


@dataclass(frozen=True)
class Mark:
    """Where each partition of ``sessions`` ended (its last stable offset) at one moment.

    Every snapshot committed later lies at or beyond it, so a run admitted after the mark has
    no snapshot below it: ``Client.wait(run, since=mark)`` never reads back past it.
    """

    ends: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.ends or any(e < 0 for e in self.ends):
            raise ValueError(f"a Mark needs one non-negative offset per partition: {self.ends}")


class Client:
    """One emitter. Not thread-safe; cheap to create, close it when done."""

    def __init__(self, settings: Settings, *, signing_key: SigningKey | None = None) -> None:
        """``signing_key`` signs every request (``runplane.signing.admission``); None reads
        ``RUNPLANE_EMITTER_KEY`` / ``RUNPLANE_EMITTER_KEY_FILE``, and with neither set the
        requests go unsigned (admitted only by an admission in dev mode)."""
        self._settings = settings
        self._signing_key = signing_key if signing_key is not None else SigningKey.from_env()
        self._serde = serde_for(settings)
        self._producer = Producer(producer_config(settings))
        self._consumer = Consumer(
            consumer_config(
                settings,
                f"runplane-client-{uuid.uuid4().hex[:12]}",  # never commits; assign() only
                **{"enable.partition.eof": True, "fetch.wait.max.ms": 20},
            )
        )
        self._partitions: dict[str, int] = {}
        #: ``sessions`` records delivered to ``wait`` (both reads), for tests and benchmarks.
        self.records_read = 0

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._producer.flush(10)
        self._consumer.close()

    # --- admission -------------------------------------------------------------------------

    @overload
    def admit(
        self,
        capability: str,
        key: str,
        input: Any,
        *,
        correlation: Mapping[str, str] | None = None,
        tenant: str = "default",
        initiator: str | None = None,
        wait: Literal[False] = False,
        timeout: float = 30.0,
        wait_timeout: float | None = None,
        agent_version: str | None = None,
    ) -> AdmissionReply: ...

    @overload
    def admit(
        self,
        capability: str,
        key: str,
        input: Any,
        *,
        correlation: Mapping[str, str] | None = None,
        tenant: str = "default",
        initiator: str | None = None,
        wait: Literal[True],
        timeout: float = 30.0,
        wait_timeout: float | None = None,
        agent_version: str | None = None,
    ) -> RunResult: ...

    def admit(
        self,
        capability: str,
        key: str,
        input: Any,
        *,
        correlation: Mapping[str, str] | None = None,
        tenant: str = "default",
        initiator: str | None = None,
        wait: bool = False,
        timeout: float = 30.0,
        wait_timeout: float | None = None,
        agent_version: str | None = None,
    ) -> AdmissionReply | RunResult:
        """Request a run and return admission's answer — with ``wait``, a :class:`RunResult`
        once the run has ended (its final status and output or error).

        ``timeout`` bounds the wait for admission's answer, ``wait_timeout`` (default:
        ``timeout``) the wait for the run's end.

        ``input`` is any JSON value. ``initiator`` defaults to ``RUNPLANE_INITIATOR``; with
        neither, ``ConfigError``. ``agent_version`` pins the run to that version (the newest of
        its line); without it the run starts on the newest version deployed. Raises ``WireError`` for a request that cannot even be built
        (empty or oversized key, bad tenant, an input over admission's size limit — nothing
        is sent) and ``RetryableError`` on timeout.
        """
        who = initiator if initiator is not None else self._settings.initiator
        if who is None or not who.strip():
            raise ConfigError(
                "no initiator: pass one (the worklist principal the run acts for) "
                "or set RUNPLANE_INITIATOR"
            )
        input_json = json.dumps(input, separators=(",", ":"), ensure_ascii=False)
        _check_input_size(input_json)
        request = AdmissionRequest(
            admission_key=key,
            capability=capability,
            input_json=input_json,
            correlation_keys=dict(correlation or {}),
            tenant=TenantId(tenant),
            initiator=who,
            requested_ms=time.time_ns() // 1_000_000,
            agent_version=agent_version,
        )
        # Taken before the request: the wait for a run admitted now never reads back past it.
        mark = self.mark() if wait else None
        reply = self.send(request, timeout=timeout)
        if not wait:
            return reply
        if reply.outcome == AdmissionOutcome.REFUSED or reply.run_id is None:
            return RunResult(reply)
        ended = self.wait(
            reply.run_id,
            timeout=timeout if wait_timeout is None else wait_timeout,
            since=self.floor_for(reply, mark),
        )
        return RunResult(reply, ended)

    @staticmethod
    def floor_for(reply: AdmissionReply, mark: Mark | None) -> Mark | None:
        """The mark taken before a request bounds the wait for the run it admitted — not for
        a duplicate, whose run was admitted (and may have ended) before the mark."""
        return mark if reply.outcome == AdmissionOutcome.ADMITTED else None

    def send(
        self,
        request: AdmissionRequest,
        *,
        timeout: float = 30.0,
        signed: tuple[Headers, int] | None = None,
    ) -> AdmissionReply:
        """Produce ``request`` and wait for the reply to its key.

        ``signed``: headers someone else signed, and the record timestamp to give it (the HTTP
        admission endpoint forwards an emitter's own signature instead of signing).
        """
        key = request.admission_key
        replies = self._settings.topic("admission.replies")
        tp = TopicPartition(replies, partition_for(key, self._count(replies)))
        # Start where the partition ends *now*: our reply can only come after our request.
        high = self._end_offset(tp)
        self._consumer.assign([TopicPartition(tp.topic, tp.partition, high)])
        try:
            value = self._serde.encode("admission", request)
            self._produce_signed(key.encode("utf-8"), value, signed)
            if self._producer.flush(timeout) > 0:
                raise RetryableError(f"request {key!r} not delivered within {timeout}s")
            return self._await_reply(key, request.tenant, timeout)
        finally:
            self._consumer.unassign()

    def _produce_signed(
        self, key: bytes, value: bytes, signed: tuple[Headers, int] | None = None
    ) -> None:
        """Produce to ``admission``, signed over these exact bytes when there is a key."""
        topic = self._settings.topic("admission")
        if signed is not None:
            headers, at_ms = signed
            self._producer.produce(
                topic, key=key, value=value, headers=list(headers), timestamp=at_ms
            )
            return
        trace = current_headers()  # the caller's trace, if it has one: the run joins it
        if self._signing_key is None:
            if trace:
                carried: list[tuple[str, str | bytes | None]] = [*trace]
                self._producer.produce(topic, key=key, value=value, headers=carried)
            else:
                self._producer.produce(topic, key=key, value=value)
            return
        # The record's timestamp is the signing time, so admission's replay window compares
        # like with like (a topic with LogAppendTime replaces it with the broker's clock).
        now_ms = time.time_ns() // 1_000_000
        headers = [*self._signing_key.headers(key, value, now_ms), *trace]
        self._producer.produce(topic, key=key, value=value, headers=headers, timestamp=now_ms)

    def _await_reply(self, key: str, tenant: str, timeout: float) -> AdmissionReply:
        deadline = time.monotonic() + timeout
        wanted = key.encode("utf-8")
        while time.monotonic() < deadline:
            for msg in ready_batch(self._consumer, 100, 0.1):
                if msg.error() is not None or msg.key() != wanted or msg.value() is None:
                    continue
                try:
                    record = self._serde.decode("admission.replies", msg.value() or b"")
                except WireError:
                    continue  # not ours to judge; the key matched by accident of bytes
                # Two tenants may use one key: only our tenant's answer is ours (a reply
                # without a tenant comes from an admission that predates per-tenant claims).
                if isinstance(record, AdmissionReply) and record.tenant in (None, tenant):
                    return record
        raise RetryableError(f"no reply for {key!r} within {timeout}s", retry_after=1.0)

    # --- waiting for a run -----------------------------------------------------------------

    def mark(self) -> Mark:
        """Where ``sessions`` ends now, every partition in one request (see :class:`Mark`)."""
        sessions = self._settings.topic("sessions")
        return Mark(tuple(self._ends(sessions, range(self._count(sessions)))))

    def wait(
        self,
        run_id: str,
        *,
        timeout: float = 300.0,
        until: frozenset[RunStatus] = FINAL_STATUSES,
        since: Mark | None = None,
    ) -> SessionSnapshot:
        """The run's SessionSnapshot once its status is in ``until`` (default: ended).

        ``since``: a mark taken before the run was admitted; the backward read stops there.
        Without it, the read stops at the run's latest snapshot (or, for a run that has none
        yet, the start of the partition).
        """
        sessions = self._settings.topic("sessions")
        part = partition_for(run_id, self._count(sessions))
        deadline = time.monotonic() + timeout
        wanted = run_id.encode("utf-8")
        (end,) = self._ends(sessions, [part])
        floor = 0 if since is None else min(end, since.ends[part])
        try:
            latest = self._latest_below(
                TopicPartition(sessions, part), wanted, floor, end, deadline
            )
            if latest is not None and latest.status in until:
                return latest
            found = self._follow(TopicPartition(sessions, part, end), wanted, until, deadline)
        finally:
            self._consumer.unassign()
        if found is None:
            raise RetryableError(f"run {run_id} did not finish within {timeout}s", retry_after=5.0)
        return found

    def _latest_below(
        self, tp: TopicPartition, wanted: bytes, floor: int, end: int, deadline: float
    ) -> SessionSnapshot | None:
        """The run's last snapshot in [floor, end): windows back from ``end``, doubling."""
        value = self._latest_bytes(tp, wanted, floor, end, deadline)
        snap = None if value is None else self._serde.decode("sessions", value)
        return snap if isinstance(snap, SessionSnapshot) else None

    def _latest_bytes(
        self, tp: TopicPartition, wanted: bytes, floor: int, end: int, deadline: float
    ) -> bytes | None:
        hi, size = end, _FIRST_WINDOW
        while hi > floor:
            lo = max(floor, hi - size)
            start = TopicPartition(tp.topic, tp.partition, lo)
            value = self._last_value(start, wanted, hi, deadline)
            if value is not None:
                return value
            hi, size = lo, size * 2
        return None

    # --- operating a run (runplane.runs.operate) -------------------------------------------------

    def latest(
        self, topic: str, key: str, *, partition_key: str | None = None, timeout: float = 30.0
    ) -> Any | None:
        """The last record keyed ``key`` on the compacted logical ``topic`` (``sessions``,
        ``admission.claims``), decoded; None when there is none. ``partition_key``: what the
        row is partitioned by when not its key (a claim's admission key)."""
        name = self._settings.topic(topic)
        part = partition_for(partition_key or key, self._count(name))
        (end,) = self._ends(name, [part])
        deadline = time.monotonic() + timeout
        try:
            value = self._latest_bytes(
                TopicPartition(name, part), key.encode("utf-8"), 0, end, deadline
            )
        finally:
            self._consumer.unassign()
        return None if value is None else self._serde.decode(topic, value)

    def to_inbox(self, record: Signal, *, timeout: float = 30.0) -> None:
        """Produce ``record`` to its run's inbox (key: the session) and wait for delivery."""
        value = self._serde.encode("runs.inbox", record)
        topic = self._settings.topic("runs.inbox")
        self._producer.produce(topic, key=record.session_id.encode("utf-8"), value=value)
        if self._producer.flush(timeout) > 0:
            raise RetryableError(f"signal for {record.session_id} not delivered within {timeout}s")

    def signal(
        self,
        run: str,
        name: str,
        payload: Any = None,
        *,
        signal_id: str | None = None,
        sent_by: str | None = None,
        tenant: str | None = None,
    ) -> operate.Sent:
        """Send signal ``name`` to a live run (by run id or admission key); ``RunRefused``
        for an unknown (or other tenant's) or ended run. Idempotent on ``signal_id``.
        ``sent_by`` defaults to ``RUNPLANE_INITIATOR`` (see ``runplane.runs.operate``)."""
        return operate.signal(
            self, run, name, payload, sent_by=self._who(sent_by), signal_id=signal_id, tenant=tenant
        )

    def update(
        self,
        run: str,
        name: str,
        payload: Any = None,
        *,
        update_id: str | None = None,
        sent_by: str | None = None,
        tenant: str | None = None,
        timeout: float = 30.0,
    ) -> Any:
        """Send the update ``name`` to a live run (by run id or admission key) and return its
        answer (``runplane.core.updates``). ``RunRefused`` for an unknown, other tenant's or
        ended run and for an update the run refused (its validator's reason; nothing was
        journaled); ``RetryableError`` when no answer came within ``timeout`` s — ask again
        with the same ``update_id`` (answered once, with the first answer; one is minted
        when not given)."""
        answered = operate.update(
            self,
            run,
            name,
            payload,
            sent_by=self._who(sent_by),
            update_id=update_id,
            tenant=tenant,
            timeout=timeout,
        )
        return answered.answer

    def ask(self, record: Signal, *, timeout: float = 30.0) -> UpdateAnswer:
        """Produce the update ``record`` to its run's inbox and wait for the run's
        ``UpdateAnswer`` on ``runs.updates`` (key: the update id), read from where that
        partition ended before it was sent."""
        update_id = str(record.signal_id)
        topic = self._settings.topic("runs.updates")
        tp = TopicPartition(topic, partition_for(update_id, self._count(topic)))
        high = self._end_offset(tp)  # an answer to this update can only come after it
        self._consumer.assign([TopicPartition(tp.topic, tp.partition, high)])
        try:
            self.to_inbox(record, timeout=timeout)
            deadline = time.monotonic() + timeout
            wanted = update_id.encode("utf-8")
            while time.monotonic() < deadline:
                for msg in ready_batch(self._consumer, 100, 0.1):
                    if msg.error() is not None or msg.key() != wanted or msg.value() is None:
                        continue
                    try:
                        answer = self._serde.decode("runs.updates", msg.value() or b"")
                    except WireError:
                        continue
                    if isinstance(answer, UpdateAnswer) and answer.session_id == record.session_id:
                        return answer
        finally:
            self._consumer.unassign()
        raise RetryableError(
            f"run {record.session_id} did not answer update {update_id!r} within {timeout}s "
            "(it has not asked for it yet?); ask again with the same update id",
            retry_after=1.0,
        )

    def query(
        self,
        run: str,
        name: str,
        args: Any = None,
        *,
        registry: AgentRegistry | None = None,
        tenant: str | None = None,
    ) -> Any:
        """The run's declared query ``name`` answered over its last checkpoint's state, from
        its latest snapshot: the run is not woken and nothing is journaled. ``registry``: the
        agents (default ``REGISTRY``, filled by importing the agent modules)."""
        agents = REGISTRY if registry is None else registry
        return operate.query(self, agents, run, name, args, tenant=tenant)

    def cancel(
        self,
        run: str,
        *,
        reason: str = "",
        sent_by: str | None = None,
        request_id: str | None = None,
        tenant: str | None = None,
    ) -> operate.Sent:
        """Cancel a live run (``runplane.core.engine.cancel``); refused like ``signal``."""
        return operate.cancel(
            self,
            run,
            reason=reason,
            sent_by=self._who(sent_by),
            request_id=request_id,
            tenant=tenant,
        )

    async def stream(self, run_id: str, *, after: int | None = None) -> AsyncIterator[StreamItem]:
        """The run's live events (``runs.stream``) as they happen, until its end; ``after``
        an event id: resume right after it (``runplane.runs.stream``). A view, never the
        truth: best effort, so a lost event shows as a gap in its attempt's ``seq``."""
        async for item in follow(self._settings, run_id, after=after):
            if item is not None:
                yield item

    def _who(self, given: str | None) -> str:
        who = given if given is not None else self._settings.initiator
        if who is None or not who.strip():
            raise ConfigError("no sender: pass sent_by or set RUNPLANE_INITIATOR")
        return who

    def _last_value(
        self, start: TopicPartition, wanted: bytes, hi: int, deadline: float
    ) -> bytes | None:
        """The value of the last record keyed ``wanted`` in [start.offset, hi).

        Everything below ``hi`` is at or below the last stable offset, so the read never waits
        on an open transaction: it ends at the first message or EOF at/after ``hi``, or when
        the position (which moves past aborted records and markers) reaches it.
        """
        self._consumer.assign([start])
        last: bytes | None = None
        while True:
            if time.monotonic() > deadline:
                raise RetryableError(f"reading {start.topic} back timed out", retry_after=1.0)
            for msg in ready_batch(self._consumer, 500, 1.0):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise RetryableError(f"reading sessions: {err.str()}")
                    return last
                offset = msg.offset() or 0
                if offset >= hi:
                    return last
                self.records_read += 1
                if msg.key() == wanted and msg.value() is not None:
                    last = msg.value()
            (pos,) = self._consumer.position([start])
            if pos.offset >= hi:
                return last

    def _follow(
        self,
        start: TopicPartition,
        wanted: bytes,
        until: frozenset[RunStatus],
        deadline: float,
    ) -> SessionSnapshot | None:
        """Read from ``start`` on until the run's status is in ``until``, or None at deadline."""
        self._consumer.assign([start])
        while time.monotonic() < deadline:
            left = deadline - time.monotonic()
            # poll() with a negative timeout would block for good: never pass one.
            for msg in ready_batch(self._consumer, 500, max(0.0, min(0.5, left))):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise RetryableError(f"reading sessions: {err.str()}")
                    continue
                self.records_read += 1
                if msg.key() != wanted or msg.value() is None:
                    continue
                snap = self._serde.decode("sessions", msg.value() or b"")
                if isinstance(snap, SessionSnapshot) and snap.status in until:
                    return snap
        return None

    def _ends(self, topic: str, partitions: Iterable[int], timeout: float = 10.0) -> list[int]:
        return last_stable_offsets(
            self._consumer, [TopicPartition(topic, p) for p in partitions], timeout
        )

    def _end_offset(self, tp: TopicPartition, timeout: float = 10.0) -> int:
        """The partition's high watermark, riding out a leader move (e.g. a fresh topic)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                _, high = self._consumer.get_watermark_offsets(tp, timeout=timeout)
                return int(high)
            except KafkaException as exc:
                if not _settling(exc) or time.monotonic() > deadline:
                    raise RetryableError(f"cannot read the end of {tp.topic}: {exc}") from exc
                time.sleep(0.2)

    def _count(self, topic: str) -> int:
        n = self._partitions.get(topic)
        if n is None:
            meta = self._consumer.list_topics(topic, timeout=10).topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                raise ConfigError(f"topic {topic} does not exist (run `runplane topics create`)")
            n = self._partitions[topic] = len(meta.partitions)
        return n
