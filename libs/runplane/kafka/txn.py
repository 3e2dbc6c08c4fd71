"""The transactional producer the processor (and any loop needing atomic writes) uses.

Error classification, from librdkafka's transactional API contract:

    KafkaError
    ├── retriable()            → call the same operation again (commit/abort/init are idempotent)
    ├── txn_requires_abort()   → TxnAbortable: abort, rewind the consumer to the committed
    │                             offsets, discard table overlays, go on (a zombie whose group
    │                             generation is stale lands here: UNKNOWN_MEMBER_ID /
    │                             ILLEGAL_GENERATION on the offset commit)
    ├── fatal() / fenced       → TxnFatal: the producer is unusable or another instance owns
    │                             our transactional.id; stop, exit non-zero and let the
    │                             supervisor restart us with the same transactional.id
    └── neither flag           → TxnAbortable(broken=True): the handle is in a state it cannot
                                  leave (INVALID_TXN_STATE from the coordinator during a broker
                                  fault, a local _STATE error). ``abort`` then *renews* the
                                  handle: a fresh librdkafka producer with the same
                                  transactional.id, whose init_transactions bumps the epoch and
                                  aborts (or waits out) what the old handle left open — what a
                                  restart by the supervisor would do, without dropping the
                                  consumer's group membership and restored state.

Decisions read the error's typed flags and codes, never its message.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from runplane.errors import RunplaneError, TerminalError
from runplane.kafka.acls import AUTHORIZATION_CODES, authorization_hint

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
    """The open transaction must be aborted; its outputs, table changes and offsets are void.

    ``broken``: the producer handle itself is in a state it cannot leave; ``abort`` renews it."""

    def __init__(self, message: str, *, code: int | None = None, broken: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.broken = broken


class TxnFatal(TerminalError):
    """The transactional producer is fenced or broken; the process must stop and restart."""

    def __init__(self, message: str, *, code: int | None = None, fenced: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.fenced = fenced


class ErrorClass(Enum):
    RETRIABLE = "retriable"
    ABORTABLE = "abortable"
    BROKEN = "broken"
    FATAL = "fatal"


def classify(err: KafkaError) -> ErrorClass:
    """Which of the four responses an error from the transactional API calls for."""
    if err.fatal() or err.code() in _FENCED_CODES or err.code() in AUTHORIZATION_CODES:
        # A missing ACL is not fixed by aborting and retrying: stop, saying what to grant.
        return ErrorClass.FATAL
    if err.txn_requires_abort():
        return ErrorClass.ABORTABLE
    if err.retriable():
        return ErrorClass.RETRIABLE
    # Neither flag: the operation failed for good on this handle (an invalid state). Not
    # fenced, so our epoch may still be ours: a fresh handle with the same transactional.id
    # recovers, and its init_transactions leaves no half-written transaction behind.
    return ErrorClass.BROKEN


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
        factory: Callable[[dict[str, Any]], Any] = Producer,
    ) -> None:
        self.transactional_id = str(config["transactional.id"])
        # Headers a record gets from its topic and value (the journal's writer signature,
        # ``runplane.signing.journal.journal_headers``); None: no headers.
        self._headers = headers
        self._config = dict(config)
        self._factory = factory
        self._producer = factory(self._config)
        self.renewals = 0
        self._op_timeout_s = op_timeout_s
        self._retry_sleep_s = retry_sleep_s
        self.in_transaction = False

    def init(self, timeout_s: float = 120.0) -> None:
        """Register the transactional.id; aborts a predecessor's open transaction (fencing it).

        The first call after a broker start can be slow while ``__transaction_state`` loads.
        """
        try:
            self._call(
                "init_transactions", lambda: self._producer.init_transactions(timeout_s), timeout_s
            )
        except TxnAbortable as exc:  # there is no transaction to abort: we cannot start
            raise TxnFatal(f"init_transactions failed: {exc}", code=exc.code) from exc

    def begin(self) -> None:
        self._call("begin_transaction", self._producer.begin_transaction, self._op_timeout_s)
        self.in_transaction = True

    def produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None = None,
        headers: Sequence[tuple[str, str | bytes | None]] | None = None,
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
        """Abort the open transaction, if any. Raises TxnFatal only.

        An abort the handle cannot complete (it is in a state it cannot leave, or the
        coordinator did not answer in time) renews the handle: the new one's
        init_transactions aborts what the old one left open, so the transaction is over
        either way."""
        if not self.in_transaction:
            return
        try:
            self._call(
                "abort_transaction",
                lambda: self._producer.abort_transaction(self._op_timeout_s),
                self._op_timeout_s,
            )
        except TxnAbortable as exc:
            log.warning("abort_transaction failed (%s); renewing the producer", exc)
            self.renew()
        finally:
            self.in_transaction = False

    def renew(self) -> None:
        """Replace the librdkafka handle with a fresh one under the same transactional.id.

        Its init_transactions bumps the epoch, fencing the old handle, and aborts what it left
        open (waiting out a commit already under way). Raises TxnFatal when that fails too."""
        old = self._producer
        with contextlib.suppress(Exception):  # the old handle's queue is void either way
            old.purge()
        self._producer = self._factory(self._config)
        self.renewals += 1
        self.in_transaction = False
        # Bounded by the operation timeout, not init's start-up allowance: a renewal that
        # cannot complete falls back to the old answer (exit; the supervisor restarts us).
        self.init(self._op_timeout_s)

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
            hint = authorization_hint(err.code())
            if hint is not None:
                message = f"{message}: {hint}"
            fenced = err.code() in _FENCED_CODES and hint is None
            raise TxnFatal(message, code=err.code(), fenced=fenced) from exc
        raise TxnAbortable(message, code=err.code(), broken=cls is ErrorClass.BROKEN) from exc
