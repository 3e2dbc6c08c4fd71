"""The emitter client: ask admission for a run and get its answer.

    with Client(settings) as client:
        reply = client.admit("refund", "order-17", {"invoice_id": "inv-1"}, initiator="ivan")
        reply.outcome, reply.run_id          # ADMITTED / DUPLICATE / REFUSED (+ reason)

``admit`` produces an AdmissionRequest to ``admission`` (key = the admission key) and waits
for the AdmissionReply on ``admission.replies``: it reads only the partition the key hashes
to (murmur2, like every producer), from the end as it was *before* the request was sent, and
keeps the first reply carrying that key. Retrying with the same key is always safe — one key,
at most one run, ever — so a timeout is a ``RetryableError``.

``initiator`` names the worklist principal on whose behalf the run acts (four-eyes refuses
that principal on the run's tasks). It is never guessed from the OS user: pass it, or set
``RUNPLANE_INITIATOR`` (``Settings.initiator``); with neither, ``admit`` raises ConfigError.

Signed admission: with a ``SigningKey`` (or ``RUNPLANE_EMITTER_KEY`` /
``RUNPLANE_EMITTER_KEY_FILE`` in the environment) every request carries an Ed25519 signature
in its record headers (``runplane.signing``); its tenant must be the one the key's emitter is
registered for. Without one, requests go unsigned, which only a dev-mode admission accepts.

With ``wait=True`` it then watches ``sessions`` for the run until it completes, fails or is
quarantined (``Client.wait`` returns that SessionSnapshot).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from runplane.config import Settings
from runplane.errors import ConfigError, RetryableError, WireError
from runplane.kafka.clients import consumer_config, producer_config
from runplane.kafka.partition import partition_for
from runplane.signing import SigningKey
from runplane.wire import (
    AdmissionOutcome,
    AdmissionReply,
    AdmissionRequest,
    RunStatus,
    Serde,
    SessionSnapshot,
)

__all__ = ["FINAL_STATUSES", "Client"]

_SETTLING = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)

FINAL_STATUSES = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.QUARANTINED})


class Client:
    """One emitter. Not thread-safe; cheap to create, close it when done."""

    def __init__(self, settings: Settings, *, signing_key: SigningKey | None = None) -> None:
        """``signing_key`` signs every request (``runplane.signing``); None reads
        ``RUNPLANE_EMITTER_KEY`` / ``RUNPLANE_EMITTER_KEY_FILE``, and with neither set the
        requests go unsigned (admitted only by an admission in dev mode)."""
        self._settings = settings
        self._signing_key = signing_key if signing_key is not None else SigningKey.from_env()
        self._serde = Serde.from_settings(settings)
        self._producer = Producer(producer_config(settings))
        self._consumer = Consumer(
            consumer_config(
                settings,
                f"runplane-client-{uuid.uuid4().hex[:12]}",  # never commits; assign() only
                **{"enable.partition.eof": True, "fetch.wait.max.ms": 20},
            )
        )
        self._partitions: dict[str, int] = {}

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._producer.flush(10)
        self._consumer.close()

    # --- admission -------------------------------------------------------------------------

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
    ) -> AdmissionReply:
        """Request a run and return admission's answer (after the run ends, with ``wait``).

        ``input`` is any JSON value. ``initiator`` defaults to ``RUNPLANE_INITIATOR``; with
        neither, ``ConfigError``. Raises ``WireError`` for a request that cannot even be built
        (empty or oversized key, bad tenant) and ``RetryableError`` on timeout.
        """
        who = initiator if initiator is not None else self._settings.initiator
        if who is None or not who.strip():
            raise ConfigError(
                "no initiator: pass one (the worklist principal the run acts for) "
                "or set RUNPLANE_INITIATOR"
            )
        request = AdmissionRequest(
            admission_key=key,
            capability=capability,
            input_json=json.dumps(input, separators=(",", ":"), ensure_ascii=False),
            correlation_keys=dict(correlation or {}),
            tenant=tenant,
            initiator=who,
            requested_ms=time.time_ns() // 1_000_000,
        )
        reply = self.send(request, timeout=timeout)
        if wait and reply.outcome != AdmissionOutcome.REFUSED and reply.run_id is not None:
            self.wait(reply.run_id, timeout=timeout)
        return reply

    def send(self, request: AdmissionRequest, *, timeout: float = 30.0) -> AdmissionReply:
        """Produce ``request`` and wait for the reply to its key."""
        key = request.admission_key
        replies = self._settings.topic("admission.replies")
        tp = TopicPartition(replies, partition_for(key, self._count(replies)))
        # Start where the partition ends *now*: our reply can only come after our request.
        high = self._end_offset(tp)
        self._consumer.assign([TopicPartition(tp.topic, tp.partition, high)])
        try:
            self._produce_signed(key.encode("utf-8"), self._serde.encode("admission", request))
            if self._producer.flush(timeout) > 0:
                raise RetryableError(f"request {key!r} not delivered within {timeout}s")
            return self._await_reply(key, timeout)
        finally:
            self._consumer.unassign()

    def _produce_signed(self, key: bytes, value: bytes) -> None:
        """Produce to ``admission``, signed over these exact bytes when there is a key."""
        topic = self._settings.topic("admission")
        if self._signing_key is None:
            self._producer.produce(topic, key=key, value=value)
            return
        # The record's timestamp is the signing time, so admission's replay window compares
        # like with like (a topic with LogAppendTime replaces it with the broker's clock).
        now_ms = time.time_ns() // 1_000_000
        headers = list(self._signing_key.headers(key, value, now_ms))
        self._producer.produce(topic, key=key, value=value, headers=headers, timestamp=now_ms)

    def _await_reply(self, key: str, timeout: float) -> AdmissionReply:
        deadline = time.monotonic() + timeout
        wanted = key.encode("utf-8")
        while time.monotonic() < deadline:
            for msg in self._consumer.consume(100, timeout=0.1):
                if msg.error() is not None or msg.key() != wanted or msg.value() is None:
                    continue
                try:
                    record = self._serde.decode("admission.replies", msg.value() or b"")
                except WireError:
                    continue  # not ours to judge; the key matched by accident of bytes
                if isinstance(record, AdmissionReply):
                    return record
        raise RetryableError(f"no reply for {key!r} within {timeout}s", retry_after=1.0)

    # --- waiting for a run -----------------------------------------------------------------

    def wait(
        self,
        run_id: str,
        *,
        timeout: float = 300.0,
        until: frozenset[RunStatus] = FINAL_STATUSES,
    ) -> SessionSnapshot:
        """The run's SessionSnapshot once its status is in ``until`` (default: ended)."""
        sessions = self._settings.topic("sessions")
        tp = TopicPartition(
            sessions, partition_for(run_id, self._count(sessions)), OFFSET_BEGINNING
        )
        self._consumer.assign([tp])
        wanted = run_id.encode("utf-8")
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                for msg in self._consumer.consume(500, timeout=0.2):
                    err = msg.error()
                    if err is not None or msg.key() != wanted or msg.value() is None:
                        if err is not None and err.code() != KafkaError._PARTITION_EOF:
                            raise RetryableError(f"reading sessions: {err.str()}")
                        continue
                    snap = self._serde.decode("sessions", msg.value() or b"")
                    if isinstance(snap, SessionSnapshot) and snap.status in until:
                        return snap
        finally:
            self._consumer.unassign()
        raise RetryableError(f"run {run_id} did not finish within {timeout}s", retry_after=5.0)

    def _end_offset(self, tp: TopicPartition, timeout: float = 10.0) -> int:
        """The partition's high watermark, riding out a leader move (e.g. a fresh topic)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                _, high = self._consumer.get_watermark_offsets(tp, timeout=timeout)
                return int(high)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                # librdkafka does not flag a stale leader as retriable here, but it is: the
                # metadata of a topic created a moment ago is still settling.
                retriable = isinstance(err, KafkaError) and (
                    err.retriable() or err.code() in _SETTLING
                )
                if not retriable or time.monotonic() > deadline:
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
