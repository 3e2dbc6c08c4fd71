"""Forgeries written to the real topics, judged by every reader alike (issue 18 item 6).

The pure readers are held to one verdict per forgery in ``tests/unit/test_forgery_readers.py``;
this is the same on a real broker: forged runs are produced to ``journal`` (chains written by
a signing writer, through the transactional producer's header hook, as the executor writes
them), the journal service runs with the writers' public keyring, and then the audit stream,
``runplane journal verify`` (reading Kafka), the Redis run index (fed the audit records twice,
as a re-read would) and an outside consumer decoding audit bytes by ``schemas/README.md`` must
all say BROKEN at the same seq with the same reason — a second start of one slot
(``duplicate_slot``) included.
"""

from __future__ import annotations

import dataclasses
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from test_journal_service import wait_audit

from examples.audit_consumer import SCHEMAS, Decoder, RunVerdicts
from runplane.config import Settings
from runplane.core.chain import Draft, seal
from runplane.journal.index import RunIndex
from runplane.kafka.clients import transactional_producer_config
from runplane.kafka.partition import partition_for
from runplane.kafka.txn import TransactionalProducer
from runplane.runs.read import read_audit, read_run, result_key, verify_exit_code
from runplane.signing.admission import SigningKey
from runplane.signing.journal import Keyring, Signer, journal_headers
from runplane.wire import JournalKind, JournalRecord, ResultEntry, Verdict, encode
from services.journal.loop import AuditLoop
from services.journal.settings import JournalSettings
from tests.helpers.sample import sample_run

pytestmark = pytest.mark.integration


def _write(
    settings: Settings,
    records: list[JournalRecord],
    results: dict[tuple[int, int], ResultEntry],
    signer: Signer | None,
) -> None:
    """One transaction, signed on ``journal`` when ``signer`` is given (the writers' hook)."""
    producer = TransactionalProducer(
        transactional_producer_config(settings, f"forger-{uuid.uuid4().hex[:8]}"),
        headers=journal_headers(signer, settings.topic("journal")),
    )
    producer.init()
    producer.begin()
    for e in results.values():
        producer.produce(
            settings.topic("results"),
            result_key(e.session_id, e.era, e.call_seq).encode(),
            encode(e),
            partition=partition_for(e.session_id, settings.partitions),
        )
    for r in records:
        producer.produce(settings.topic("journal"), r.session_id.encode(), encode(r))
    producer.commit([], None)
    producer.flush(10)


@contextmanager
def _journal_service(settings: Settings, keyring: Keyring) -> Iterator[None]:
    js = JournalSettings(
        base=settings, body_grace_ms=1500, max_hold_ms=4500, index=False, keyring=keyring
    )
    loop, stop, errors = AuditLoop(js), threading.Event(), []

    def body() -> None:
        try:
            loop.run(stop)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    try:
        assert loop.ready.wait(60), "journal service never got its partitions"
        yield
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors


def _extension(run: str, records: list[JournalRecord], kind: JournalKind) -> JournalRecord:
    last = records[-1]
    return seal(Draft(run, last.seq + 1, 0, kind, last.stamp_ms + 1), last.hash)


def test_every_reader_agrees_on_forgeries_written_to_kafka(settings: Settings) -> None:
    key = Ed25519PrivateKey.generate()
    writer = Signer(SigningKey("w1", key))
    keyring = Keyring({"w1": key.public_key()})
    cases: dict[str, tuple[int, str, int]] = {}  # run -> (broken seq, fault, records)

    def forge(name: str) -> tuple[str, list[JournalRecord], dict[tuple[int, int], ResultEntry]]:
        run = f"r-{name}-{uuid.uuid4().hex[:6]}"
        records, results = sample_run(run, calls=2)
        return run, records, dict(results)

    # A copy of seq 2 re-sent after the run ended (signed: a genuine record, replayed).
    run, recs, res = forge("resend")
    _write(settings, [*recs, recs[2]], res, writer)
    cases[run] = (6, "after_end", len(recs) + 1)
    # A well-chained, signed record appended after RUN_COMPLETED.
    run, recs, res = forge("append")
    _write(settings, [*recs, _extension(run, recs, JournalKind.RUN_PARKED)], res, writer)
    cases[run] = (6, "after_end", len(recs) + 1)
    # A run not ended yet, extended and ended by a writer without the key.
    run, recs, res = forge("foreign")
    _write(settings, recs[:-1], res, writer)
    _write(settings, [_extension(run, recs[:-1], JournalKind.RUN_COMPLETED)], {}, None)
    cases[run] = (5, "bad_signature", len(recs))
    # Call 1 announced twice, the chain re-sealed around it and signed by the writer's key:
    # seq, links, hashes and signatures all check; only one start per slot does not.
    run, recs, res = forge("slot")
    twice = recs[:4]
    for rec in [recs[3], *recs[4:]]:
        twice.append(seal(dataclasses.replace(rec, seq=len(twice)), twice[-1].hash))
    _write(settings, twice, res, writer)
    cases[run] = (4, "duplicate_slot", len(twice))
    # An intact signed run, for contrast.
    good, recs, res = forge("good")
    _write(settings, recs, res, writer)

    index = RunIndex.from_url(settings.redis_url, settings.topic_prefix)
    decoder = Decoder(SCHEMAS, None)
    with _journal_service(settings, keyring):
        for run, (_, _, n) in cases.items():
            wait_audit(settings, run, n)
        wait_audit(settings, good, len(recs))
    try:
        for run, (seq, fault, _) in {**cases, good: (-1, "", 0)}.items():
            audits = read_audit(settings, run)
            outside = RunVerdicts()
            for a in audits + audits:  # decoded from the wire bytes, delivered twice
                verdict = outside.add(decoder.decode(encode(a)))
            index.apply(audits)
            index.apply(audits)  # at-least-once: a re-read changes nothing
            summary = index.get(run)
            assert summary is not None
            code, cli = verify_exit_code(read_run(settings, run, keyring=keyring))
            first = next((a for a in audits if a.verdict is Verdict.BROKEN), None)
            if run == good:
                assert code == 0 and first is None and summary.verdict is Verdict.VERIFIED
                assert verdict["verdict"] == "VERIFIED"
                continue
            assert first is not None, run
            reason = first.reason or ""
            assert (first.broken_at_seq, reason.split(":")[0]) == (seq, fault), first
            assert (cli["broken_at_seq"], cli["reason"]) == (seq, reason), cli
            assert (summary.verdict, summary.broken_at_seq, summary.reason) == (
                Verdict.BROKEN,
                seq,
                reason,
            )
            assert (verdict["verdict"], verdict["broken_at_seq"], verdict["reason"]) == (
                "BROKEN",
                seq,
                reason,
            )
    finally:
        index.clear()
