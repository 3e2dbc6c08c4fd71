"""The transactional producer the processor (and any loop needing atomic writes) uses.

Error classification, from librdkafka's transactional API contract (KAFKA-NOTES.md):

    KafkaError
    ├── retriable()            → call the same operation again (commit/abort/init are idempotent)
    ├── txn_requires_abort()   → TxnAbortable: abort, rewind the consumer to the committed
    │                             offsets, discard table overlays, go on (a zombie whose group
    │                             generation is stale lands here: UNKNOWN_MEMBER_ID /
    │                             ILLEGAL_GENERATION on the offset commit)
    └── fatal() / fenced / else → TxnFatal: the producer is unusable; stop, exit non-zero and
                                  let the supervisor restart us with the same transactional.id

Decisions read the error's typed flags and codes, never its message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from runplane.errors import RunplaneError, TerminalError

log = logging.getLogger(__name__)

T = TypeVar("T")
HeadersFor = Callable[[str, bytes | None], list[tuple[str, bytes]] | None]

# Codes that mean another producer owns our transactional.id now, or our epoch is gone.
_FENCED_CODES = frozenset(
    {
        KafkaError._FENCED,
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    }
)


class TxnAbortable(RunplaneError):
    """The open transaction must be aborted; its outputs, table changes and offsets are void."""

    def __init__(self, message: str, *, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class TxnFatal(TerminalError):
    """The transactional producer is fenced or broken; the process must stop and restart."""

    def __init__(self, message: str, *, code: int | None = None, fenced: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.fenced = fenced


class ErrorClass(Enum):
    RETRIABLE = "retriable"
    ABORTABLE = "abortable"
    FATAL = "fatal"


def classify(err: KafkaError) -> ErrorClass:
    """Which of the three responses an error from the transactional API calls for."""
    if err.fatal() or err.code() in _FENCED_CODES:
        return ErrorClass.FATAL
    if err.txn_requires_abort():
        return ErrorClass.ABORTABLE
    if err.retriable():
        return ErrorClass.RETRIABLE
    # Neither flag: librdkafka says the operation failed for good, e.g. an invalid state.
    # Stopping is the only response that cannot leave a half-written transaction behind.
    return ErrorClass.FATAL


def _kafka_error(exc: KafkaException) -> KafkaError:
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        return err
    return KafkaError(KafkaError._FAIL, str(exc))


class TransactionalProducer:
    """A confluent-kafka transactional producer with the retry/abort/fatal policy applied.

    ``begin``/``produce``/``commit``/``abort`` raise only ``TxnAbortable`` or ``TxnFatal``;
    retriable errors are retried here until ``op_timeout_s`` runs out (then: abortable).
    """

    def __init__(
        self,
        config: dict[str, Any],
        *,
        op_timeout_s: float = 30.0,
        retry_sleep_s: float = 0.1,
        headers: HeadersFor | None = None,
    ) -> None:
        self.transactional_id = str(config["transactional.id"])
        # Headers a record gets from its topic and value (the journal's writer signature,
        # ``runplane.journal.signing.journal_headers``); None: no headers.
        self._headers = headers
        self._producer = Producer(config)
        self._op_timeout_s = op_timeout_s
        self._retry_sleep_s = retry_sleep_s
        self.in_transaction = False

    def init(self, timeout_s: float = 120.0) -> None:
        """Register the transactional.id; aborts a predecessor's open transaction (fencing it).

        The first call after a broker start can be slow while ``__transaction_state`` loads.
        """
        self._call(
            "init_transactions", lambda: self._producer.init_transactions(timeout_s), timeout_s
        )

    def begin(self) -> None:
        self._call("begin_transaction", self._producer.begin_transaction, self._op_timeout_s)
        self.in_transaction = True

    def produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None = None,
        headers: list[tuple[str, str | bytes | None]] | None = None,
    ) -> None:
        """Queue one record in the open transaction; waits for room when the queue is full."""
        kwargs: dict[str, Any] = {"key": key, "value": value}
        if partition is not None:
            kwargs["partition"] = partition
        extra = self._headers(topic, value) if self._headers is not None else None
        if headers or extra:
            kwargs["headers"] = [*(headers or ()), *(extra or ())]
        deadline = time.monotonic() + self._op_timeout_s
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                return
            except BufferError:
                # The local queue is full: serve delivery reports to drain it, then retry.
                if time.monotonic() > deadline:
                    raise TxnAbortable("producer queue stayed full") from None
                self._producer.poll(0.05)
            except KafkaException as exc:
                self._raise(exc, "produce")

    def commit(self, offsets: Sequence[TopicPartition], group_metadata: Any | None) -> None:
        """Send the input offsets with the group metadata (fencing zombies) and commit."""
        if offsets and group_metadata is not None:
            self._call(
                "send_offsets_to_transaction",
                lambda: self._producer.send_offsets_to_transaction(
                    list(offsets), group_metadata, self._op_timeout_s
                ),
                self._op_timeout_s,
            )
        self._call(
            "commit_transaction",
            lambda: self._producer.commit_transaction(self._op_timeout_s),
            self._op_timeout_s,
        )
        self.in_transaction = False

    def abort(self) -> None:
        """Abort the open transaction, if any. Raises TxnFatal only."""
        if not self.in_transaction:
            return
        try:
            self._call(
                "abort_transaction",
                lambda: self._producer.abort_transaction(self._op_timeout_s),
                self._op_timeout_s,
            )
        except TxnAbortable as exc:
            # An abort that cannot complete leaves the producer unusable.
            raise TxnFatal(f"abort_transaction failed: {exc}", code=exc.code) from exc
        finally:
            self.in_transaction = False

    def poll(self, timeout_s: float = 0.0) -> None:
        self._producer.poll(timeout_s)

    def flush(self, timeout_s: float = 10.0) -> int:
        return int(self._producer.flush(timeout_s))

    def _call(self, what: str, op: Callable[[], T], timeout_s: float) -> T:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return op()
            except KafkaException as exc:
                err = _kafka_error(exc)
                if classify(err) is ErrorClass.RETRIABLE and time.monotonic() < deadline:
                    log.warning("retrying %s: %s", what, err.str())
                    time.sleep(self._retry_sleep_s)
                    continue
                self._raise(exc, what)

    def _raise(self, exc: KafkaException, what: str) -> Any:
        err = _kafka_error(exc)
        cls = classify(err)
        message = f"{what} failed: {err.name()}: {err.str()}"
        if cls is ErrorClass.FATAL:
            raise TxnFatal(message, code=err.code(), fenced=err.code() in _FENCED_CODES) from exc
        raise TxnAbortable(message, code=err.code()) from exc
