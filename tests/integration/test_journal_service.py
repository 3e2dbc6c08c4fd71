"""The journal service on the real broker: exactly-once audit, breaks found and quarantined.

Runs are built with the core's chain functions (``tests.helpers.sample``) and produced the
way the executor commits them: journal records and their result entries in one transaction,
results on the session's partition.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from runplane.config import Settings
from runplane.core.chain import seal
from runplane.core.verify import bodies_of, verify_records
from runplane.kafka.clients import consumer_config, transactional_producer_config
from runplane.kafka.partition import partition_for
from runplane.kafka.txn import TransactionalProducer
from runplane.runs.read import read_audit, read_run, result_key, verify_exit_code
from runplane.wire import (
    AuditRecord,
    JournalKind,
    JournalRecord,
    ResultEntry,
    Verdict,
    Wake,
    decode,
    encode,
)
from services.journal import metrics as m
from services.journal.loop import AuditLoop
from services.journal.settings import JournalSettings
from tests.helpers.sample import sample_run


def produce_run(
    settings: Settings,
    records: list[JournalRecord],
    results: Mapping[Any, ResultEntry],
    *,
    tag: str = "",
) -> None:
    producer = TransactionalProducer(
        transactional_producer_config(settings, f"test-writer-{uuid.uuid4().hex[:8]}{tag}")
    )
    producer.init()
    producer.begin()
    for e in results.values():
        p = partition_for(e.session_id, settings.partitions)
        producer.produce(
            settings.topic("results"),
            result_key(e.session_id, e.era, e.call_seq).encode(),
            encode(e),
            partition=p,
        )
    for r in records:
        producer.produce(settings.topic("journal"), r.session_id.encode(), encode(r))
    producer.commit([], None)
    producer.flush(10)


@contextmanager
def running(settings: Settings, grace_ms: int = 1500) -> Iterator[AuditLoop]:
    js = JournalSettings(
        base=settings, body_grace_ms=grace_ms, max_hold_ms=grace_ms * 3, index=False
    )
    loop = AuditLoop(js)
    stop = threading.Event()
    errors: list[BaseException] = []

    def body() -> None:
        try:
            loop.run(stop)
        except BaseException as exc:  # surfaced to the test below
            errors.append(exc)

    t = threading.Thread(target=body, daemon=True)
    t.start()
    try:
        assert loop.ready.wait(60), "journal service never got its partitions"
        yield loop
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors


def wait_audit(settings: Settings, run_id: str, n: int, timeout: float = 45.0) -> list[AuditRecord]:
    deadline = time.monotonic() + timeout
    audits: list[AuditRecord] = []
    while time.monotonic() < deadline:
        audits = read_audit(settings, run_id)
        if len(audits) >= n:
            return audits
        time.sleep(0.5)
    raise AssertionError(f"{run_id}: {len(audits)} audit records after {timeout}s, wanted {n}")


def inbox_wakes(settings: Settings) -> list[Wake]:
    consumer = Consumer(
        consumer_config(settings, f"t-{uuid.uuid4().hex[:8]}", **{"enable.partition.eof": True})
    )
    topic = settings.topic("runs.inbox")
    consumer.assign([TopicPartition(topic, p, 0) for p in range(settings.partitions)])
    pending, out = set(range(settings.partitions)), []
    deadline = time.monotonic() + 30
    while pending and time.monotonic() < deadline:
        for msg in consumer.consume(100, 0.5):
            if msg.error() is not None:
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    pending.discard(msg.partition())
                continue
            rec = decode(msg.value())
            if isinstance(rec, Wake):
                out.append(rec)
    consumer.close()
    return out


def test_a_completed_run_is_audited_verified_in_order_once_across_a_restart(
    settings: Settings,
) -> None:
    run = f"r-good-{uuid.uuid4().hex[:6]}"
    records, results = sample_run(run, calls=3)
    half = 4  # admitted, announce 0, record 0, announce 1
    first_results = {k: v for k, v in results.items() if k == (0, 0)}
    rest_results = {k: v for k, v in results.items() if k != (0, 0)}
    produce_run(settings, records[:half], first_results)
    with running(settings):
        wait_audit(settings, run, half)
    # the service is down while the rest of the run is written; a new instance carries on
    produce_run(settings, records[half:], rest_results)
    with running(settings):
        audits = wait_audit(settings, run, len(records))
        time.sleep(2)  # give a duplicate the chance to appear
    audits = read_audit(settings, run)
    assert [a.seq for a in audits] == list(range(len(records)))  # in order, once each
    assert {a.verdict for a in audits} == {Verdict.VERIFIED}
    assert [a.hash for a in audits] == [r.hash for r in records]
    assert audits[0].capability == "refund" and audits[-1].case_id == "c-sample"
    assert sum(a.cost.tokens_in for a in audits if a.cost) == 30
    # the CLI's verification, read straight from Kafka, agrees
    code, report = verify_exit_code(read_run(settings, run))
    assert code == 0 and report["verified"]


def _after(last: JournalRecord, kind: JournalKind, attrs: dict[str, str]) -> JournalRecord:
    draft = dataclasses.replace(
        last,
        seq=last.seq + 1,
        kind=kind,
        call_seq=None,
        family=None,
        name=None,
        request_witness=None,
        body_digest=None,
        cost=None,
        attrs=attrs,
        stamp_ms=last.stamp_ms + 1,
    )
    return seal(draft, last.hash)


def test_an_erasure_after_the_end_is_audited_and_nothing_after_it_across_a_restart(
    settings: Settings,
) -> None:
    run = f"r-erased-{uuid.uuid4().hex[:6]}"
    records, results = sample_run(run, calls=2)
    erasure = _after(
        records[-1], JournalKind.RUN_ERASED, {"repair": "erase", "by": "ops", "bodies": "2"}
    )
    produce_run(settings, [*records, erasure], results)
    with running(settings):
        audits = wait_audit(settings, run, len(records) + 1)
    assert audits[-1].kind is JournalKind.RUN_ERASED and audits[-1].verdict is Verdict.VERIFIED
    assert audits[-1].attrs["by"] == "ops"  # the auditor learns who erased, and how much
    # A record after the erasure, met by a service that restored its tip from `audit`.
    forged = _after(erasure, JournalKind.RUN_RESUMED, {"repair": "resume", "by": "ops"})
    produce_run(settings, [forged], {})
    with running(settings):
        audits = wait_audit(settings, run, len(records) + 2)
    assert audits[-1].verdict is Verdict.BROKEN and "after_end" in (audits[-1].reason or "")


def test_a_second_start_of_a_slot_across_a_restart_is_broken(settings: Settings) -> None:
    # Call 1 announced (seq 3) and audited; the service restarts (its slot states folded from
    # journal up to its committed offsets); then a well-chained second announce of call 1.
    run = f"r-slot-{uuid.uuid4().hex[:6]}"
    records, results = sample_run(run, calls=3)
    produce_run(settings, records[:4], {k: v for k, v in results.items() if k == (0, 0)})
    with running(settings):
        wait_audit(settings, run, 4)
    forged = seal(dataclasses.replace(records[3], seq=4), records[3].hash)
    produce_run(settings, [forged], {})
    with running(settings):
        audits = wait_audit(settings, run, 5)
    last = audits[-1]
    assert (last.seq, last.verdict, last.broken_at_seq) == (4, Verdict.BROKEN, 4)
    assert last.reason is not None and last.reason.startswith("duplicate_slot: ")
    code, report = verify_exit_code(read_run(settings, run))
    assert code != 0 and (report["broken_at_seq"], report["reason"]) == (4, last.reason)


def _tampered(settings: Settings) -> dict[str, tuple[int, str, list[JournalRecord], dict]]:
    """run id -> (expected broken seq, fault, records, results) for three tamperings."""
    out = {}
    # a wrong hash: content of seq 3 changed after sealing
    run = f"r-hash-{uuid.uuid4().hex[:6]}"
    recs, res = sample_run(run, calls=3)
    recs[3] = dataclasses.replace(recs[3], stamp_ms=recs[3].stamp_ms + 7)
    out[run] = (3, "bad_hash", recs, res)
    # a skipped seq: seq 2 never written
    run = f"r-gap-{uuid.uuid4().hex[:6]}"
    recs, res = sample_run(run, calls=3)
    out[run] = (2, "gap", recs[:2] + recs[3:], res)
    # a body whose digest does not match (call 1's value changed; its record is seq 4)
    run = f"r-body-{uuid.uuid4().hex[:6]}"
    recs, res = sample_run(run, calls=3)
    res[(0, 1)] = dataclasses.replace(res[(0, 1)], value_json=json.dumps({"n": 12345}))
    out[run] = (4, "body_digest_mismatch", recs, res)
    return out


def test_tampered_chains_are_broken_at_the_right_seq_counted_and_quarantined(
    settings: Settings,
) -> None:
    cases = _tampered(settings)
    good = f"r-fine-{uuid.uuid4().hex[:6]}"
    good_recs, good_res = sample_run(good, calls=2)
    for _, _, recs, res in cases.values():
        produce_run(settings, recs, res)
    produce_run(settings, good_recs, good_res)
    breaks_before = m.CHAIN_BREAKS._value.get()
    with running(settings):
        for rid, (_, _, recs, _) in cases.items():
            wait_audit(settings, rid, len(recs))
        wait_audit(settings, good, len(good_recs))
    assert m.CHAIN_BREAKS._value.get() - breaks_before == len(cases)
    wakes = {w.session_id: w for w in inbox_wakes(settings)}
    for rid, (seq, fault, recs, res) in cases.items():
        audits = read_audit(settings, rid)
        first_bad = next(a for a in audits if a.verdict is Verdict.BROKEN)
        assert first_bad.broken_at_seq == seq and (first_bad.reason or "").startswith(fault), (
            first_bad
        )
        assert all(a.verdict is Verdict.VERIFIED for a in audits if a.seq < seq)
        # quarantined: exactly one wake naming the break
        assert wakes[rid].reason.startswith(f"quarantine:{fault} at seq {seq}")
        # the CLI, reading Kafka directly, agrees with the service
        code, report = verify_exit_code(read_run(settings, rid))
        assert code == 1 and report["broken_at_seq"] == seq
        assert verify_records(rid, recs, bodies_of(dict(res))).broken_at_seq == seq
    assert good not in wakes
    assert {a.verdict for a in read_audit(settings, good)} == {Verdict.VERIFIED}


def test_a_body_never_written_is_body_missing_not_broken(settings: Settings) -> None:
    run = f"r-nobody-{uuid.uuid4().hex[:6]}"
    recs, res = sample_run(run, calls=2)
    del res[(0, 1)]
    produce_run(settings, recs, res)
    with running(settings, grace_ms=1000):
        audits = wait_audit(settings, run, len(recs))
    by_seq = {a.seq: a.verdict for a in audits}
    assert by_seq[4] is Verdict.BODY_MISSING
    assert all(v is Verdict.VERIFIED for s, v in by_seq.items() if s != 4)
    assert run not in {w.session_id for w in inbox_wakes(settings)}
    code, report = verify_exit_code(read_run(settings, run))
    assert code == 2 and report["body_absent"] == [4]


def test_many_runs_in_one_transaction_each_audited_once(settings: Settings) -> None:
    runs = {}
    for i in range(10):
        rid = f"r-many-{i}-{uuid.uuid4().hex[:4]}"
        runs[rid] = sample_run(rid, calls=2)
    produce_run(
        settings,
        # interleaved: every run's seq 0, then every run's seq 1, ...
        sorted((r for recs, _ in runs.values() for r in recs), key=lambda r: r.seq),
        {(k, rid): e for rid, (_, res) in runs.items() for k, e in res.items()},
    )
    with running(settings):
        for rid, (recs, _) in runs.items():
            wait_audit(settings, rid, len(recs))
    for rid, (recs, _) in runs.items():
        audits = read_audit(settings, rid)
        assert [a.seq for a in audits] == list(range(len(recs)))
        assert {a.verdict for a in audits} == {Verdict.VERIFIED}


def test_example_audit_consumer_prints_a_line_per_record(settings: Settings) -> None:
    run = f"r-example-{uuid.uuid4().hex[:6]}"
    records, results = sample_run(run, calls=2)
    produce_run(settings, records, results)
    with running(settings):
        wait_audit(settings, run, len(records))
    example = Path(__file__).resolve().parents[2] / "examples" / "audit_consumer.py"
    done = subprocess.run(
        [
            sys.executable,
            str(example),
            "--bootstrap",
            settings.bootstrap_servers,
            "--topic",
            settings.topic("audit"),
            "--from-beginning",
            "--idle-exit",
            "8",
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert len(lines) == len(records), done.stdout + done.stderr
    assert [int(ln.split(" #")[1].split()[0]) for ln in lines] == list(range(len(records)))
    assert all(run in ln and ln.endswith("VERIFIED") for ln in lines)
    assert "EFFECT_RECORDED call 0/1 generation model:scripted/echo cost 10+5 tok 0.5u" in lines[4]
